"""Drill orchestration: steady state, inject, observe, always restore, steady state again.

A game day reads like article 000's::

    region = drill.pick_region()                      # seeded, recorded
    with drill.fault("gateway_down", region) as fault:
        result = drill.observe_switchover(fault)
    result.assert_switchover_under()

The fault is written to the ledger before it is injected and reverted on every way out
of the ``with`` block (normal exit, assertion failure, Ctrl-C, SIGTERM); a stop
condition reverts it early and aborts the drill. So does the watcher
(:mod:`gameday.observers.watch`) when a component dies that the fault does not stop, or
the load generator exits or collapses: the drill fails at once naming it, instead of
minutes later as a verdict it did not cause.

:meth:`Drill.fault` is the runbook (DESIGN.md §4 and §8); its parts, one module each:

- :mod:`gameday.drill.phases`: the phases of a fault, in order (preflight, open, baseline,
  inject, observing, restore, close). To add a phase, add a method there and call it from
  ``fault()`` in its place.
- :mod:`gameday.drill.checks`: the refusals before anything is touched, and the dry run.
- :mod:`gameday.drill.turns`: the outermost fault's turn on its federation (the drill lock of
  a shared one, a drill slot of this machine for one that runs here).
- :mod:`gameday.drill.guard`: the faults in effect, each reverted exactly once; the stop
  condition and the casualty, per observer tick; the live line.
- :mod:`gameday.drill.waits`: the steady state before a fault and after its revert.
- :mod:`gameday.drill.context`: what they share.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gameday.drill.checks import DrillChecks
from gameday.drill.context import ActiveFault, DrillContext
from gameday.drill.guard import FaultGuard
from gameday.drill.phases import FaultPhases
from gameday.drill.turns import Turns
from gameday.errors import FaultError
from gameday.faults import FAULTS, Fault, Ledger
from gameday.faults.model import FaultTable
from gameday.interfaces import HasFaults, Target, liveness_of
from gameday.load.generator import LoadGenerator
from gameday.model.timeline import FaultWindow, abort_reason
from gameday.reports.steps import NoSteps, Steps
from gameday.runtime.interrupts import INTERRUPTS, Interrupts
from gameday.runtime.settings import SLO, Settings
from gameday.verdicts.predict import Prediction
from gameday.verdicts.result import DrillResult

log = logging.getLogger(__name__)


class Drill:
    """One test's drill: seeded region picks, faults, observers, results."""

    def __init__(
        self,
        target: Target,
        settings: Settings,
        *,
        seed_key: str,
        ledger: Ledger,
        offered: float,
        margin: float,
        load: LoadGenerator | None = None,
        progress: Callable[[str], None] | None = None,
        round_index: int = 0,
        dns_ttl: float = 5.0,
        on_result: Callable[[DrillResult], object] | None = None,
        on_block_end: Callable[[FaultWindow], object] | None = None,
        skip_unavailable_faults: bool = False,
        steps: Steps | None = None,
        interrupts: Interrupts = INTERRUPTS,
    ) -> None:
        faults = FAULTS.extended(target.faults()) if isinstance(target, HasFaults) else FAULTS
        self.ctx = DrillContext(
            target=target, settings=settings, ledger=ledger, regions=tuple(target.regions()), faults=faults,
            offered=offered, margin=margin, load=load, progress=progress or (lambda s: None), round=round_index,
            seed_key=seed_key, dns_ttl=dns_ttl, steps=steps or NoSteps(), interrupts=interrupts,
            skip_unavailable_faults=skip_unavailable_faults, on_result=on_result, on_block_end=on_block_end)
        """What every part of the drill shares (see :mod:`gameday.drill.context`)."""
        self.rng = random.Random(f"{settings.seed}:{seed_key}:{round_index}")
        self.jitter = random.Random(f"{settings.seed}:{seed_key}:{round_index}:jitter").uniform(
            0.0, settings.round_jitter)
        """Seconds the drill's first fault waits before it takes its turn (``--gameday-round-jitter``,
        :attr:`gameday.runtime.settings.Settings.round_jitter`): uniform over 0..round_jitter, from a
        generator of its own seeded like :attr:`rng`, so the region picks are those of a run without it."""
        self.picks: list[str] = []
        self.results: list[DrillResult] = []
        self._guard = FaultGuard(self.ctx)
        self._checks = DrillChecks(self.ctx)
        self._phases = FaultPhases(self.ctx, self._guard, Turns(target, settings, what=f"test {seed_key}",
                                                                progress=self.ctx.progress),
                                   self._checks, self.results, jitter=self.jitter)

    # -- what it was made with ---------------------------------------------------------------------
    @property
    def target(self) -> Target:
        return self.ctx.target

    @property
    def settings(self) -> Settings:
        return self.ctx.settings

    @property
    def ledger(self) -> Ledger:
        return self.ctx.ledger

    @property
    def faults(self) -> FaultTable:
        """The faults this drill may inject: the target's own (:class:`HasFaults`) and the built-ins."""
        return self.ctx.faults

    @property
    def round(self) -> int:
        return self.ctx.round

    @property
    def slo(self) -> SLO:
        return self.ctx.slo

    @property
    def active(self) -> ActiveFault | None:
        """The innermost fault in effect, if any."""
        return self._guard.active

    # -- choices --------------------------------------------------------------------------
    @property
    def region_names(self) -> list[str]:
        return self.ctx.region_names

    def pick_region(self, exclude: tuple[str, ...] | list[str] = ()) -> str:
        """Pick a region at random from the seeded generator; the pick is recorded."""
        choices = [r for r in self.region_names if r not in exclude]
        if not choices:
            raise FaultError(f"no region left to pick (all of {self.region_names} excluded)")
        region = self.rng.choice(choices)
        self.picks.append(region)
        log.info("picked region %s (seed %s, round %s)", region, self.settings.seed, self.round)
        return region

    # -- the checks before a fault ---------------------------------------------------------------
    def check_capacity(self, *out: str, action: str | None = None) -> str:
        """Refuse, before anything is injected, a drill that takes the regions *out* away
        when the rest could not carry the offered load with the margin (N-1, N-2, ...).

        :meth:`fault` calls it for every fault that takes a region out; call it yourself to
        refuse a multi-fault drill before its first fault.

        Returns:
            The arithmetic that passed, for the dry-run plan.

        Raises:
            DrillRefused: with the capacity arithmetic in the message.
        """
        return self._checks.capacity(*out, action=action)

    def check_timing(self, action: str | None = None) -> str:
        """Refuse a drill whose clients could not have moved within the switchover limit
        (see :meth:`gameday.drill.checks.DrillChecks.timing`)."""
        return self._checks.timing(action)

    def prediction(self, fault: Fault, action: str, *, entry_nodes_route: bool) -> Prediction:
        """The windows the federation's own timing predicts for *fault* (DESIGN.md §8; see
        :meth:`gameday.drill.checks.DrillChecks.prediction`)."""
        return self._checks.prediction(fault, action, entry_nodes_route=entry_nodes_route)

    # -- the fault ---------------------------------------------------------------------------
    @contextmanager
    def fault(self, kind: str, region: str | None = None, *, baseline: float = 1.0, steady_timeout: float = 20.0,
              restore_timeout: float = 60.0, observe_after: float = 0.3,
              observe_until: Callable[[], bool] | None = None, **params: Any) -> Iterator[ActiveFault]:
        """Inject *kind* (on *region*) for the duration of the block, then restore.

        Faults nest: a fault entered inside another's block is injected on top of it
        (e.g. a second region out, N-2) and shares its observers and timeline.

        Args:
            baseline: seconds of steady state observed before injecting.
            steady_timeout: seconds to wait for that steady state; nothing is injected
                when it is not seen by then.
            restore_timeout: seconds to wait for steady state after the revert.
            observe_after: seconds to keep observing once steady state is back (a
                returning region's weight ramp, for example).
            observe_until: then keep observing until this returns True (what the verdict
                needs has been recorded, e.g. the restore's version), for at most
                *restore_timeout* seconds more: a wait on the condition, not on a guess of
                how long a loaded machine takes. When it never holds, the observation ends
                and the verdict judges what was recorded.
            params: the fault's parameters (see :mod:`gameday.faults.catalogue`).

        The drill's first fault first waits :attr:`jitter` seconds (``--gameday-round-jitter``;
        none by default), before its turn and its observers.

        With ``--gameday-dry-run`` nothing is injected: the checks below run, the plan
        (health check, steady state, the fault and its exact inverse) is printed and the
        test is skipped with the plan as its reason (a dry run passes no verdict).

        Raises:
            ConfigError: the fault request is invalid (nothing injected).
            TargetUnreachable: the federation is not healthy, or a component died or the
                load fell short during the baseline (nothing injected).
            DrillRefused: the regions left would not carry the load, or clients could not
                move within the switchover limit (nothing injected).
            DrillLockTimeout: on a shared federation (:class:`SharedFederation`), another
                process's drill held the drill lock past ``--gameday-drill-lock-timeout``
                (nothing injected; the message names the holder).
            DrillAborted: a stop condition reverted the fault early.
            ComponentDied: a component the fault does not stop died; every fault reverted.
            LoadCollapsed: the load generator exited or collapsed; every fault reverted.
            RestoreIncomplete: the revert failed; the ledger keeps the entry.
            KeyboardInterrupt: a signal (Ctrl-C, SIGTERM, SIGHUP) has arrived, even one whose
                exception something swallowed: nothing is injected after it.
        """
        phases, guard = self._phases, self._guard
        req = phases.preflight(kind, region, params, baseline=baseline, restore_timeout=restore_timeout)
        phases.jitter(req)
        tl, observer = phases.open(req)
        live = liveness_of(self.target)
        survivors = tuple(n.name for n in observer.sources.entry_nodes if n.region not in req.lost)
        active: ActiveFault | None = None
        try:
            prediction = phases.baseline(req, observer, tl, survivors, baseline=baseline, timeout=steady_timeout)
            entry, window = phases.inject(req, tl, live)
            result = phases.new_result(req, window, observer, survivors=survivors, prediction=prediction, live=live)
            active = ActiveFault(window, result, observer, entry.id)
            guard.stack.append(active)
            with phases.observing(req, active):
                yield active
        except BaseException as exc:
            # A signal or an error before the observation completed: the figures are partial, and
            # the history must not count them (a verdict's own AssertionError is not an abort).
            if active is not None and active.window.aborted is None:
                active.window.aborted = abort_reason(exc)
            raise
        finally:
            try:
                if active is not None:
                    phases.restore(req, active, restore_timeout=restore_timeout, observe_after=observe_after,
                                   observe_until=observe_until)
            finally:
                phases.close(req, active, observer)
        phases.raise_after(req, active, observer)

    # -- observing -------------------------------------------------------------------------------
    def observe_switchover(self, fault: ActiveFault, timeout: float | None = None) -> DrillResult:
        """Watch until switchover, DNS convergence and client recovery are all measured,
        or *timeout* seconds pass (default: switchover SLO + TTL + recovery window + 5 s).

        Returns the result; its ``assert_*`` methods judge it. Raises DrillAborted if a
        stop condition fired.
        """
        res = fault.result
        res.switchover_observed = True
        if fault.region is None or not self.faults[fault.window.kind].takes_region_out:
            raise FaultError(f"{fault.window.kind} removes no region; use drill.observe(fault, seconds)")
        timeout = timeout if timeout is not None else (
            self.slo.switchover_limit + self.ctx.dns_ttl + self.slo.recovery_window + 5)
        deadline = fault.window.t_fault + timeout
        # The observation ends at the first tick at which every figure is decided. Client
        # recovery cannot be before a whole recovery window has passed after the fault:
        # until then the full check runs every 0.5 s (it sums every request), from then on
        # at every tick, so the block does not outlast its last window by up to 0.5 s.
        # A window is decided only once every request sent in it is recorded (the load's
        # watermark has passed its end): one that looks clean while its failed requests are
        # still timing out would end the block on a figure the final records contradict.
        decidable = fault.window.t_fault + (self.slo.recovery_window if self.ctx.load is not None else 0.0)
        last_full = 0.0
        while time.monotonic() < deadline:
            self._guard.check(fault)
            now = time.monotonic()
            if res.switchover().value is not None and (now >= decidable or now - last_full > 0.5):
                last_full = now
                done = res.dns_convergence().value is not None
                if done and self.ctx.load is not None:
                    covered = self._guard.requests_complete_until(now)
                    done = covered >= decidable and res.client_recovery(until=covered).value is not None
                if done:
                    break
            self._guard.tick_progress()
            time.sleep(0.1)
        self._guard.check(fault)
        return res

    def observe(self, fault: ActiveFault, seconds: float) -> DrillResult:
        """Watch the fault for *seconds* (for faults that remove no region)."""
        end = fault.window.t_fault + seconds
        while time.monotonic() < end:
            self._guard.check(fault)
            self._guard.tick_progress()
            time.sleep(0.1)
        self._guard.check(fault)
        return fault.result
