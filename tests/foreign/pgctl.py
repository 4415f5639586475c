"""A real PostgreSQL primary and streaming standby (Debian's ``postgresql``), and the failover a
team's runbook would do, as commands a profile names (stdlib only: the harness runs this file).

The federation's state lives in ``<root>/state.json``: the binaries, the user the servers run as
(``initdb`` refuses root, so as root they run as ``nobody`` through ``setpriv``), each node's port
and data directory, which node is the primary, and whether replication is synchronous. Every
server listens on 127.0.0.1 only, with its unix socket in ``<root>/sock``.

    python pgctl.py failover ROOT [--cut SECONDS]
        The fault: cut the standby off from the primary (its ``primary_conninfo`` emptied and
        reloaded: no WAL reaches it any more) and wait SECONDS, so the primary acknowledges writes
        the standby never receives; then stop the primary (``pg_ctl stop -m immediate``: the
        process is gone, as in a crash) and promote the standby (``pg_ctl promote``). The new
        primary runs alone (``synchronous_standby_names`` emptied: no standby to wait for).
    python pgctl.py heal ROOT
        The inverse, idempotent: whichever node is not a streaming standby of the running
        primary is stopped, re-created from it (``pg_basebackup -R``) and started as its standby;
        the stated replication mode is put back. Does nothing to a healthy pair.

Every server is stopped through its postmaster (``pg_ctl stop``, which signals the pid in
``postmaster.pid``): postgres's children do not stay in the caller's process group, so stopping
a process group would leave them running.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"
TABLE = "writes"


# -- the state file -------------------------------------------------------------------------------
def load(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / STATE_FILE).read_text())
    return data


def save(root: Path, st: dict[str, Any]) -> None:
    tmp = root / f".{STATE_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(st, indent=2))
    tmp.replace(root / STATE_FILE)


def standby_of(st: dict[str, Any]) -> str:
    return next(n for n in st["nodes"] if n != st["primary"])


# -- running the binaries -------------------------------------------------------------------------
def _env(st: dict[str, Any]) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": st["root"], "LC_ALL": "C", "PGCONNECT_TIMEOUT": "2"}


def pg(st: dict[str, Any], tool: str, *args: str, timeout: float = 60, check: bool = True
       ) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL program as the servers' user."""
    argv = [*st["run_as"], str(Path(st["bin"]) / tool), *args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env(st), cwd=st["root"],
                       check=False)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}: {r.stdout}{r.stderr}".strip())
    return r


def sql(st: dict[str, Any], node: str, query: str, timeout: float = 10) -> str:
    """*query*'s output on *node* (``psql -At``); ``RuntimeError`` when it fails."""
    port = str(st["nodes"][node]["port"])
    r = subprocess.run([str(Path(st["bin"]) / "psql"), "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-d",
                        "postgres", "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-c", query],
                       capture_output=True, text=True, timeout=timeout, env=_env(st), check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{node}: {query!r}: {r.stderr.strip() or r.returncode}")
    return r.stdout.strip()


def postmaster_pid(st: dict[str, Any], node: str) -> int | None:
    """The pid in *node*'s ``postmaster.pid`` if that process is alive, else None."""
    try:
        pid = int((Path(st["nodes"][node]["data"]) / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def in_recovery(st: dict[str, Any], node: str) -> bool | None:
    """Whether *node* is a standby (True), a primary (False), or does not answer (None)."""
    try:
        return sql(st, node, "SELECT pg_is_in_recovery()", timeout=5) == "t"
    except (RuntimeError, subprocess.TimeoutExpired):
        return None


def wait_for(what: str, predicate: Any, timeout: float, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        time.sleep(interval)


# -- one node ------------------------------------------------------------------------------------
def _configure(st: dict[str, Any], node: str) -> None:
    """This node's own settings, last in its postgresql.conf (later lines win): a copy made by
    pg_basebackup starts with its source's."""
    n = st["nodes"][node]
    with (Path(n["data"]) / "postgresql.conf").open("a") as fh:
        fh.write(f"\n# {node}\nport = {n['port']}\ncluster_name = '{st['tag']}-{node}'\n")


def start(st: dict[str, Any], node: str) -> None:
    n = st["nodes"][node]
    pg(st, "pg_ctl", "-D", n["data"], "-l", str(Path(st["root"]) / "logs" / f"{node}.log"), "-w", "-t", "30",
       "start", timeout=40)


def stop(st: dict[str, Any], node: str, mode: str = "fast") -> None:
    """Stop *node* through its postmaster; SIGKILL it and its children if it has not gone in 15 s."""
    pid = postmaster_pid(st, node)
    if pid is None:
        return
    children = _children(pid)
    pg(st, "pg_ctl", "-D", st["nodes"][node]["data"], "-m", mode, "-w", "-t", "15", "stop", timeout=20,
       check=False)
    if postmaster_pid(st, node) is not None:
        for p in [pid, *children]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().split(") ", 1)[1].split()[1]) == pid:
                out.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return out


def make_standby(st: dict[str, Any], node: str) -> None:
    """(Re-)create *node* as a standby of the primary: its data directory copied from the primary
    (``pg_basebackup -R``: it starts streaming from it), then started."""
    stop(st, node, "immediate")
    data = Path(st["nodes"][node]["data"])
    if data.exists():
        shutil.rmtree(data)
    primary = st["nodes"][st["primary"]]
    pg(st, "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary["port"]), "-U", "postgres", "-D", str(data),
       "-R", "-X", "stream", "-c", "fast", timeout=60)
    _configure(st, node)
    start(st, node)


def streaming(st: dict[str, Any]) -> bool:
    """The standby streams from the primary (and, when synchronous, is its sync standby)."""
    want = "sync" if st["sync"] else "async"
    try:
        states = sql(st, st["primary"], "SELECT state || ' ' || sync_state FROM pg_stat_replication", timeout=5)
    except (RuntimeError, subprocess.TimeoutExpired):
        return False
    return f"streaming {want}" in states.splitlines()


def apply_mode(st: dict[str, Any]) -> None:
    """The stated mode on the primary: synchronous (``synchronous_standby_names = '*'``: a commit
    waits for the standby's flush) or asynchronous."""
    names = "*" if st["sync"] else ""
    sql(st, st["primary"], f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
    sql(st, st["primary"], "SELECT pg_reload_conf()")
    wait_for("synchronous_standby_names reloaded",
             lambda: sql(st, st["primary"], "SHOW synchronous_standby_names") == names, 10)


# -- the federation's commands -----------------------------------------------------------------
def failover(root: Path, cut: float) -> None:
    st = load(root)
    old, new = st["primary"], standby_of(st)
    if cut > 0:
        # The standby cut off: it keeps what it has replayed and receives nothing more.
        sql(st, new, "ALTER SYSTEM SET primary_conninfo = ''")
        sql(st, new, "SELECT pg_reload_conf()")
        wait_for("the standby's WAL receiver stopped",
                 lambda: sql(st, new, "SELECT count(*) FROM pg_stat_wal_receiver") == "0", 10, 0.01)
        time.sleep(cut)
    stop(st, old, "immediate")
    pg(st, "pg_ctl", "-D", st["nodes"][new]["data"], "-w", "-t", "30", "promote", timeout=40)
    st["primary"] = new
    save(root, st)
    # Alone: a synchronous primary would wait for a standby that is not there.
    sql(st, new, "ALTER SYSTEM SET synchronous_standby_names = ''")
    sql(st, new, "SELECT pg_reload_conf()")
    print(f"{old} stopped (immediate), {new} promoted after the standby was cut off for {cut:g} s")


def heal(root: Path) -> None:
    st = load(root)
    roles = {n: in_recovery(st, n) for n in st["nodes"]}
    primaries = [n for n, r in roles.items() if r is False]
    if len(primaries) > 1:  # two primaries: the one the federation names stays, the other is re-made
        primaries = [st["primary"]]
    if not primaries:
        standby = next((n for n, r in roles.items() if r is True), None)
        if standby is None:  # nothing runs: start the one the federation names as its primary
            start(st, st["primary"])
            primaries = [st["primary"]]
        else:
            pg(st, "pg_ctl", "-D", st["nodes"][standby]["data"], "-w", "-t", "30", "promote", timeout=40)
            primaries = [standby]
    st["primary"] = primaries[0]
    save(root, st)
    other = standby_of(st)
    if roles.get(other) is not True or not _streams_from_primary(st):
        make_standby(st, other)
        print(f"{other} re-created as a standby of {st['primary']}")
    apply_mode(st)
    wait_for(f"{other} streaming from {st['primary']} ({'sync' if st['sync'] else 'async'})",
             lambda: streaming(st), 30)
    print(f"healthy: {st['primary']} primary, {other} streaming standby ({'sync' if st['sync'] else 'async'})")


def _streams_from_primary(st: dict[str, Any]) -> bool:
    try:
        return sql(st, st["primary"], "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
                   timeout=5) != "0"
    except (RuntimeError, subprocess.TimeoutExpired):
        return False


def set_sync(root: Path, sync: bool) -> None:
    st = load(root)
    st["sync"] = sync
    save(root, st)
    apply_mode(st)
    wait_for("the standby streaming in the stated mode", lambda: streaming(st), 30)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pgctl.py")
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("failover")
    f.add_argument("root", type=Path)
    f.add_argument("--cut", type=float, default=0.0)
    h = sub.add_parser("heal")
    h.add_argument("root", type=Path)
    args = p.parse_args(argv)
    try:
        if args.command == "failover":
            failover(args.root, args.cut)
        else:
            heal(args.root)
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
        print(f"pgctl {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
