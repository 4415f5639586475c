"""The phases of one fault, in the order :meth:`gameday.drill.Drill.fault` runs them (DESIGN.md §4 and §8).

1. :meth:`FaultPhases.preflight`: the request checked and refused before anything is touched
   (the fault exists and fits, the target can do it, the regions left carry the load, clients
   can move in time); a dry run prints its plan here and skips.
   :meth:`FaultPhases.jitter`: the drill's first fault waits its seeded round jitter
   (``--gameday-round-jitter``), if any.
2. :meth:`FaultPhases.open`: the outermost fault's turn (:mod:`gameday.drill.turns`), the
   health check, a new timeline and its observers; a nested fault shares its parent's.
3. :meth:`FaultPhases.baseline`: the prediction, then the steady state.
4. :meth:`FaultPhases.inject`: the ledger first, then the injection (never after a signal).
5. :meth:`FaultPhases.observing`: the test's block, as the "observe" step.
6. :meth:`FaultPhases.restore`: the revert, then the steady state again.
7. :meth:`FaultPhases.close`: on every way out, the observers stopped, the turn given back,
   the result recorded; then :meth:`FaultPhases.raise_after` for what went wrong meanwhile.

Each phase is one step of the drill's report (:mod:`gameday.reports.steps`), with its facts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from gameday.drill import waits
from gameday.drill.checks import DrillChecks, entry_nodes_route
from gameday.drill.context import ActiveFault, DrillContext, FaultRequest
from gameday.drill.guard import FaultGuard
from gameday.drill.turns import Turns
from gameday.errors import (
    ComponentDied,
    DrillAborted,
    DrillRefused,
    FaultError,
    FaultUnavailable,
    LoadCollapsed,
    TargetError,
)
from gameday.faults.ledger import LedgerEntry
from gameday.interfaces import (
    ChecksPermissions,
    ComponentState,
    FaultPlanner,
    HasStatePrimary,
    Liveness,
    liveness_of,
)
from gameday.model.timeline import FaultWindow, Timeline
from gameday.observers.observer import Observer
from gameday.observers.sources import Sources
from gameday.observers.watch import InEffect, Watcher
from gameday.reports import steps as phase_steps
from gameday.targets import registry
from gameday.verdicts.predict import Prediction
from gameday.verdicts.result import DrillResult

log = logging.getLogger(__name__)


class FaultPhases:
    """The phases of every fault of one drill, sharing its guard, its turn and its checks."""

    def __init__(self, ctx: DrillContext, guard: FaultGuard, turns: Turns, checks: DrillChecks,
                 results: list[DrillResult], *, jitter: float = 0.0) -> None:
        self.ctx = ctx
        self.guard = guard
        self.turns = turns
        self.checks = checks
        self.results = results
        """Where each fault's result goes when it is closed (the drill's ``results``)."""
        self.jitter_s = jitter
        """Seconds the drill's first fault waits (:attr:`gameday.drill.Drill.jitter`)."""
        self._jitter_done = False
        self._waited: tuple[FaultRequest, float] | None = None
        self._primary: tuple[FaultRequest, str | None] | None = None
        """The region leading the data before the last fault's injection (see :meth:`_state_primary`)."""
        """The request that waited the jitter and how long, until its result records it."""

    def preflight(self, kind: str, region: str | None, params: dict[str, Any], *, baseline: float,
                  restore_timeout: float) -> FaultRequest:
        """Check the request before anything is touched: the fault exists and fits the region,
        the target can do it, the regions left carry the load, the stated timing lets clients
        move in time; a dry run prints its plan here and skips.

        Raises:
            ConfigError, DrillRefused: see :meth:`~gameday.drill.Drill.fault`; nothing touched.
            pytest.skip.Exception: a dry run, or a conformance check on a target without the fault.
        """
        c = self.ctx
        fk = c.faults.check(kind, region, params, c.region_names)
        action = f"{kind} {region or ''}".strip()
        c.interrupts.checkpoint(f"before the checks of {action}")
        if not c.settings.dry_run and (why := c.ledger.unwritable()) is not None:
            raise DrillRefused(f"refusing {action}: the fault ledger {c.ledger.path} cannot be written: {why}; a "
                               "fault whose ledger entry cannot be written could not be restored after a kill. "
                               "Free space or give --gameday-reports a writable folder; nothing was injected")
        plan: tuple[str, str] | None = None
        if isinstance(c.target, FaultPlanner):
            # The target refuses a fault it cannot do (an external profile without it) now,
            # before the ledger records an injection that would never happen.
            try:
                plan = c.target.plan_fault(kind, region, dict(params))
            except FaultUnavailable as exc:
                if not c.skip_unavailable_faults:
                    raise
                pytest.skip(f"target {c.target.name} cannot inject {action}: {exc}")
        parent = self.guard.active
        already_lost = parent.result.lost if parent else ()
        lost = already_lost + ((region,) if fk.takes_region_out and region else ())
        checks: list[str] = []
        if len(lost) > len(already_lost):
            # Every drill that takes a region out, N-1 as much as N-2: survivors that cannot
            # carry the load would only be shown to fail at 100 % errors after the injection.
            # Only the regions this drill takes out: N-1 over *every* region stays a verdict
            # (assert_headroom's static part), so that it can still be shown to fail.
            checks.append(self.checks.capacity(*lost, action=action))
            checks.append(self.checks.timing(action))
        if c.settings.dry_run:
            # (a dry run never gets inside the block, so it is always the outermost fault)
            self.checks.dry_run(kind, region, dict(params), checks=checks, lost=lost, baseline=baseline,
                                restore_timeout=restore_timeout)
        return FaultRequest(kind, region, params, fk, plan, parent, already_lost, lost)

    def jitter(self, req: FaultRequest) -> None:
        """The drill's first fault (only) waits :attr:`jitter_s` seconds, before its turn, its
        health check and its observers (nothing held, nothing polled meanwhile): with
        ``--gameday-round-jitter`` J, each round injects at a phase of the federation's periodic
        processes (a health checker's cycle of period P <= J) independent of the other rounds'.
        Without it (J = 0) nothing is waited and nothing recorded.

        Raises:
            KeyboardInterrupt: a signal has arrived (checked every 0.1 s); nothing injected.
        """
        c, bound = self.ctx, self.ctx.settings.round_jitter
        if req.parent is not None or self._jitter_done or bound <= 0:
            return
        self._jitter_done = True
        seconds = self.jitter_s
        with c.steps.phase(f"round jitter before {req.label}") as step:
            step.params = {"waited": f"{seconds:.2f} s",
                           "drawn from": f"0-{bound:g} s, uniform (seed {c.settings.seed}, round {c.round + 1})"}
            step.title = f"round jitter: {seconds:.2f} s of 0-{bound:g} s before {req.label}"
            c.progress(f"round {c.round + 1}: waiting {seconds:.1f} s (round jitter, 0-{bound:g} s) "
                       f"before {req.label}")
            end = time.monotonic() + seconds
            while True:
                c.interrupts.checkpoint(f"round jitter before {req.label}")
                if (left := end - time.monotonic()) <= 0:
                    break
                time.sleep(min(0.1, left))
        self._waited = (req, seconds)

    def open(self, req: FaultRequest) -> tuple[Timeline, Observer]:
        """The outermost fault's turn, the health check, a new timeline and its observers; a
        nested fault's are its parent's (and it takes no turn).

        Raises:
            DrillLockTimeout, TargetUnreachable: see :meth:`~gameday.drill.Drill.fault`;
                nothing injected, nothing held.
        """
        if req.parent is not None:
            return req.parent.result.timeline, req.parent.observer
        # Held from here (before the health check: another drill's fault would fail it)
        # until the outermost fault is restored, on every way out; the kernel frees it
        # if this process dies.
        self.turns.take(req.label, self._set_phase)
        try:
            self.ctx.target.check_health(timeout=15)
            tl = Timeline(t0=time.monotonic())
            # Sources made now: their alarms count from now on.
            observer = self._start_observer(self.ctx.target.sources(), tl)
        except BaseException:
            self.turns.release()
            raise
        return tl, observer

    def _set_phase(self, phase: str) -> None:
        self.guard.phase = phase

    def _start_observer(self, sources: Sources, tl: Timeline) -> Observer:
        """The observers and the watcher of an outermost fault (nested ones share them)."""
        target, load = self.ctx.target, self.ctx.load
        live = liveness_of(target)
        live_sources: list[Callable[[], list[ComponentState]]] = [live.liveness] if live is not None else []
        if load is not None:
            live_sources.append(load.liveness)
        if live is None:
            log.warning("the %s target has no liveness capability: a component that dies mid-drill is "
                        "seen only through what it breaks", target.name)
        self.guard.start(Watcher(tl, load=load, liveness_observed=live is not None))
        observer = Observer(sources, list(self.ctx.regions), tl, request_source=load.poll if load else None,
                            on_tick=self.guard.on_tick, liveness=live_sources)
        observer.start()
        return observer

    def baseline(self, req: FaultRequest, observer: Observer, tl: Timeline, survivors: tuple[str, ...], *,
                 baseline: float, timeout: float) -> Prediction | None:
        """The prediction, then *baseline* seconds of steady state before the fault; the
        prediction (None for a fault that takes no region out).

        Raises:
            DrillRefused: a stated timing the federation contradicts (its DNS TTL).
            TargetUnreachable: no steady state within *timeout*; nothing injected.
        """
        # After the health check (it reads the TTL the DNS server answers with), before anything
        # is injected: a stated timing the federation contradicts refuses the drill here.
        prediction = self.checks.prediction(req.fk, req.label, entry_nodes_route=entry_nodes_route(observer.sources)) \
            if req.takes_region_out else None
        guard, steps = self.guard, self.ctx.steps
        guard.phase = "baseline"
        start = guard.baseline_start = time.monotonic()
        tl.mark(start, "baseline")
        with steps.phase(f"steady state before {req.label}") as step:
            waits.steady_state(guard, observer, tl, baseline, nodes=survivors, lost=req.already_lost,
                               outermost=req.parent is None, label=req.label, timeout=timeout)
            step.params = phase_steps.baseline_facts(
                tl.copy(), start, time.monotonic(), [r for r in self.ctx.region_names if r not in req.already_lost])
            step.title = phase_steps.baseline_title(step.params)
        self.ctx.interrupts.checkpoint(f"steady state before {req.label} reached")
        self._primary = (req, self._state_primary(req, observer))
        return prediction

    def _state_primary(self, req: FaultRequest, observer: Observer) -> str | None:
        """The region leading the data just before a fault that takes a store node (the
        write-recovery prediction tells a failover from a lost follower by it); None: no such
        fault, no state layer, or the target cannot say."""
        target = self.ctx.target
        if req.fk.store_node is None or observer.sources.state is None or not isinstance(target, HasStatePrimary):
            return None
        try:
            return target.state_primary()
        except TargetError as exc:
            log.warning("gameday: which region leads the data is not known before %s: %s", req.label, exc)
            return None

    def inject(self, req: FaultRequest, tl: Timeline, live: Liveness | None) -> tuple[LedgerEntry, FaultWindow]:
        """Record the fault in the ledger, then inject it (never after a signal); its ledger
        entry and its window on the timeline (``t_fault``: when the injection call returned)."""
        c, watcher = self.ctx, self.guard.watcher
        assert watcher is not None
        kind, region, params, plan, label = req.kind, req.region, req.params, req.plan, req.label
        with c.steps.phase(f"inject {label}") as step:
            step.params = {"fault": kind, "region": region or "-", "parameters": repr(dict(params)),
                           "action": plan[0] if plan else f"{c.target.name} target: {label}",
                           "inverse": plan[1] if plan else "the target's revert of the same fault"}
            step.title = f"inject {label}: {step.params['action']}"
            # The absolute gate: a signal has arrived, whatever became of its exception.
            c.interrupts.refuse_injection(label)
            if isinstance(c.target, ChecksPermissions):
                # Never inject what cannot be reverted: the credentials must allow the inverse too
                # (asked here, once the drill holds its turn: an API call is a touch of the clusters).
                lacking = c.target.missing_permissions(kind, region, dict(params))
                if lacking:
                    raise DrillRefused(f"refusing {label}: the {c.target.name} target's credentials lack what the "
                                       f"fault or its exact inverse needs: {'; '.join(lacking)}. `gameday rbac` "
                                       "prints a Role granting exactly what the faults need; nothing was injected")
            entry = c.ledger.record(kind, region, params, c.target.name, c.target.ref(),
                                    attach=registry.attach_path(c.target))
            # Expected dead from before the call: the watcher must not name the fault's own work.
            watcher.expect(entry.id, InEffect(label, None,
                                              live.stopped_by(kind, region) if live else frozenset()))
            self.guard.phase = "inject"
            try:
                # Again at the last moment (the ledger write took time): `gameday drill`'s stop
                # file may have come meanwhile, before its signal reached this process.
                c.interrupts.refuse_injection(label)
            except KeyboardInterrupt:
                watcher.unexpect(entry.id, time.monotonic())
                c.ledger.remove(entry.id)
                raise
            c.interrupts.note_injection(label)
            t_call = time.monotonic()
            tl.mark(t_call, "inject_call", label)
            # An injection always completes and is recorded: a signal meanwhile is raised after.
            with c.interrupts.shielded(f"injecting {label}"):
                try:
                    c.target.inject(kind, region, params)
                finally:
                    t_fault = time.monotonic()
                    tl.mark(t_fault, "fault", label)
                    watcher.took_effect(entry.id, t_fault)
                    c.ledger.update_params(entry.id, params)
                    step.params["injection call"] = f"{(t_fault - t_call) * 1000:.0f} ms"
        return entry, FaultWindow(kind, region, t_call, t_fault, params=dict(params))

    def new_result(self, req: FaultRequest, window: FaultWindow, observer: Observer, *,
                   survivors: tuple[str, ...], prediction: Prediction | None, live: Liveness | None) -> DrillResult:
        """The result the fault's block records into (its figures are measured when asked)."""
        c, tl, region, fk = self.ctx, observer.tl, req.region, req.fk
        result = DrillResult(
            fault=window, timeline=tl, slo=c.slo, survivors=survivors,
            capacity={r.name: r.capacity for r in c.regions}, offered=c.offered,
            margin=c.margin, lost=req.lost, started=tl.t0, round=c.round, seed=c.settings.seed,
            already_lost=req.already_lost, weights={r.name: r.weight for r in c.regions},
            cut_off=(region,) if fk.cuts_off_region and region else (), instance_outage=fk.hits_instances,
            control_plane_source=observer.sources.control_plane is not None,
            state_source=observer.sources.state is not None,
            stated_replication=getattr(observer.sources.state, "stated", None),
            write_timeout=getattr(observer.sources.state, "timeout", None),
            store_effect=fk.store_node,
            state_primary=self._primary[1] if self._primary is not None and self._primary[0] is req else None,
            task_queue=observer.writer is not None and observer.writer.queue is not None,
            reads_own_writes=observer.writer is not None and observer.writer.reader is not None,
            nested=req.parent is not None,
            alarm_sources=bool(observer.sources.alarms), alarm_prefix="", poll_interval=observer.interval,
            clock_uncertainty=c.load.clock_uncertainty if c.load is not None else 0.0,
            utilisation_regions=frozenset(r for r, urls in observer.sources.utilisation.items() if urls),
            on_verdict=c.steps.verdict, prediction=prediction, rates_since=observer.poll_rates,
            checks_since=observer.check_timeouts_since,
        )
        if self.turns.note is not None:
            result.notes["drill lock"] = self.turns.note
        if self._waited is not None and self._waited[0] is req:
            result.notes["round_jitter"] = {"waited_s": round(self._waited[1], 3),
                                            "up_to_s": c.settings.round_jitter}
            self._waited = None
        if live is None:
            result.notes["liveness"] = (f"not observed: the {c.target.name} target has no liveness "
                                        "capability; a dead component shows only as what it breaks")
        return result

    @contextmanager
    def observing(self, req: FaultRequest, active: ActiveFault) -> Iterator[None]:
        """The test's block, as the "observe" step. A casualty seen while injecting (before the
        watcher could revert it) is raised before the block; an error of the block that follows
        from a casualty (an httpx error from a dead proxy, a verdict) is raised as the casualty."""
        guard = self.guard
        guard.phase = "observe"
        with self.ctx.steps.phase(f"observe {req.label}") as step:
            try:
                if guard.casualty is not None:
                    guard.revert(active, guard.casualty.message)
                    raise guard.casualty_error()
                try:
                    yield
                except Exception as exc:
                    # The casualty is the cause the user must see first.
                    if guard.casualty is not None and not isinstance(exc, (ComponentDied, LoadCollapsed)):
                        raise guard.casualty_error() from exc
                    raise
            finally:
                if self.ctx.on_block_end is not None:
                    self.ctx.on_block_end(active.window)
                step.params = phase_steps.observe_facts(active.result)
                step.title = phase_steps.observe_title(step.params)

    def restore(self, req: FaultRequest, active: ActiveFault, *, restore_timeout: float, observe_after: float,
                observe_until: Callable[[], bool] | None) -> None:
        """Revert the fault, then (without a casualty) wait for the steady state, observe
        *observe_after* seconds more and, with *observe_until*, until it holds."""
        guard = self.guard
        with self.ctx.steps.phase(f"restore {req.label}") as step:
            try:
                guard.revert(active, reason=guard.casualty.message if guard.casualty else None)
                if guard.casualty is None:  # with a casualty there is no steady state to wait for
                    guard.phase = "restore"
                    waits.restored(guard, active, restore_timeout, req.already_lost)
                    guard.sleep(observe_after)
                    if observe_until is not None:
                        guard.wait_until(observe_until, restore_timeout)
                    active.window.t_observed = time.monotonic()
                    if req.parent is None:  # steady again: what the store still holds (DESIGN.md §9)
                        active.observer.verify_writes()
            finally:
                step.params = phase_steps.restore_facts(active.result)
                step.title = phase_steps.restore_title(step.params)

    def close(self, req: FaultRequest, active: ActiveFault | None, observer: Observer) -> None:
        """On every way out: the outermost fault stops its observers and gives back its turn;
        the result gets the observers' rates over its window and is recorded."""
        guard = self.guard
        if active is not None and active in guard.stack:
            guard.stack.remove(active)
        if req.parent is None:
            try:
                observer.stop()
            finally:
                guard.phase = "done"
                self.turns.release()
        if active is not None:
            active.result.poll_rates = observer.poll_rates()
            active.result.window_rates = observer.poll_rates(since=active.window.t_fault)
            # An alarm source that never answered (a log file that is not there) saw no alarm
            # because it saw nothing: the alarm verdicts are n/a, never "0 alarms".
            active.result.silent_alarm_sources = {
                r.description: r.last_error or "no answer" for k, r in active.result.poll_rates.items()
                if k.startswith("alarms ") and r.polls > 0 and r.answered == 0}
            active.result.window_check_timeouts = observer.check_timeouts_since(active.window.t_fault)
            active.result.casualty = guard.casualty
            self.results.append(active.result)
            if self.ctx.on_result is not None:
                self.ctx.on_result(active.result)

    def raise_after(self, req: FaultRequest, active: ActiveFault | None, observer: Observer) -> None:
        """After a block that ended normally: what went wrong meanwhile, as its error."""
        if self.guard.casualty is not None:
            raise self.guard.casualty_error()
        if observer.error is not None:
            raise FaultError(f"observer failed during the drill: {observer.error!r}") from observer.error
        if active is not None and active.window.aborted:
            raise DrillAborted(f"{req.label} aborted by a stop condition: {active.window.aborted}")
