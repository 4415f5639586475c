"""A drill's turn on its federation: taken by the outermost fault before its health check, given
back when it is restored, on every way out.

- On a federation other processes drill too (kind's shared clusters, a staging context, a
  profile's federation: a :class:`~gameday.interfaces.SharedFederation`), the drill lock
  (:mod:`gameday.runtime.drill_lock`), so drills there take turns.
- On a federation that runs on this machine (``local``:
  :class:`~gameday.interfaces.RunsOnThisMachine`), one of the machine's drill slots
  (:mod:`gameday.runtime.drill_slots`), so parallel drills do not starve each other.

While another drill holds it, the wait is on the live line, naming the holder; the kernel frees
both if this process dies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gameday.errors import DrillLockTimeout
from gameday.interfaces import RunsOnThisMachine, SharedFederation, Target
from gameday.runtime.drill_lock import DrillLock, Holder
from gameday.runtime.drill_slots import DrillSlots, slot_count
from gameday.runtime.settings import Settings

log = logging.getLogger(__name__)


class Turns:
    """The drill lock and the drill slot one drill holds (neither, for a target that needs none)."""

    def __init__(self, target: Target, settings: Settings, *, what: str, progress: Callable[[str], None]) -> None:
        self.target = target
        self.settings = settings
        self.what = what
        """Who holds it, as other drills' waits name it (``test <node id>``)."""
        self.progress = progress
        self.note: str | None = None
        """How the drill lock was taken (a result note), while it is held."""
        self._lock: DrillLock | None = None
        self._slot: DrillSlots | None = None

    def take(self, action: str, phase: Callable[[str], None]) -> None:
        """The drill lock, then the slot; *phase* is told which is being waited for.

        Raises:
            DrillLockTimeout: still held by others after ``--gameday-drill-lock-timeout``;
                nothing taken, nothing injected.
            DrillLockError: the lock file cannot be used; nothing injected.
        """
        self._take_drill_lock(action, phase)
        try:
            self._take_slot(action, phase)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Give back whatever is held (idempotent)."""
        lock, self._lock = self._lock, None
        slot, self._slot = self._slot, None
        self.note = None
        try:
            if lock is not None:
                lock.release()
        finally:
            if slot is not None:
                slot.release()

    def _take_drill_lock(self, action: str, phase: Callable[[str], None]) -> None:
        if not isinstance(self.target, SharedFederation):
            return
        key = self.target.drill_lock_key()
        lock = DrillLock(key, what=self.what)
        timeout = self.settings.drill_lock_timeout
        told: list[str] = []

        def waiting(holder: Holder | None, waited: float) -> None:
            who = holder.describe() if holder is not None else "another process (it has not said who it is)"
            if who not in told:  # once per holder: the log is not a progress bar
                told.append(who)
                log.warning("%s: waiting for drill lock held by %s (key %s, up to %g s)", action, who, key, timeout)
            self.progress(f"[gameday] {action}: waiting for drill lock held by {who}  {waited:.0f}/{timeout:g} s")

        phase("lock")
        try:
            waited = lock.acquire(timeout, on_wait=waiting)
        except DrillLockTimeout as exc:
            raise DrillLockTimeout(f"refusing {action}: {exc}; nothing was injected", key=exc.key,
                                   holder=exc.holder) from None
        self._lock = lock
        self.note = f"held on {key}" + (
            f" after waiting {waited:.1f} s for {lock.waited_for.describe() if lock.waited_for else 'another process'}"
            if told else "")

    def _take_slot(self, action: str, phase: Callable[[str], None]) -> None:
        if not (isinstance(self.target, RunsOnThisMachine) and self.target.runs_on_this_machine()):
            return
        count = slot_count(self.settings.local_drill_slots)
        if count == 0:
            return
        slots = DrillSlots(count, what=self.what)
        timeout = self.settings.drill_lock_timeout

        def waiting(holders: list[Holder], waited: float) -> None:
            who = "; ".join(h.describe() for h in holders) or "other drills"
            self.progress(f"[gameday] {action}: waiting for one of this machine's {count} drill slot(s), held by "
                          f"{who}  {waited:.0f}/{timeout:g} s")

        phase("slot")
        try:
            waited = slots.acquire(timeout, on_wait=waiting)
        except DrillLockTimeout as exc:
            raise DrillLockTimeout(f"refusing {action}: {exc}; nothing was injected", key=exc.key) from None
        self._slot = slots
        if waited >= 0.5:
            log.info("%s: waited %.1f s for a drill slot (%d on this machine)", action, waited, count)
