"""Free ports for components started on this machine, reserved across processes.

A port that is free when picked is bound by its component a moment later; two
processes picking at once (two drills from one checkout, two xdist workers, a load
generator's locust master) could both pick it. Every pick is therefore recorded, under a
file lock, in a per-user reservation file in the temporary directory: a reserved port is
never picked again while the process that reserved it lives (so a component restarted by
a revert gets its port back), and reservations of dead processes are dropped on the next
pick. The local target's planner (:mod:`gameday.targets.local.plan`) and the load
generator both pick here.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from gameday.errors import TargetError
from gameday.runtime.procs import pid_alive, starttime

LOOPBACK = "127.0.0.1"

#: Ports are picked below Linux's ephemeral range (ip_local_port_range, 32768-60999 by
#: default): a port planned now is bound by its component a moment later, and in between
#: an outgoing connection elsewhere on the machine could be given an ephemeral port.
PORT_RANGE = (20000, 32700)


def _reservations_path() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"gameday-ports-{uid}.json"


class PortPicker:
    """Port picks under the reservation lock (:func:`picking`); :meth:`commit` records them."""

    def __init__(self) -> None:
        self.path = _reservations_path()
        self.taken: dict[str, list[int | None]] = {}
        self.new: list[int] = []

    def load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            data = {}  # absent or damaged: it only ever holds hints, start afresh
        if not isinstance(data, dict):
            data = {}
        self.taken = {}
        for port, owner in data.items():
            with contextlib.suppress(TypeError, ValueError, IndexError):
                pid, start = int(owner[0]), (None if owner[1] is None else int(owner[1]))
                if pid_alive(pid, start):
                    self.taken[str(int(port))] = [pid, start]

    def reserved(self, port: int) -> bool:
        return str(port) in self.taken or port in self.new

    def free_port(self, host: str = LOOPBACK, kind: int = socket.SOCK_STREAM) -> int:
        for _ in range(64):
            port = random.randrange(*PORT_RANGE)
            if self.reserved(port):
                continue
            with socket.socket(socket.AF_INET, kind) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
            self.new.append(port)
            return port
        for _ in range(16):  # crowded: let the OS pick
            with socket.socket(socket.AF_INET, kind) as s:
                s.bind((host, 0))
                port = int(s.getsockname()[1])
            if not self.reserved(port):
                self.new.append(port)
                return port
        raise TargetError(f"no free {'UDP' if kind == socket.SOCK_DGRAM else 'TCP'} port on {host}")

    def forget(self, port: int) -> None:
        """Drop a pick that turned out unusable (it was reserved in this batch only)."""
        with contextlib.suppress(ValueError):
            self.new.remove(port)

    def commit(self) -> None:
        me = [os.getpid(), starttime(os.getpid())]
        for port in self.new:
            self.taken[str(port)] = me
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.taken))
        os.replace(tmp, self.path)


@contextlib.contextmanager
def picking() -> Iterator[PortPicker]:
    picker = PortPicker()
    try:
        lock = FileLock(str(picker.path) + ".lock", timeout=30)
        lock.acquire()
    except Timeout as exc:
        raise TargetError(f"could not lock the port reservations {picker.path} in 30 s: another process "
                          "holds its lock; remove the .lock file if no gameday runs") from exc
    try:
        picker.load()
        yield picker
        picker.commit()
    finally:
        lock.release()


def release(ports: Iterable[int]) -> None:
    """Give back ports this process reserved."""
    mine = os.getpid()
    # Best effort: an unreleased reservation only lasts until this process exits.
    with contextlib.suppress(OSError, TimeoutError), FileLock(str(_reservations_path()) + ".lock", timeout=5):
        picker = PortPicker()
        picker.load()
        for port in ports:
            owner = picker.taken.get(str(port))
            if owner is not None and owner[0] == mine:
                del picker.taken[str(port)]
        picker._write()


def free_port(host: str = LOOPBACK, kind: int = socket.SOCK_STREAM) -> int:
    """A port that is free on *host* right now, outside the ephemeral range when possible,
    and reserved for this process (see the module docstring)."""
    with picking() as picker:
        return picker.free_port(host, kind)


def port_free(host: str, port: int, kind: int = socket.SOCK_STREAM) -> bool:
    """True when a socket of *kind* (TCP by default) can bind *host*:*port* right now."""
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
