"""Another run's drill on a shared federation, for tests: a real process holding its drill lock."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HOLD = """
import pathlib, sys, time
from gameday.runtime.drill_lock import drill_lock
with drill_lock(sys.argv[1], what=sys.argv[3]):
    print("held", flush=True)
    deadline = time.monotonic() + 60
    while not pathlib.Path(sys.argv[2]).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
"""


class LockHolder:
    """Holds the drill lock on *key* from construction until :meth:`release` (or the block's
    end), saying it does *what*; at most 60 s, so a failed test never leaves it running."""

    def __init__(self, key: str, tmp_path: Path, *, what: str = "test other-run") -> None:
        self.release_file = tmp_path / f"release-{time.monotonic_ns()}"
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD, key, str(self.release_file), what],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "held"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> float:
        """Let go; the wall-clock time (``time.time()``) just before it did."""
        released = time.time()
        self.release_file.touch()
        self.proc.wait(10)
        return released

    def __enter__(self) -> LockHolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release_file.touch()
        self.proc.wait(10)
