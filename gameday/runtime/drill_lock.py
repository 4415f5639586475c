"""The drill lock: one drill at a time on a federation that several processes share.

Several processes may drill one federation: the xdist workers of a kind run share its
clusters, engineers' runs share a staging context, every run of a profile drills the one
real federation behind it. Unserialised, each sees the other's fault in its measurements,
and one's restore undoes the other's fault mid-drill. A target that says so
(:class:`gameday.interfaces.SharedFederation`) names its federation with a key; the drill
(:meth:`gameday.drill.Drill.fault`) holds :class:`DrillLock` on that key from the steady
state before its outermost fault until that fault's restore is done, so faults on one
federation never overlap.

The lock is ``flock(2)`` on ``<state dir>/drill-locks/<key>.lock`` (the state dir of
:func:`gameday.runtime.statefile.state_dir`). flock and not a pid file, nor ``fcntl`` record locks:

* the lock belongs to the open file, so it **dies with its holder**: a holder killed with
  ``kill -9``, or crashing, frees it at once (the kernel closes its files). A stale lock
  never blocks anyone; there is no pid to check and nothing to clean up. (The fault that
  holder left in effect is another matter: the next drill's steady state sees it and refuses
  to inject; ``gameday restore`` reverts it from the ledger.)
* reading who holds the lock opens the file again and closes it; with ``fcntl`` record locks
  that close would release the process's own lock, with flock it does not.
* the descriptor is not inherited (PEP 446), so a child of the holder (a load generator, a
  fault's command) that outlives it does not keep the lock.

Lock files are never deleted: removing one while a process waits on it would let two
processes each lock "the" file. The holder writes who it is into the file (pid, host, xdist
worker, test, since when) for the message of whoever waits, and empties it on release.

Waiting polls (every 50 ms), so that it has a timeout, says who it waits for, and a Ctrl-C
ends it at once. Waiters are not queued: under heavy contention one may wait for more than
one drill, which the timeout bounds.

**One machine only.** The lock serialises processes that share the state directory on one
machine (several users: point ``GAMEDAY_STATE_DIR`` at one directory all of them can
write). Runs on *different* machines drilling the same staging contexts each hold their own
lock and are not serialised; that takes a lock kept with the federation itself: for
Kubernetes a ``coordination.k8s.io/v1`` Lease in the federation's namespace, planned as data
in :mod:`gameday.targets.k8s.lease` and not executed yet.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Self

from gameday.errors import DrillLockError, DrillLockTimeout
from gameday.runtime.settings import Settings
from gameday.runtime.statefile import state_dir

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.05
"""Seconds between attempts while waiting: a released lock is taken within 50 ms, for a
non-blocking syscall and a read of a few hundred bytes each time."""

WAIT_REPORT_INTERVAL = 0.5
"""Seconds between calls of the waiter's ``on_wait`` (the live progress line's pace)."""

DEFAULT_TIMEOUT: float = Settings.drill_lock_timeout
"""Seconds to wait for the lock by default: ``--gameday-drill-lock-timeout``'s (15 min, why
in :attr:`gameday.runtime.settings.Settings.drill_lock_timeout`)."""

LOCKS_DIR = "drill-locks"
"""The lock files' directory under the state dir."""


@dataclass(frozen=True)
class Holder:
    """Who holds a drill lock, as the holder wrote it into the lock file."""

    pid: int
    host: str
    worker: str
    """The pytest-xdist worker id (``gw1``), or ``main`` outside xdist."""
    what: str
    """What the holder is doing (the drill's test), or empty."""
    since: float
    """When it took the lock, ``time.time()`` (seconds since the epoch)."""
    key: str

    def describe(self) -> str:
        """``pid 4242 (worker gw1, test suites/x.py::test_y) since 14:03:07``."""
        where = "" if self.host == socket.gethostname() else f" on {self.host}"
        what = f", {self.what}" if self.what else ""
        since = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid}{where} (worker {self.worker}{what}) since {since}"

    @classmethod
    def parse(cls, raw: bytes) -> Holder | None:
        """The holder in a lock file's bytes; None when empty or unreadable (being written,
        or written by something else)."""
        try:
            data = json.loads(raw.decode("utf-8"))
            return cls(pid=int(data["pid"]), host=str(data["host"]), worker=str(data["worker"]),
                       what=str(data["what"]), since=float(data["since"]), key=str(data["key"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None


def lock_path(key: str, directory: Path | None = None) -> Path:
    """The lock file of *key*: readable (the key's first 48 safe characters) and unique
    (a hash of the whole key), under *directory* (default: the state dir's ``drill-locks``)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[:48].strip("_.") or "federation"
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return (directory or state_dir() / LOCKS_DIR) / f"{slug}-{digest}.lock"


def this_worker() -> str:
    """The pytest-xdist worker id of this process (xdist sets ``PYTEST_XDIST_WORKER``), else ``main``."""
    return os.environ.get("PYTEST_XDIST_WORKER") or "main"


OnWait = Callable[[Holder | None, float], None]
"""Called while waiting with (the holder, or None if it has not said who it is; seconds waited)."""


class DrillLock:
    """An exclusive lock on one federation across the processes of this machine.

    Args:
        key: the federation's identity (:meth:`SharedFederation.drill_lock_key
            <gameday.interfaces.SharedFederation.drill_lock_key>`).
        what: what the holder does, for the waiters' messages (the drill's test).
        directory: where the lock files are (default: ``<state dir>/drill-locks``, as the
            environment says when the lock is made).

    Not reentrant: a second :class:`DrillLock` on the same key in the process that holds it
    raises :class:`DrillLockError` at once instead of waiting for itself.
    """

    def __init__(self, key: str, *, what: str = "", directory: Path | None = None) -> None:
        if not key:
            raise ValueError("a drill lock needs a non-empty key")
        self.key = key
        self.what = what
        self.path = lock_path(key, directory)
        """The lock file (never deleted; see the module docstring)."""
        self._fd: int | None = None
        self.waited = 0.0
        """Seconds the last :meth:`acquire` waited."""
        self.waited_for: Holder | None = None
        """Whom it waited for first (None: it did not wait, or the holder never said)."""

    @property
    def held(self) -> bool:
        """True between a successful :meth:`acquire` and :meth:`release`."""
        return self._fd is not None

    def holder(self) -> Holder | None:
        """Who holds the lock now, as the holder wrote it; None if nobody says (free, or just taken)."""
        try:
            return Holder.parse(self.path.read_bytes())
        except OSError:
            return None

    def acquire(self, timeout: float, *, on_wait: OnWait | None = None) -> float:
        """Take the lock, waiting up to *timeout* seconds (0: do not wait) while another
        process holds it; *on_wait* is called as the wait begins and every 0.5 s after.

        Returns:
            The seconds waited (also in :attr:`waited`).

        Raises:
            DrillLockTimeout: still held after *timeout*; the message names the holder.
            DrillLockError: the lock file cannot be opened, or this process holds the lock.
            KeyboardInterrupt: as raised in the wait (nothing is held then).
        """
        if self._fd is not None:
            raise DrillLockError(f"the drill lock on {self.key} is already held by this DrillLock")
        path = self.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_RDWR | O_CREAT, never O_TRUNC: the holder's note must survive a waiter's open.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise DrillLockError(f"cannot open the drill lock file {path} ({exc.strerror}); set GAMEDAY_STATE_DIR "
                                 "to a directory gameday can write") from exc
        try:
            self.waited = self._wait(fd, timeout, on_wait)
            me = Holder(pid=os.getpid(), host=socket.gethostname(), worker=this_worker(), what=self.what,
                        since=time.time(), key=self.key)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(asdict(me)).encode("utf-8"), 0)
        except BaseException:
            os.close(fd)  # never locked, or locked just now: closing it unlocks
            raise
        self._fd = fd
        log.info("drill lock on %s taken (waited %.1f s)", self.key, self.waited)
        return self.waited

    def _wait(self, fd: int, timeout: float, on_wait: OnWait | None) -> float:
        """Poll ``flock`` on *fd* until it is ours; the seconds waited (see :meth:`acquire`)."""
        start = time.monotonic()
        self.waited_for = None
        last_report: float | None = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return time.monotonic() - start
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EINTR):
                    raise DrillLockError(f"cannot lock {self.path} ({exc.strerror})") from exc
            now = time.monotonic()
            waited = now - start
            holder = self.holder()
            if self.waited_for is None:
                self.waited_for = holder
            if holder is not None and holder.pid == os.getpid() and holder.host == socket.gethostname():
                raise DrillLockError(f"this process already holds the drill lock on {self.key} "
                                     f"({holder.what or 'another drill'}): faults on one federation nest inside "
                                     "one fault block, two blocks of one process do not overlap")
            if waited >= timeout:
                who = holder.describe() if holder is not None else "another process (it has not said who it is)"
                raise DrillLockTimeout(f"the drill lock on {self.key} is still held by {who} after {waited:.1f} s "
                                       f"(--gameday-drill-lock-timeout {timeout:g}; lock file {self.path})",
                                       key=self.key, holder=holder)
            if on_wait is not None and (last_report is None or now - last_report >= WAIT_REPORT_INTERVAL):
                last_report = now
                on_wait(holder, waited)
            time.sleep(min(POLL_INTERVAL, max(timeout - waited, 0.001)))

    def release(self) -> None:
        """Release the lock (idempotent): the note is emptied first, then the file closed."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the only descriptor releases the flock
        log.info("drill lock on %s released", self.key)

    def __enter__(self) -> Self:
        self.acquire(DEFAULT_TIMEOUT)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def drill_lock(key: str, *, timeout: float = DEFAULT_TIMEOUT, what: str = "", on_wait: OnWait | None = None,
               directory: Path | None = None) -> Iterator[DrillLock]:
    """Hold the drill lock on *key* for the block (see :class:`DrillLock`); released on every
    way out, and by the kernel if the process dies."""
    lock = DrillLock(key, what=what, directory=directory)
    lock.acquire(timeout, on_wait=on_wait)
    try:
        yield lock
    finally:
        lock.release()
