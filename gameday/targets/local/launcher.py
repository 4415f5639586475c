"""A pre-forking launcher ("zygote") for component processes.

Starting a Python component the ordinary way costs ~0.3 s of CPU (importing aiohttp
and nats-py); a federation has 5 processes per region, so on 2 cores bring-up would
take seconds. The launcher imports everything once, then forks one child per
component on request: each child is an ordinary OS process with its own pid that can
be signalled, stopped or killed on its own, exactly like a separately started one.

Protocol: one JSON object per line over a Unix stream socket.

* ``{"op": "spawn", "role", "spec", "region", "instance", "log"}`` -> ``{"pid": int}``
* ``{"op": "exit_code", "pid": int}`` -> ``{"code": int | null}`` (null: still running
  or unknown)
* ``{"op": "ping"}`` -> ``{"ok": true}``

The launcher runs in its own session (the harness starts it with
``start_new_session=True``), so a Ctrl-C on the harness's terminal does not reach the
federation: the harness decides when components stop.

Lifetime: every child is told to receive SIGKILL when the launcher exits (Linux's
``PR_SET_PDEATHSIG``; SIGKILL also ends a child a drill froze with SIGSTOP), and the
harness starts the launcher the same way with SIGTERM, on which the launcher stops its
children (SIGCONT, SIGTERM, SIGKILL after a grace period) before it exits. So a
``kill -9`` of the harness takes the whole federation with it, and stopping the launcher
stops every component it forked even where the OS has no death signal.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from gameday.runtime.procs import die_with_parent

CHILD_STOP_GRACE = 3.0
"""Seconds the launcher gives its children to exit on SIGTERM before SIGKILL."""

PRELOAD = (
    "asyncio",
    "aiohttp",
    "aiohttp.web",
    "nats",
    "nats.js",
    "dns.message",
    "dns.rrset",
    "gameday.fedapp.common",
    "gameday.fedapp.follower",
)


class _Launcher:
    def __init__(self, sock_path: Path) -> None:
        self.sock_path = sock_path
        self.exit_codes: dict[int, int] = {}
        self.children: set[int] = set()

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            self.exit_codes[pid] = os.waitstatus_to_exitcode(status)

    def spawn(self, req: dict[str, Any]) -> int:
        log_path = str(req["log"])
        launcher = os.getpid()
        pid = os.fork()
        if pid == 0:  # child
            code = 0
            try:
                # First thing: tie the child to the launcher (exits if the launcher is already gone).
                die_with_parent(signal.SIGKILL, launcher)
                os.setpgid(0, 0)
                for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
                    signal.signal(sig, signal.SIG_DFL)
                fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.close(fd)
                sys.stdout = os.fdopen(1, "w", buffering=1)
                sys.stderr = os.fdopen(2, "w", buffering=1)
                from gameday.fedapp.__main__ import run_role  # noqa: PLC0415

                run_role(str(req["role"]), str(req["spec"]), req.get("region"), req.get("instance"))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001  (the child must never fall back into the launcher loop)
                traceback.print_exc()
                code = 1
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        self.children.add(pid)
        return pid

    def stop_children(self) -> None:
        """Stop every child still running: SIGCONT (a paused one cannot act on SIGTERM),
        SIGTERM, then SIGKILL after :data:`CHILD_STOP_GRACE` seconds."""
        self.reap()
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + CHILD_STOP_GRACE
        while self.children and time.monotonic() < deadline:
            time.sleep(0.02)
            self.reap()
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        while self.children and time.monotonic() < deadline + CHILD_STOP_GRACE:
            time.sleep(0.02)
            self.reap()

    def handle(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "spawn":
                return {"pid": self.spawn(req)}
            if op == "exit_code":
                self.reap()
                return {"code": self.exit_codes.get(int(req["pid"]))}
            if op == "ping":
                return {"ok": True}
        except (ValueError, KeyError, TypeError, OSError) as exc:
            return {"error": repr(exc)}
        return {"error": f"unknown op {op!r}"}

    def serve(self) -> None:
        for name in PRELOAD:
            importlib.import_module(name)
        for role_module in ("controlplane", "agent", "gateway", "proxy", "app", "gslb"):
            with contextlib.suppress(ImportError):
                importlib.import_module(f"gameday.fedapp.{role_module}")
        stop = False

        def _stop(signum: int, frame: object) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with contextlib.suppress(FileNotFoundError):
            self.sock_path.unlink()
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(str(self.sock_path))
        srv.listen(64)
        sel = selectors.DefaultSelector()
        sel.register(srv, selectors.EVENT_READ)
        buffers: dict[socket.socket, bytes] = {}
        print("launcher ready", flush=True)
        while not stop:
            for key, _ in sel.select(timeout=0.2):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                if s is srv:
                    conn, _ = srv.accept()
                    sel.register(conn, selectors.EVENT_READ)
                    buffers[conn] = b""
                    continue
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    buffers.pop(s, None)
                    s.close()
                    continue
                buffers[s] += data
                while b"\n" in buffers[s]:
                    line, buffers[s] = buffers[s].split(b"\n", 1)
                    reply = self.handle(line)
                    with contextlib.suppress(OSError):
                        s.sendall(json.dumps(reply).encode() + b"\n")
            self.reap()
        srv.close()
        with contextlib.suppress(FileNotFoundError):
            self.sock_path.unlink()
        self.stop_children()


class LauncherClient:
    """Talks to a running launcher over its Unix socket."""

    def __init__(self, sock_path: Path, timeout: float = 10.0) -> None:
        self.sock_path = sock_path
        self.timeout = timeout

    def call(self, req: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(self.timeout)
            s.connect(str(self.sock_path))
            s.sendall(json.dumps(req).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        reply: dict[str, Any] = json.loads(buf)
        return reply

    def alive(self) -> bool:
        try:
            return bool(self.call({"op": "ping"}).get("ok"))
        except (OSError, ValueError):
            return False


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m gameday.targets.local.launcher")
    p.add_argument("--socket", required=True, type=Path)
    a = p.parse_args(argv)
    _Launcher(a.socket).serve()


if __name__ == "__main__":
    main()
