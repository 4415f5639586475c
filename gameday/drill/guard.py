"""The faults a drill has in effect, and what guards them while they are.

:class:`FaultGuard` keeps the stack of faults in effect (a nested fault on top of its parent)
and reverts each exactly once, whoever asks first: the test thread when the block ends, or the
observer thread on one of its ticks (:meth:`FaultGuard.on_tick`), when

- the stop condition holds (client errors above ``--gameday-stop-error-ratio`` for
  ``--gameday-stop-after`` seconds): every fault reverted, innermost first, and the drill
  aborted;
- the watcher (:mod:`gameday.observers.watch`) sees a casualty (a component that the fault
  does not stop died, or the load generator exited or collapsed): every fault reverted, and the
  test thread raises it at its next wait (:meth:`FaultGuard.casualty_error`).

It also writes the live progress line (from the test thread: the writer may suspend output
capture) and knows how far the load's records are complete.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from gameday.drill.context import ActiveFault, DrillContext
from gameday.errors import DrillAborted, FaultError, RestoreIncomplete
from gameday.model import ticks
from gameday.model.timeline import Casualty
from gameday.observers.watch import Watcher, abort_error

log = logging.getLogger(__name__)


class FaultGuard:
    """One drill's faults in effect, their reverts, the stop condition, the casualty and the live line."""

    def __init__(self, ctx: DrillContext) -> None:
        self.ctx = ctx
        self.stack: list[ActiveFault] = []
        """The faults in effect, outermost first."""
        self.phase = "idle"
        """What the drill is doing, for the live line (lock, slot, baseline, inject, observe, restore, done)."""
        self.watcher: Watcher | None = None
        self.casualty: Casualty | None = None
        self.baseline_start: float | None = None
        self.load_complete_until: float | None = None
        """The load's watermark as of the observer's last tick (None: the locustfile writes none)."""
        self._casualty_reverted: list[ActiveFault] = []
        self._casualty_handled = threading.Event()
        """Set once the watcher has reverted what was in effect when it saw the casualty."""
        self._stop = ticks.StopCondition(ctx.slo.stop_error_ratio, ctx.slo.stop_after)
        self._last_progress = 0.0

    @property
    def active(self) -> ActiveFault | None:
        """The innermost fault in effect, if any."""
        return self.stack[-1] if self.stack else None

    def start(self, watcher: Watcher) -> None:
        """An outermost fault's watcher: no casualty seen yet."""
        self.watcher = watcher
        self.casualty, self._casualty_reverted = None, []
        self._casualty_handled.clear()

    # -- reverts ---------------------------------------------------------------------------------
    def revert(self, active: ActiveFault, reason: str | None) -> None:
        """Revert exactly once (from the test thread, or early from a stop condition or a casualty).

        Raises:
            RestoreIncomplete: the target's revert failed; the ledger keeps the entry.
        """
        with active.lock:
            if active.reverted:
                return
            w = active.window
            w.t_revert_call = time.monotonic()
            what = f"{w.kind} {w.region or ''}".strip()
            # A signal waits from here until the block has recorded its result (the session's
            # on_result releases the hold): the revert, the steady-state wait after it, the ledger.
            self.ctx.interrupts.hold("revert", f"reverting {what}")
            try:
                self.ctx.target.revert(w.kind, w.region, w.params)
                self.ctx.interrupts.hold("revert", f"{what} reverted, waiting for the federation's steady state")
            except Exception as exc:
                raise RestoreIncomplete(
                    f"reverting {w.kind} {w.region or ''} failed; the ledger keeps it: run `gameday restore`"
                ) from exc
            w.t_revert = time.monotonic()
            if self.watcher is not None:
                self.watcher.unexpect(active.ledger_id, w.t_revert)
            active.result.timeline.mark(w.t_revert, "revert", reason or "")
            active.reverted = True
            if reason:
                w.aborted = reason
            if self.casualty is not None and reason == self.casualty.message:
                self._casualty_reverted.append(active)
            self.ctx.ledger.remove(active.ledger_id)

    def _revert_all(self, reason: str, why: str) -> None:
        """Every fault in effect, innermost first (the exact inverse order); a failed revert is
        logged and the rest still reverted."""
        for f in reversed(list(self.stack)):
            try:
                self.revert(f, reason)
            except RestoreIncomplete:
                log.exception("%s could not revert %s", why, f.window.kind)

    # -- per tick (observer thread) ------------------------------------------------------------------
    def on_tick(self, now: float) -> None:
        """Observer thread, every tick: the load's watermark, the stop condition and the watcher."""
        load = self.ctx.load
        if load is not None:  # read after this tick put the load's new records on the timeline
            self.load_complete_until = load.complete_until()
        active = self.active
        if active is not None and not active.reverted:
            ratio, n = self._recent_error_ratio(active, now)
            reason = self._stop.check(now, ratio, n)
            if reason is not None:
                active.result.timeline.mark(now, "stop_condition", reason)
                self._revert_all(reason, "stop condition")
        self._watch(now)

    def _watch(self, now: float) -> None:
        """A casualty fails the drill at once: mark it, then revert every fault in effect,
        innermost first (the stop condition's path); the test thread raises it."""
        watcher = self.watcher
        if watcher is None or self.casualty is not None:
            return
        c = watcher.check(now, baseline_start=self.baseline_start)
        if c is None:
            return
        log.error("%s", c.message)
        self.casualty = c
        try:
            active = self.active
            tl = active.result.timeline if active is not None else watcher.tl
            tl.mark(c.t, "component_died" if c.what == "component" else "load_collapsed", c.message)
            self._revert_all(c.message, f"after {c.name}:")
        finally:
            self._casualty_handled.set()

    # -- the test thread's side ----------------------------------------------------------------------
    def casualty_error(self, extra: str = "") -> DrillAborted:
        """The error the test thread raises for the casualty, once the watcher's reverts are done."""
        c = self.casualty
        assert c is not None
        self._casualty_handled.wait(120)  # a revert waits for its component to listen (15 s each, at most)
        done = [(f.label, (f.window.t_revert or 0) - f.window.t_fault)
                for f in self._casualty_reverted if f.window.t_revert is not None]
        failed = [f.label for f in self.stack if not f.reverted]
        return abort_error(c, done, failed, extra)

    def check(self, fault: ActiveFault) -> None:
        """Between observations: raise what ended *fault*'s drill (a casualty, the stop condition,
        the observer's own failure), if anything did."""
        if self.casualty is not None:
            self.ctx.progress(self.progress_line(fault, time.monotonic(), 0.0))  # now, not at the next 0.5 s
            raise self.casualty_error()
        if fault.window.aborted:
            raise DrillAborted(f"stop condition: {fault.window.aborted}")
        if fault.observer.error is not None:
            raise FaultError(f"observer failed: {fault.observer.error!r}") from fault.observer.error

    def sleep(self, seconds: float) -> None:
        """Sleep *seconds*, but raise a casualty as soon as the watcher sees one."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self.casualty is not None:
                raise self.casualty_error()
            time.sleep(min(0.1, left))

    def wait_until(self, done: Callable[[], bool], timeout: float) -> None:
        """Until *done()* (at most *timeout* s), but raise a casualty as soon as the watcher sees one."""
        end = time.monotonic() + timeout
        while not done() and time.monotonic() < end:
            if self.casualty is not None:
                raise self.casualty_error()
            time.sleep(0.1)

    def requests_complete_until(self, now: float) -> float:
        """The send time before which every load request is on the timeline: the load's
        watermark as of the observer's last tick; for a locustfile that writes none, *now*
        less a request's whole life (a DNS and an HTTP timeout) and a poll."""
        mark = self.load_complete_until
        if mark is None:
            load = self.ctx.load
            return now - 2 * (load.timeout if load is not None else 0.0) - 0.5
        return min(now, mark)

    # -- the live line ---------------------------------------------------------------------------------
    def tick_progress(self) -> None:
        """Test thread (the progress writer may suspend output capture): the live line, every 0.5 s."""
        now = time.monotonic()
        if now - self._last_progress < 0.5:
            return
        self._last_progress = now
        active = self.active
        ratio, _ = self._recent_error_ratio(active, now)
        self.ctx.progress(self.progress_line(active, now, ratio))

    def progress_line(self, active: ActiveFault | None, now: float, ratio: float) -> str:
        watched = self.watcher.summary(now) if self.watcher is not None and self.phase != "done" else ""
        return ticks.progress_line(
            phase=self.phase, now=now, ratio=ratio, watched=watched,
            casualty=self.casualty.message if self.casualty is not None else None,
            window=active.window if active is not None else None,
            timeline=active.result.timeline if active is not None else None,
            survivors=active.result.survivors if active is not None else ())

    @staticmethod
    def _recent_error_ratio(active: ActiveFault | None, now: float) -> tuple[float, int]:
        return ticks.recent_error_ratio(active.result.timeline.requests, now) if active is not None else (0.0, 0)
