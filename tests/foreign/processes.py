"""Processes of the foreign federation: liveness by pid, children, and what a path names.

nginx daemonises (its master is re-parented away from the test), so the tests find and
stop its processes by pid file and by what their command lines name, never by a name
pattern that could match someone else's nginx.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by whoever is its parent now) serves nothing.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def children(pid: int) -> list[int]:
    out: list[int] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def kill_tree(pid: int) -> None:
    for p in [*children(pid), pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


def processes_under(root: Path) -> list[int]:
    """Live processes whose command line names a path under *root*, and their children
    (an nginx worker's command line names nothing, its master's does)."""
    needle = f"{root}/".encode()  # the slash: foreign1 must not match foreign10
    found: set[int] = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if needle in cmdline.read_bytes():
                found.add(int(cmdline.parent.name))
        except OSError:
            continue
    found |= {c for pid in list(found) for c in children(pid)}
    found.discard(os.getpid())
    return sorted(p for p in found if alive(p))


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll *predicate* until it holds (True) or *timeout* seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
