"""Process lifetime: children that die with their owner, and a registry to find the rest.

Every process a run starts (the component launcher and what it forks, nats-server,
locust master and workers, pytest under ``gameday drill``) is tied to its owner with
Linux's ``PR_SET_PDEATHSIG``, so even ``kill -9`` of the owner takes them down. Two
details matter:

* the death signal fires when the *thread* that forked the child exits, not the
  process; :func:`spawn` therefore forks from the main thread, or from one spawner
  thread that lives as long as the process when called from any other thread;
* the owner may already be gone by the time the child calls ``prctl``; the child then
  checks its parent pid and exits at once instead of running as an orphan.

Where the OS has no ``PR_SET_PDEATHSIG`` (or for the instant between fork and
``prctl``), a :class:`ProcRegistry` file under ``<reports>/.gameday/procs/`` records
each process (pid and kernel start time, against pid reuse), and
:func:`stop_orphaned` (used by ``gameday restore`` and ``gameday down``) stops the
registered processes of owners that died.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    return getattr(libc, "prctl", None)


# Resolved once in the parent: the child between fork and exec should do as little as
# possible (no dlopen, no imports), only the prctl call itself.
_PRCTL = _load_prctl()

HAVE_PDEATHSIG = _PRCTL is not None
"""True where children can be told to die with their parent (Linux)."""


def die_with_parent(sig: int, expected_parent: int) -> None:
    """In a freshly forked child: receive *sig* when the parent thread exits.

    Exits the child at once (code 1) if the parent already died before the call
    (its parent pid is no longer *expected_parent*): the death signal would never come.
    A no-op where the OS has no ``PR_SET_PDEATHSIG``.
    """
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, ctypes.c_ulong(sig), 0, 0, 0)
    if os.getppid() != expected_parent:
        os._exit(1)


def preexec_dies_with_parent(sig: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child gets *sig* when the
    calling thread (make it a long-lived one: see :func:`spawn`) exits. None where
    the OS cannot do it."""
    if _PRCTL is None:
        return None
    parent = os.getpid()
    return lambda: die_with_parent(sig, parent)


RUN_DIR_ENV = "GAMEDAY_RUN_DIR"
"""Set by ``gameday drill`` for its pytest: the run directory it created (JUnit and Allure
output go there too); ``gameday.plugin.session.prepare`` uses it instead of naming its own."""


def run_token() -> str:
    """``<time>-<pid>-<random>``: unique per run on this machine, sortable by time.

    Two runs started in the same second from one checkout differ by pid; the random
    part guards against pid reuse.
    """
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"


# -- spawning from a thread that outlives the children -----------------------------------------
_spawn_queue: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_spawner_lock = threading.Lock()
_spawner: threading.Thread | None = None


def _spawner_loop() -> None:
    while True:
        fn, fut = _spawn_queue.get()
        if not fut.set_running_or_notify_cancel():
            continue
        try:
            fut.set_result(fn())
        except BaseException as exc:  # noqa: BLE001  (handed to the caller's thread, which re-raises it)
            fut.set_exception(exc)


def _in_long_lived_thread(fn: Callable[[], Any]) -> Any:
    """Run *fn* in the main thread or in the process-wide spawner thread.

    A child's death signal is tied to the thread that forked it; a short-lived thread
    (an observer reverting a fault from a stop condition, say) would kill it on exit.
    """
    if threading.current_thread() is threading.main_thread():
        return fn()
    global _spawner  # noqa: PLW0603  (one spawner per process: it is the process's fork thread)
    with _spawner_lock:
        if _spawner is None or not _spawner.is_alive():
            # A daemon thread runs until the process itself ends, which is exactly when
            # the children it forked should receive their death signal.
            _spawner = threading.Thread(target=_spawner_loop, name="gameday-spawner", daemon=True)
            _spawner.start()
    fut: Future[Any] = Future()
    _spawn_queue.put((fn, fut))
    return fut.result()


def spawn(argv: list[str], *, death_signal: int | None = signal.SIGKILL, ignore: tuple[int, ...] = (),
          **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **kwargs)`` whose child receives *death_signal* when this
    process dies (``kill -9`` included); None for a child that may outlive us.

    SIGKILL is the default: it also ends a child frozen with SIGSTOP by a drill.
    *ignore*: signals the child starts with ignored (kept across exec; a Python child then
    installs no KeyboardInterrupt for SIGINT until it sets a handler of its own).
    """
    dies = preexec_dies_with_parent(death_signal) if death_signal is not None else None

    def ignoring() -> None:
        for sig in ignore:
            signal.signal(sig, signal.SIG_IGN)
        if dies is not None:
            dies()

    preexec = ignoring if ignore else dies
    if preexec is None:
        return subprocess.Popen(argv, **kwargs)
    proc: subprocess.Popen[bytes] = _in_long_lived_thread(
        lambda: subprocess.Popen(argv, preexec_fn=preexec, **kwargs))  # noqa: PLW1509  (see die_with_parent)
    return proc


# -- /proc ------------------------------------------------------------------------------------------
def _proc_stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # The command name (field 2) may contain spaces; it is inside the last parentheses.
    return [raw[: raw.index("(")].strip(), "comm", *raw[raw.rindex(")") + 2 :].split()]


def starttime(pid: int) -> int | None:
    """Kernel start time of *pid* (``/proc/<pid>/stat`` field 22, clock ticks since
    boot); with the pid it names one process for good. None if it does not exist."""
    st = _proc_stat(pid)
    return int(st[21]) if st else None


def pid_alive(pid: int, start: int | None = None) -> bool:
    """True if *pid* runs (not a zombie) and, when given, started at *start*."""
    st = _proc_stat(pid)
    if st is None:
        return _alive_without_proc(pid) if start is None else False
    if st[2] in ("Z", "X"):
        return False
    return start is None or int(st[21]) == start


def _alive_without_proc(pid: int) -> bool:
    if Path("/proc/self/stat").exists():
        return False  # /proc is there and has no such pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def terminate(pid: int, start: int | None, *, timeout: float = 5.0) -> bool:
    """Stop one process: SIGCONT (a frozen one cannot act on SIGTERM), SIGTERM, and
    SIGKILL after *timeout* s. Returns True if it was running.

    Never signals a different process that reuses *pid* (checked against *start*).
    """
    if not pid_alive(pid, start):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid, start):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.02)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # our own child: reap it (no zombie left in /proc)
    return True


# -- the registry -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProcRecord:
    """One registered process."""

    pid: int
    starttime: int | None
    role: str
    """What it is, e.g. ``locust-master``, ``locust-worker``."""
    workdir: str
    """Where it works (its cwd or the directory its records go to)."""


class ProcRegistry:
    """The processes one owner (this process) started, in ``<dir>/<pid>-<starttime>.json``.

    Written atomically (temporary file, fsync, rename) on every change, so a reader
    (``gameday restore`` after a ``kill -9``) sees the last complete version.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.owner_pid = os.getpid()
        self.owner_starttime = starttime(self.owner_pid)
        self.path = directory / f"{self.owner_pid}-{self.owner_starttime}.json"
        self._procs: dict[int, ProcRecord] = {}
        self._lock = threading.Lock()

    def add(self, pid: int, role: str, workdir: Path) -> None:
        """Record a process just started (call right after the fork returned)."""
        with self._lock:
            self._procs[pid] = ProcRecord(pid, starttime(pid), role, str(workdir))
            self._write()

    def discard(self, pid: int) -> None:
        """Forget a process that was stopped."""
        with self._lock:
            if self._procs.pop(pid, None) is not None:
                self._write()

    def _write(self) -> None:
        if not self._procs:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        data = {"owner": {"pid": self.owner_pid, "starttime": self.owner_starttime},
                "procs": [asdict(p) for p in self._procs.values()]}
        tmp = self.path.with_name(f".{self.path.name}.{threading.get_ident()}.tmp")
        with tmp.open("w") as fh:
            json.dump(data, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)


def _read_registry(path: Path) -> tuple[int, int | None, list[ProcRecord]]:
    data = json.loads(path.read_text())
    owner = data["owner"]
    procs = [ProcRecord(int(p["pid"]), None if p.get("starttime") is None else int(p["starttime"]),
                        str(p.get("role", "?")), str(p.get("workdir", ""))) for p in data["procs"]]
    return int(owner["pid"]), None if owner.get("starttime") is None else int(owner["starttime"]), procs


def stop_orphaned(directory: Path, *, only_orphans: bool, out: TextIO) -> int:
    """Stop the registered processes under *directory* whose owner died (every one
    but our own, unless *only_orphans*); returns how many were running.

    A registry file that cannot be read is reported with its path and moved aside
    (``*.corrupt``), never a traceback.
    """
    stopped = 0
    for path in sorted(directory.glob("*.json")):
        try:
            owner_pid, owner_start, procs = _read_registry(path)
        except FileNotFoundError:
            continue  # its owner finished and removed it meanwhile
        except (OSError, ValueError, KeyError, TypeError) as exc:
            aside = path.with_name(path.name + ".corrupt")
            with contextlib.suppress(OSError):
                path.replace(aside)
            out.write(f"process registry {path} is unreadable ({exc!r}); moved to {aside}\n")
            continue
        if owner_pid == os.getpid():
            continue
        if only_orphans and pid_alive(owner_pid, owner_start):
            continue
        for p in procs:
            if terminate(p.pid, p.starttime):
                out.write(f"stopped {p.role} (pid {p.pid}, {p.workdir}) left by dead runner {owner_pid}\n"
                          if not pid_alive(owner_pid, owner_start) else
                          f"stopped {p.role} (pid {p.pid}, {p.workdir}) of runner {owner_pid}\n")
                stopped += 1
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return stopped


def find_processes(needle: str, *, exclude: set[int] | None = None) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose environment, command line or working directory
    contains *needle* (a run's directory, or a tag put in its environment): ``(pid,
    command line)`` pairs. Processes we may not inspect are skipped; Linux only (``[]``
    without ``/proc``).

    Used to prove that nothing of a run is left, independently of any record the run kept.
    """
    skip = {os.getpid(), *(exclude or set())}
    raw = needle.encode()
    found: list[tuple[int, str]] = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            pid = int(entry.name)
        except ValueError:
            continue
        if pid in skip or not pid_alive(pid):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        texts = [cmdline]
        with contextlib.suppress(OSError):
            texts.append((entry / "environ").read_bytes())
        with contextlib.suppress(OSError):
            texts.append(os.readlink(entry / "cwd").encode())
        if any(raw in t for t in texts) and pid_alive(pid):
            found.append((pid, cmdline.replace(b"\0", b" ").decode(errors="replace").strip()))
    return found
