"""Drill slots: drills whose federations share this machine take turns, a few at a time.

A federation on the harness's own machine (the ``local`` target: a dozen processes on
loopback) and the observer that reads it at 10 Hz need the same CPUs. Several processes
drilling at once (``pytest -n 3 suites``, three workers each with a federation, a locust and an
observer; the two drills of two terminals) can take so much of a 2-core machine that every
drill is starved: the federation's health checks time out against healthy gateways, the
observer reads at half its rate, and the figures say more about the machine than about the
federations. So the drill (:meth:`gameday.drill.Drill.fault`) of a target that runs here
(:class:`gameday.interfaces.RunsOnThisMachine`) takes one of :func:`slot_count` machine-wide slots
from the steady state before its outermost fault until that fault is restored: the
timing-sensitive part. Bring-up, load ramp-up, reports and every other test run beside it, so
parallel runs still overlap where it costs nothing.

Each slot is a :class:`~gameday.runtime.drill_lock.DrillLock` (``flock``: freed by the kernel
when its holder dies, even by ``kill -9``) named ``slot-<i>`` in one directory for the whole
machine: ``$GAMEDAY_SLOTS_DIR``, else ``<tmp>/gameday-slots-<uid>``; not the state directory,
which a test run may set apart per test. A waiter takes whichever slot frees first and says whom
it waits for. Not queued: under contention one waiter may see several drills pass first; the
timeout (``--gameday-drill-lock-timeout``) bounds it.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gameday.errors import DrillLockError, DrillLockTimeout
from gameday.runtime.drill_lock import POLL_INTERVAL, WAIT_REPORT_INTERVAL, DrillLock, Holder

log = logging.getLogger(__name__)

SLOTS_DIR_ENV = "GAMEDAY_SLOTS_DIR"
"""Where the slot files are (default ``<tmp>/gameday-slots-<uid>``)."""

OnWaitSlots = Callable[[list[Holder], float], None]
"""Called while waiting with (who holds the slots, as far as they said; seconds waited)."""


def slot_count(setting: int | None) -> int:
    """How many drills may be in their fault block at once on this machine: *setting*
    (``--gameday-local-drill-slots``; 0: no limit), else one per CPU this process may use."""
    if setting is not None:
        return setting
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def slots_dir() -> Path:
    """The machine-wide directory of the slot files (see the module docstring)."""
    configured = os.environ.get(SLOTS_DIR_ENV)
    return Path(configured) if configured else Path(tempfile.gettempdir()) / f"gameday-slots-{os.getuid()}"


class DrillSlots:
    """One of *count* machine-wide slots, held between :meth:`acquire` and :meth:`release`."""

    def __init__(self, count: int, *, what: str = "", directory: Path | None = None) -> None:
        if count < 1:
            raise ValueError(f"drill slots need a count of at least 1, not {count}")
        where = directory if directory is not None else slots_dir()
        self.locks = [DrillLock(f"slot-{i}", what=what, directory=where) for i in range(count)]
        self.held: DrillLock | None = None
        self.waited = 0.0
        """Seconds the last :meth:`acquire` waited."""

    def holders(self) -> list[Holder]:
        """Who holds the slots now, as far as they said."""
        return [h for h in (lock.holder() for lock in self.locks) if h is not None]

    def acquire(self, timeout: float, *, on_wait: OnWaitSlots | None = None) -> float:
        """Take a free slot, waiting up to *timeout* seconds while all are held; *on_wait* is
        called as the wait begins and every 0.5 s after. Returns the seconds waited.

        Raises:
            DrillLockTimeout: every slot still held after *timeout*; the message names the holders.
            DrillLockError: a slot file cannot be used.
        """
        start = time.monotonic()
        last_report: float | None = None
        while True:
            for lock in self.locks:
                try:
                    lock.acquire(0)
                except DrillLockTimeout:
                    continue
                except DrillLockError:
                    holder = lock.holder()  # this process holds that one (another drill of it): next
                    if holder is not None and holder.pid == os.getpid():
                        continue
                    raise
                self.held = lock
                self.waited = time.monotonic() - start
                log.info("drill slot %s taken (waited %.1f s)", lock.key, self.waited)
                return self.waited
            now = time.monotonic()
            waited = now - start
            if waited >= timeout:
                who = "; ".join(h.describe() for h in self.holders()) or "other processes"
                raise DrillLockTimeout(
                    f"all {len(self.locks)} drill slots of this machine are still held after {waited:.1f} s by "
                    f"{who} (--gameday-drill-lock-timeout {timeout:g}; --gameday-local-drill-slots sets how many; "
                    f"slot files in {self.locks[0].path.parent})", key="slots")
            if on_wait is not None and (last_report is None or now - last_report >= WAIT_REPORT_INTERVAL):
                last_report = now
                on_wait(self.holders(), waited)
            time.sleep(min(POLL_INTERVAL, max(timeout - waited, 0.001)))

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        lock, self.held = self.held, None
        if lock is not None:
            lock.release()
