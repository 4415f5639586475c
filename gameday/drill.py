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

On a federation other processes drill too (kind's shared clusters, a staging context, a
profile's federation: the target is a :class:`~gameday.interfaces.SharedFederation`),
the outermost fault holds the drill lock (:mod:`gameday.runtime.drill_lock`) from before its health
check and steady state until it is restored, so drills there take turns. On a federation
that runs on this machine (``local``), it holds one of the machine's drill slots
(:mod:`gameday.runtime.drill_slots`) as long, so parallel drills do not starve each other.

:meth:`Drill.fault` is the runbook (DESIGN.md §4 and §8), one method per phase, each in order:
:meth:`~Drill._preflight` (the request checked and refused before anything is touched; a dry
run stops here), :meth:`~Drill._open` (lock, slot, health check, observers),
:meth:`~Drill._baseline` (the prediction, then the steady state), :meth:`~Drill._inject` (the
ledger first, never after a signal), the block itself (observe), :meth:`~Drill._restore`
(revert, steady state again), :meth:`~Drill._close` (observers stopped, lock and slot given
back, the result recorded, on every way out) and :meth:`~Drill._raise_after`. To add a phase,
add a method beside them and call it from ``fault()`` in its place.
"""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from gameday.errors import (
    ComponentDied,
    DrillAborted,
    DrillLockTimeout,
    DrillRefused,
    FaultError,
    FaultUnavailable,
    LoadCollapsed,
    RestoreIncomplete,
    TargetUnreachable,
)
from gameday.faults import FAULTS, Fault, Ledger
from gameday.faults.ledger import LedgerEntry
from gameday.interfaces import (
    ComponentState,
    FaultPlanner,
    HasFaults,
    Liveness,
    RunsOnThisMachine,
    SharedFederation,
    StatesTiming,
    Target,
    liveness_of,
)
from gameday.load.runner import LoadRunner
from gameday.model import preflight, ticks
from gameday.model.timeline import Casualty, FaultWindow, NodeObs, Timeline, abort_reason
from gameday.model.topology import Timing, Topology
from gameday.observers.observer import Observer
from gameday.observers.sources import Sources
from gameday.observers.watch import InEffect, Watcher, abort_error, steady_state
from gameday.reports import steps as phase_steps
from gameday.reports.steps import NoSteps, Steps
from gameday.runtime.drill_lock import DrillLock, Holder
from gameday.runtime.drill_slots import DrillSlots, slot_count
from gameday.runtime.interrupts import INTERRUPTS, Interrupts
from gameday.runtime.settings import Settings
from gameday.targets import registry
from gameday.verdicts.predict import Prediction, predict, unpredicted
from gameday.verdicts.result import DrillResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Request:
    """One :meth:`Drill.fault` call, as checked before anything is touched."""

    kind: str
    region: str | None
    params: dict[str, Any]
    """The fault's parameters (one dict throughout: the target may record in it what its revert needs)."""
    fk: Fault
    plan: tuple[str, str] | None
    """(action, inverse) as the target plans them (:class:`FaultPlanner`), None otherwise."""
    parent: ActiveFault | None
    """The enclosing fault of a nested one."""
    already_lost: tuple[str, ...]
    lost: tuple[str, ...]

    @property
    def label(self) -> str:
        """``gateway_down b``."""
        return f"{self.kind} {self.region or ''}".strip()


@dataclass
class ActiveFault:
    """A fault in effect: its window on the timeline and the result being recorded."""

    window: FaultWindow
    result: DrillResult
    observer: Observer
    ledger_id: str
    reverted: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def region(self) -> str | None:
        return self.window.region


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
        load: LoadRunner | None = None,
        progress: Callable[[str], None] | None = None,
        round_index: int = 0,
        dns_ttl: float = 5.0,
        on_result: Callable[[DrillResult], object] | None = None,
        on_block_end: Callable[[FaultWindow], object] | None = None,
        skip_unavailable_faults: bool = False,
        steps: Steps | None = None,
        interrupts: Interrupts = INTERRUPTS,
    ) -> None:
        self.target = target
        #: The process's signal policy: no fault is injected once a signal has arrived.
        self.interrupts = interrupts
        #: A conformance check skips (not applicable, with the reason) where the target cannot
        #: do the fault it needs; a drill asking for such a fault is misconfigured and errors.
        self.skip_unavailable_faults = skip_unavailable_faults
        self.settings = settings
        self.slo = settings.slo
        self.ledger = ledger
        self.load = load
        self.offered = offered
        self.margin = margin
        self.progress = progress or (lambda s: None)
        self.round = round_index
        self.dns_ttl = dns_ttl
        self.on_result = on_result
        #: Called the moment a fault's block ends (before its figures are summed up and the
        #: fault is reverted): the session shields the revert from a signal from here on.
        self.on_block_end = on_block_end
        self.steps: Steps = steps or NoSteps()
        """Where the drill's phases and verdicts go as steps (the Allure report's)."""
        self.rng = random.Random(f"{settings.seed}:{seed_key}:{round_index}")
        self.picks: list[str] = []
        self.results: list[DrillResult] = []
        self._stack: list[ActiveFault] = []
        self._regions = target.regions()
        self.faults = FAULTS.extended(target.faults()) if isinstance(target, HasFaults) else FAULTS
        """The faults this drill may inject: the target's own (:class:`HasFaults`) and the built-ins."""
        self._last_progress = 0.0
        self._stop = ticks.StopCondition(settings.slo.stop_error_ratio, settings.slo.stop_after)
        """The stop condition: client errors above the ratio for too long revert every fault."""
        self._watcher: Watcher | None = None
        self._casualty: Casualty | None = None
        self._casualty_reverted: list[ActiveFault] = []
        self._casualty_handled = threading.Event()
        """Set once the watcher has reverted what was in effect when it saw the casualty."""
        self._baseline_start: float | None = None
        self.seed_key = seed_key
        self._lock_note: str | None = None
        """How the outermost fault's drill lock was taken (a result note), while it is held."""
        self._slot: DrillSlots | None = None
        """The machine's drill slot the outermost fault holds (a target on this machine)."""

    # -- choices --------------------------------------------------------------------------
    @property
    def region_names(self) -> list[str]:
        return [r.name for r in self._regions]

    def pick_region(self, exclude: tuple[str, ...] | list[str] = ()) -> str:
        """Pick a region at random from the seeded generator; the pick is recorded."""
        choices = [r for r in self.region_names if r not in exclude]
        if not choices:
            raise FaultError(f"no region left to pick (all of {self.region_names} excluded)")
        region = self.rng.choice(choices)
        self.picks.append(region)
        log.info("picked region %s (seed %s, round %s)", region, self.settings.seed, self.round)
        return region

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
        req = self._preflight(kind, region, params, baseline=baseline, restore_timeout=restore_timeout)
        tl, observer, lock = self._open(req)
        watcher = self._watcher
        assert watcher is not None
        live = liveness_of(self.target)
        survivors = tuple(n.name for n in observer.sources.entry_nodes if n.region not in req.lost)
        active: ActiveFault | None = None
        try:
            prediction = self._baseline(req, observer, tl, survivors, baseline=baseline, timeout=steady_timeout)
            entry, window = self._inject(req, tl, watcher, live)
            result = self._new_result(req, window, observer, survivors=survivors, prediction=prediction, live=live)
            active = ActiveFault(window, result, observer, entry.id)
            self._stack.append(active)
            self._phase = "observe"
            with self.steps.phase(f"observe {req.label}") as step:
                try:
                    if self._casualty is not None:  # seen while injecting, before the watcher could revert it
                        self._revert(active, self._casualty.message)
                        raise self._casualty_error()
                    try:
                        yield active
                    except Exception as exc:
                        # The block failed on what the casualty broke (an httpx error from a dead proxy,
                        # a verdict): the casualty is the cause the user must see first.
                        if self._casualty is not None and not isinstance(exc, (ComponentDied, LoadCollapsed)):
                            raise self._casualty_error() from exc
                        raise
                finally:
                    if self.on_block_end is not None:
                        self.on_block_end(window)
                    step.params = phase_steps.observe_facts(active.result)
                    step.title = phase_steps.observe_title(step.params)
        except BaseException as exc:
            # A signal or an error before the observation completed: the figures are partial, and
            # the history must not count them (a verdict's own AssertionError is not an abort).
            if active is not None and active.window.aborted is None:
                active.window.aborted = abort_reason(exc)
            raise
        finally:
            try:
                if active is not None:
                    self._restore(req, active, restore_timeout=restore_timeout, observe_after=observe_after,
                                  observe_until=observe_until)
            finally:
                self._close(req, active, observer, lock)
        self._raise_after(req, active, observer)

    def _preflight(self, kind: str, region: str | None, params: dict[str, Any], *, baseline: float,
                   restore_timeout: float) -> _Request:
        """Check the request before anything is touched: the fault exists and fits the region,
        the target can do it, the regions left carry the load, the stated timing lets clients
        move in time; a dry run prints its plan here and skips.

        Raises:
            ConfigError, DrillRefused: see :meth:`fault`; nothing touched.
            pytest.skip.Exception: a dry run, or a conformance check on a target without the fault.
        """
        fk = self.faults.check(kind, region, params, self.region_names)
        action = f"{kind} {region or ''}".strip()
        self.interrupts.checkpoint(f"before the checks of {action}")
        plan: tuple[str, str] | None = None
        if isinstance(self.target, FaultPlanner):
            # The target refuses a fault it cannot do (an external profile without it) now,
            # before the ledger records an injection that would never happen.
            try:
                plan = self.target.plan_fault(kind, region, dict(params))
            except FaultUnavailable as exc:
                if not self.skip_unavailable_faults:
                    raise
                pytest.skip(f"target {self.target.name} cannot inject {action}: {exc}")
        parent = self._stack[-1] if self._stack else None
        already_lost = parent.result.lost if parent else ()
        lost = already_lost + ((region,) if fk.takes_region_out and region else ())
        checks: list[str] = []
        if len(lost) > len(already_lost):
            # Every drill that takes a region out, N-1 as much as N-2: survivors that cannot
            # carry the load would only be shown to fail at 100 % errors after the injection.
            # Only the regions this drill takes out: N-1 over *every* region stays a verdict
            # (assert_headroom's static part), so that it can still be shown to fail.
            checks.append(self.check_capacity(*lost, action=action))
            checks.append(self.check_timing(action))
        if self.settings.dry_run:
            # (a dry run never gets inside the block, so it is always the outermost fault)
            self._dry_run(kind, region, dict(params), checks=checks, lost=lost, baseline=baseline,
                          restore_timeout=restore_timeout)
        return _Request(kind, region, params, fk, plan, parent, already_lost, lost)

    def _open(self, req: _Request) -> tuple[Timeline, Observer, DrillLock | None]:
        """The outermost fault's drill lock and slot, the health check, a new timeline and its
        observers; a nested fault's are its parent's (and it takes no lock).

        Raises:
            DrillLockTimeout, TargetUnreachable: see :meth:`fault`; nothing injected, nothing held.
        """
        if req.parent is not None:
            return req.parent.result.timeline, req.parent.observer, None
        # Held from here (before the health check: another drill's fault would fail it)
        # until the outermost fault is restored, on every way out; the kernel frees it
        # if this process dies.
        lock = self._take_drill_lock(req.label)
        try:
            self._take_slot(req.label)
            self.target.check_health(timeout=15)
            tl = Timeline(t0=time.monotonic())
            # Sources made now: their alarms count from now on.
            observer = self._start_observer(self.target.sources(), tl)
        except BaseException:
            self._release_drill_lock(lock)
            raise
        return tl, observer, lock

    def _baseline(self, req: _Request, observer: Observer, tl: Timeline, survivors: tuple[str, ...], *,
                  baseline: float, timeout: float) -> Prediction | None:
        """The prediction, then *baseline* seconds of steady state before the fault; the
        prediction (None for a fault that takes no region out).

        Raises:
            DrillRefused: a stated timing the federation contradicts (its DNS TTL).
            TargetUnreachable: no steady state within *timeout*; nothing injected.
        """
        # After the health check (it reads the TTL the DNS server answers with), before anything
        # is injected: a stated timing the federation contradicts refuses the drill here.
        prediction = self.prediction(req.fk, req.label, entry_nodes_route=_entry_nodes_route(observer.sources)) \
            if len(req.lost) > len(req.already_lost) else None
        self._phase = "baseline"
        self._baseline_start = time.monotonic()
        tl.mark(self._baseline_start, "baseline")
        with self.steps.phase(f"steady state before {req.label}") as step:
            self._steady_state(observer, tl, baseline, nodes=survivors, lost=req.already_lost,
                               outermost=req.parent is None, label=req.label, timeout=timeout)
            step.params = phase_steps.baseline_facts(
                tl.copy(), self._baseline_start, time.monotonic(),
                [r for r in self.region_names if r not in req.already_lost])
            step.title = phase_steps.baseline_title(step.params)
        self.interrupts.checkpoint(f"steady state before {req.label} reached")
        return prediction

    def _inject(self, req: _Request, tl: Timeline, watcher: Watcher,
                live: Liveness | None) -> tuple[LedgerEntry, FaultWindow]:
        """Record the fault in the ledger, then inject it (never after a signal); its ledger
        entry and its window on the timeline (``t_fault``: when the injection call returned)."""
        kind, region, params, plan, label = req.kind, req.region, req.params, req.plan, req.label
        with self.steps.phase(f"inject {label}") as step:
            step.params = {"fault": kind, "region": region or "-", "parameters": repr(dict(params)),
                           "action": plan[0] if plan else f"{self.target.name} target: {label}",
                           "inverse": plan[1] if plan else "the target's revert of the same fault"}
            step.title = f"inject {label}: {step.params['action']}"
            # The absolute gate: a signal has arrived, whatever became of its exception.
            self.interrupts.refuse_injection(label)
            entry = self.ledger.record(kind, region, params, self.target.name, self.target.ref(),
                                       attach=registry.attach_path(self.target))
            # Expected dead from before the call: the watcher must not name the fault's own work.
            watcher.expect(entry.id, InEffect(label, None,
                                              live.stopped_by(kind, region) if live else frozenset()))
            self._phase = "inject"
            t_call = time.monotonic()
            tl.mark(t_call, "inject_call", label)
            try:
                self.target.inject(kind, region, params)
            finally:
                t_fault = time.monotonic()
                tl.mark(t_fault, "fault", label)
                watcher.took_effect(entry.id, t_fault)
                self.ledger.update_params(entry.id, params)
                step.params["injection call"] = f"{(t_fault - t_call) * 1000:.0f} ms"
        return entry, FaultWindow(kind, region, t_call, t_fault, params=dict(params))

    def _new_result(self, req: _Request, window: FaultWindow, observer: Observer, *, survivors: tuple[str, ...],
                    prediction: Prediction | None, live: Liveness | None) -> DrillResult:
        """The result the fault's block records into (its figures are measured when asked)."""
        tl, region, fk = observer.tl, req.region, req.fk
        result = DrillResult(
            fault=window, timeline=tl, slo=self.slo, survivors=survivors,
            capacity={r.name: r.capacity for r in self._regions}, offered=self.offered,
            margin=self.margin, lost=req.lost, started=tl.t0, round=self.round, seed=self.settings.seed,
            already_lost=req.already_lost, weights={r.name: r.weight for r in self._regions},
            cut_off=(region,) if fk.cuts_off_region and region else (), instance_outage=fk.hits_instances,
            control_plane_source=observer.sources.control_plane is not None,
            alarm_sources=bool(observer.sources.alarms), alarm_prefix="", poll_interval=observer.interval,
            clock_uncertainty=self.load.clock_uncertainty if self.load is not None else 0.0,
            utilisation_regions=frozenset(r for r, urls in observer.sources.utilisation.items() if urls),
            on_verdict=self.steps.verdict, prediction=prediction, rates_since=observer.poll_rates,
            checks_since=observer.check_timeouts_since,
        )
        if self._lock_note is not None:
            result.notes["drill lock"] = self._lock_note
        if live is None:
            result.notes["liveness"] = (f"not observed: the {self.target.name} target has no liveness "
                                        "capability; a dead component shows only as what it breaks")
        return result

    def _restore(self, req: _Request, active: ActiveFault, *, restore_timeout: float, observe_after: float,
                 observe_until: Callable[[], bool] | None) -> None:
        """Revert the fault, then (without a casualty) wait for the steady state, observe
        *observe_after* seconds more and, with *observe_until*, until it holds."""
        with self.steps.phase(f"restore {req.label}") as step:
            try:
                self._revert(active, reason=self._casualty.message if self._casualty else None)
                if self._casualty is None:  # with a casualty there is no steady state to wait for
                    self._phase = "restore"
                    self._wait_restored(active, restore_timeout, req.already_lost)
                    self._sleep_watching(observe_after)
                    if observe_until is not None:
                        self._watch_until(observe_until, restore_timeout)
            finally:
                step.params = phase_steps.restore_facts(active.result)
                step.title = phase_steps.restore_title(step.params)

    def _close(self, req: _Request, active: ActiveFault | None, observer: Observer, lock: DrillLock | None) -> None:
        """On every way out: the outermost fault stops its observers and gives back its lock and
        slot; the result gets the observers' rates over its window and is recorded."""
        if active is not None and active in self._stack:
            self._stack.remove(active)
        if req.parent is None:
            try:
                observer.stop()
            finally:
                self._phase = "done"
                self._release_drill_lock(lock)
        if active is not None:
            active.result.poll_rates = observer.poll_rates()
            active.result.window_rates = observer.poll_rates(since=active.window.t_fault)
            active.result.window_check_timeouts = observer.check_timeouts_since(active.window.t_fault)
            active.result.casualty = self._casualty
            self.results.append(active.result)
            if self.on_result is not None:
                self.on_result(active.result)

    def _raise_after(self, req: _Request, active: ActiveFault | None, observer: Observer) -> None:
        """After a block that ended normally: what went wrong meanwhile, as its error."""
        if self._casualty is not None:
            raise self._casualty_error()
        if observer.error is not None:
            raise FaultError(f"observer failed during the drill: {observer.error!r}") from observer.error
        if active is not None and active.window.aborted:
            raise DrillAborted(f"{req.label} aborted by a stop condition: {active.window.aborted}")

    def _take_drill_lock(self, action: str) -> DrillLock | None:
        """The drill lock of a shared federation (:class:`SharedFederation`), taken; None
        for a target that owns its federation. While another process's drill holds it, the
        wait is on the live line and in the log, naming the holder.

        Raises:
            DrillLockTimeout: still held after ``--gameday-drill-lock-timeout``; nothing injected.
            DrillLockError: the lock file cannot be used; nothing injected.
        """
        if not isinstance(self.target, SharedFederation):
            return None
        key = self.target.drill_lock_key()
        lock = DrillLock(key, what=f"test {self.seed_key}")
        timeout = self.settings.drill_lock_timeout
        told: list[str] = []

        def waiting(holder: Holder | None, waited: float) -> None:
            who = holder.describe() if holder is not None else "another process (it has not said who it is)"
            if who not in told:  # once per holder: the log is not a progress bar
                told.append(who)
                log.warning("%s: waiting for drill lock held by %s (key %s, up to %g s)", action, who, key, timeout)
            self.progress(f"[gameday] {action}: waiting for drill lock held by {who}  {waited:.0f}/{timeout:g} s")

        self._phase = "lock"
        try:
            waited = lock.acquire(timeout, on_wait=waiting)
        except DrillLockTimeout as exc:
            raise DrillLockTimeout(f"refusing {action}: {exc}; nothing was injected", key=exc.key,
                                   holder=exc.holder) from None
        self._lock_note = f"held on {key}" + (
            f" after waiting {waited:.1f} s for {lock.waited_for.describe() if lock.waited_for else 'another process'}"
            if told else "")
        return lock

    def _take_slot(self, action: str) -> None:
        """One of this machine's drill slots (:mod:`gameday.runtime.drill_slots`), for a target
        whose federation runs here: while every slot is held by another drill, the wait is on
        the live line, naming the holders. Released with the drill lock.

        Raises:
            DrillLockTimeout: every slot still held after ``--gameday-drill-lock-timeout``;
                nothing injected.
        """
        if not (isinstance(self.target, RunsOnThisMachine) and self.target.runs_on_this_machine()):
            return
        count = slot_count(self.settings.local_drill_slots)
        if count == 0:
            return
        slots = DrillSlots(count, what=f"test {self.seed_key}")
        timeout = self.settings.drill_lock_timeout

        def waiting(holders: list[Holder], waited: float) -> None:
            who = "; ".join(h.describe() for h in holders) or "other drills"
            self.progress(f"[gameday] {action}: waiting for one of this machine's {count} drill slot(s), held by "
                          f"{who}  {waited:.0f}/{timeout:g} s")

        self._phase = "slot"
        try:
            waited = slots.acquire(timeout, on_wait=waiting)
        except DrillLockTimeout as exc:
            raise DrillLockTimeout(f"refusing {action}: {exc}; nothing was injected", key=exc.key) from None
        self._slot = slots
        if waited >= 0.5:
            log.info("%s: waited %.1f s for a drill slot (%d on this machine)", action, waited, count)

    def _release_drill_lock(self, lock: DrillLock | None) -> None:
        if lock is not None:
            lock.release()
        self._lock_note = None
        slot, self._slot = self._slot, None
        if slot is not None:
            slot.release()

    def _start_observer(self, sources: Sources, tl: Timeline) -> Observer:
        """The observers and the watcher of an outermost fault (nested ones share them)."""
        live = liveness_of(self.target)
        live_sources: list[Callable[[], list[ComponentState]]] = [live.liveness] if live is not None else []
        if self.load is not None:
            live_sources.append(self.load.liveness)
        if live is None:
            log.warning("the %s target has no liveness capability: a component that dies mid-drill is "
                        "seen only through what it breaks", self.target.name)
        self._watcher = Watcher(tl, load=self.load, liveness_observed=live is not None)
        self._casualty, self._casualty_reverted = None, []
        self._casualty_handled.clear()
        observer = Observer(sources, self._regions, tl, request_source=self.load.poll if self.load else None,
                            on_tick=self._on_tick, liveness=live_sources)
        observer.start()
        return observer

    @property
    def active(self) -> ActiveFault | None:
        """The innermost fault in effect, if any."""
        return self._stack[-1] if self._stack else None

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
        return preflight.check_capacity(self._regions, out, offered=self.offered, margin=self.margin, action=action)

    def check_timing(self, action: str | None = None) -> str:
        """Refuse a drill whose clients could not have moved within the switchover limit
        (detection + DNS TTL > ``--gameday-switchover-limit``); see :mod:`gameday.model.preflight`.

        Raises:
            DrillRefused: with the arithmetic and what to change.
        """
        # Neither is part of the Target protocol: an external target states its detection
        # timing only when its profile does (``timing``, else None: unknown).
        timing = getattr(self.target, "timing", None)
        if not isinstance(timing, Timing):
            topo = getattr(self.target, "topology", None)
            timing = topo.timing if isinstance(topo, Topology) else None
        return preflight.check_clients_can_move(timing, self.dns_ttl, self.slo.switchover_limit, action=action)

    def prediction(self, fault: Fault, action: str, *, entry_nodes_route: bool) -> Prediction:
        """The windows the federation's own timing predicts for *fault* (DESIGN.md §8).

        Asked after the target's health check (an external target reads the DNS server's TTL
        there) and before anything is injected.

        Raises:
            DrillRefused: the federation contradicts its stated timing (the TTL in its answers)
                and ``--gameday-accept-observed-ttl`` is not set; nothing was injected.
        """
        if not isinstance(self.target, StatesTiming):
            return unpredicted(fault.name, f"the {self.target.name} target states no failover timing")
        contradiction = self.target.timing_contradiction()
        if contradiction is not None and not self.settings.accept_observed_ttl:
            raise DrillRefused(f"refusing {action}: {contradiction}. Correct the stated value, or drill with "
                               "--gameday-accept-observed-ttl (ini gameday_accept_observed_ttl, env "
                               "GAMEDAY_ACCEPT_OBSERVED_TTL) to judge with the observed one; nothing was injected")
        timing = self.target.stated_timing(prefer_observed_ttl=self.settings.accept_observed_ttl)
        if self.load is not None:
            timing = replace(timing, request=self.load.timeout)
        out = predict(timing, fault.name, fault.gateway_check_fails, entry_nodes_route=entry_nodes_route)
        if contradiction is not None:
            log.warning("%s; judging with the observed TTL (--gameday-accept-observed-ttl)", contradiction)
        return out

    def _dry_run(self, kind: str, region: str | None, params: dict[str, Any], *, checks: list[str],
                 lost: tuple[str, ...], baseline: float, restore_timeout: float) -> None:
        """Print the drill's plan and skip the test: nothing is injected, nothing recorded.

        Raises:
            pytest.skip.Exception: always, with the plan as the reason.
            DrillRefused: the target cannot plan without acting (it would inject for real).
        """
        action = f"{kind} {region or ''}".strip()
        if isinstance(self.target, FaultPlanner):
            inject, revert = self.target.plan_fault(kind, region, params)
        elif getattr(self.target, "dry_run", False) is True:
            # kind/kube in dry-run print and record every API call and make none.
            self.target.inject(kind, region, dict(params))
            self.target.revert(kind, region, dict(params))
            inject = revert = "the API calls printed above as 'gameday dry-run: ...'"
        else:
            raise DrillRefused(f"refusing {action}: --gameday-dry-run, but the {self.target.name} target cannot "
                               "plan a fault without injecting it; nothing was injected")
        self.target.check_health(timeout=15)  # read-only: a dry run says whether the drill could start
        # What the drill would observe: its sources, made but never read (nothing is polled).
        sources = self.target.sources()
        # The same prediction (and the same refusal of a contradicted TTL) as the drill's.
        prediction = self.prediction(self.faults[kind], action,
                                     entry_nodes_route=_entry_nodes_route(sources)).lines() \
            if region is not None and region in lost else []
        plan = preflight.dry_run_plan(
            action=action, seed=self.settings.seed, round_index=self.round, checks=checks,
            nodes=sorted(n.name for n in sources.entry_nodes if n.region not in lost), regions=self.region_names,
            baseline=baseline, ledger=str(self.ledger.path), inject=inject, revert=revert,
            restore_timeout=restore_timeout, control_plane=sources.control_plane is not None, prediction=prediction)
        for line in plan:
            log.info("%s", line)
            print(f"gameday dry-run: {line}", file=sys.stderr)
        # Reported at the test's location, as a skip marker is, not at this line: the
        # user's test is what was skipped. (_use_item_location: pytest >= 6.2, what
        # pytest's own skip marks use.)
        raise pytest.skip.Exception("\n".join(plan), _use_item_location=True)

    def _steady_state(self, observer: Observer, tl: Timeline, baseline: float, *, nodes: tuple[str, ...],
                      lost: tuple[str, ...], outermost: bool, label: str, timeout: float = 20.0) -> None:
        """Observe at least *baseline* seconds in which every entry node in *nodes* answered
        routing to every region outside *lost*, the control plane answered, the GSLB
        answered (its latest answer, and every region outside *lost* at least once), and -
        before the outermost fault, with a load generator attached - the load was achieved
        (the steady-state hypothesis before the fault). Inside an enclosing fault the load
        is judged by the watcher's collapse bound instead: the enclosing fault may slow it.

        Raises:
            TargetUnreachable: a component died or the load generator exited (at once), or
                the rest was not seen in *timeout*; nothing was injected.
            ComponentDied, LoadCollapsed: the same inside an enclosing fault, which the
                watcher reverted.
        """
        t0 = time.monotonic()
        want = {r for r in self.region_names if r not in lost}
        assert self._watcher is not None
        while True:
            now = time.monotonic()
            if self._casualty is not None:
                if not outermost:
                    raise self._casualty_error(f"{label} was not injected")
                raise TargetUnreachable(f"steady state broken before injecting {label}: "
                                        f"{self._casualty.message}; nothing was injected")
            holds, seen = steady_state(tl.copy(), t0, nodes, want,
                                       control_plane=observer.sources.control_plane is not None)
            load_ok, _, load_seen = self._watcher.baseline_load(now) if outermost else (True, None, "")
            if now - t0 >= baseline and holds and load_ok:
                return
            if observer.error is not None or now - t0 > timeout:
                raise TargetUnreachable(
                    f"steady state not observed within {timeout:g} s before injecting {label}: {seen}"
                    + (f"; {load_seen}" if load_seen else "") + "; nothing was injected")
            self._tick_progress()
            time.sleep(0.05)

    def _revert(self, active: ActiveFault, reason: str | None) -> None:
        """Revert exactly once (from the test thread, or early from a stop condition)."""
        with active.lock:
            if active.reverted:
                return
            w = active.window
            w.t_revert_call = time.monotonic()
            try:
                self.target.revert(w.kind, w.region, w.params)
            except Exception as exc:
                raise RestoreIncomplete(
                    f"reverting {w.kind} {w.region or ''} failed; the ledger keeps it: run `gameday restore`"
                ) from exc
            w.t_revert = time.monotonic()
            if self._watcher is not None:
                self._watcher.unexpect(active.ledger_id, w.t_revert)
            active.result.timeline.mark(w.t_revert, "revert", reason or "")
            active.reverted = True
            if reason:
                w.aborted = reason
            if self._casualty is not None and reason == self._casualty.message:
                self._casualty_reverted.append(active)
            self.ledger.remove(active.ledger_id)

    def _wait_restored(self, active: ActiveFault, timeout: float, still_lost: tuple[str, ...] = ()) -> None:
        """Wait until every entry node outside *still_lost* routes to every region outside it
        again; record ``t_restored``."""
        regions = {r for r in self.region_names if r not in still_lost}
        sources = active.observer.sources
        nodes = {n.name for n in sources.entry_nodes if n.region not in still_lost}
        deadline = time.monotonic() + timeout
        w = active.window
        assert w.t_revert is not None
        while time.monotonic() < deadline:
            if self._casualty is not None:  # no steady state is coming back: say why now
                raise self._casualty_error()
            snap = active.result.timeline.copy()
            latest: dict[str, NodeObs] = {}
            for o in snap.nodes:
                if o.t > w.t_revert and o.node in nodes:
                    latest[o.node] = o
            routes_back = set(latest) == nodes and all(o.ok and (o.routable is None or set(o.routable) == regions)
                                                       for o in latest.values())
            back_at = [o.t for o in latest.values()]
            if not any(o.routable is not None for o in latest.values()):
                # No entry node says where it routes: the GSLB answering every region again
                # is what "back" can mean (its answers are weighted samples: the union).
                after = [d for d in snap.dns if d.ok and d.t > w.t_revert]
                routes_back = routes_back and regions <= {r for d in after for r in d.regions}
                back_at += [d.t for d in after[-1:]]
            # The control plane must answer again too, with a version that has held for 0.5 s:
            # a restarted control plane's version is part of what the version check judges.
            cp = [c for c in snap.cp if c.source == "poll" and c.t > w.t_revert and c.version is not None]
            cp_settled = sources.control_plane is None or (
                bool(cp) and all(c.version == cp[-1].version for c in cp if c.t >= cp[-1].t - 0.5)
                and cp[-1].t - cp[0].t >= 0.5)
            if routes_back and cp_settled:
                w.t_restored = max(back_at)
                active.result.timeline.mark(w.t_restored, "restored")
                return
            self._tick_progress()
            time.sleep(0.1)
        raise FaultError(
            f"after reverting {w.kind} {w.region or ''} the federation did not return to steady state "
            f"within {timeout:g} s (every entry node routing to {sorted(regions)})")

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
            self.slo.switchover_limit + self.dns_ttl + self.slo.recovery_window + 5)
        deadline = fault.window.t_fault + timeout
        # The observation ends at the first tick at which every figure is decided. Client
        # recovery cannot be before a whole recovery window has passed after the fault:
        # until then the full check runs every 0.5 s (it sums every request), from then on
        # at every tick, so the block does not outlast its last window by up to 0.5 s.
        # A window is decided only once every request sent in it is recorded (the load's
        # watermark has passed its end): one that looks clean while its failed requests are
        # still timing out would end the block on a figure the final records contradict.
        decidable = fault.window.t_fault + (self.slo.recovery_window if self.load is not None else 0.0)
        last_full = 0.0
        while time.monotonic() < deadline:
            self._check(fault)
            now = time.monotonic()
            if res.switchover().value is not None and (now >= decidable or now - last_full > 0.5):
                last_full = now
                done = res.dns_convergence().value is not None
                if done and self.load is not None:
                    covered = self._requests_complete_until(now)
                    done = covered >= decidable and res.client_recovery(until=covered).value is not None
                if done:
                    break
            self._tick_progress()
            time.sleep(0.1)
        self._check(fault)
        return res

    def _requests_complete_until(self, now: float) -> float:
        """The send time before which every load request is on the timeline: the load's
        watermark as of the observer's last tick; for a locustfile that writes none, *now*
        less a request's whole life (a DNS and an HTTP timeout) and a poll."""
        mark = self._load_complete_until
        if mark is None:
            timeout = self.load.timeout if self.load is not None else 0.0
            return now - 2 * timeout - 0.5
        return min(now, mark)

    def observe(self, fault: ActiveFault, seconds: float) -> DrillResult:
        """Watch the fault for *seconds* (for faults that remove no region)."""
        end = fault.window.t_fault + seconds
        while time.monotonic() < end:
            self._check(fault)
            self._tick_progress()
            time.sleep(0.1)
        self._check(fault)
        return fault.result

    def _check(self, fault: ActiveFault) -> None:
        if self._casualty is not None:
            self.progress(self._progress_line(fault, time.monotonic(), 0.0))  # now, not at the next 0.5 s
            raise self._casualty_error()
        if fault.window.aborted:
            raise DrillAborted(f"stop condition: {fault.window.aborted}")
        if fault.observer.error is not None:
            raise FaultError(f"observer failed: {fault.observer.error!r}") from fault.observer.error

    # -- per tick (observer thread): stop conditions and the progress line ------------------------
    _phase = "idle"

    _load_complete_until: float | None = None

    def _on_tick(self, now: float) -> None:
        """Observer thread, every tick: evaluate the stop condition and the watcher."""
        if self.load is not None:  # read after this tick put the load's new records on the timeline
            self._load_complete_until = self.load.complete_until()
        active = self.active
        ratio, n = self._recent_error_ratio(active, now)
        if active is not None and not active.reverted:
            self._stop_condition(active, now, ratio, n)
        self._watch(now)

    def _watch(self, now: float) -> None:
        """A casualty fails the drill at once: mark it, then revert every fault in effect,
        innermost first (the stop condition's path); the test thread raises it."""
        watcher = self._watcher
        if watcher is None or self._casualty is not None:
            return
        c = watcher.check(now, baseline_start=self._baseline_start)
        if c is None:
            return
        log.error("%s", c.message)
        self._casualty = c
        try:
            active = self.active
            tl = active.result.timeline if active is not None else watcher.tl
            tl.mark(c.t, "component_died" if c.what == "component" else "load_collapsed", c.message)
            for f in reversed(list(self._stack)):
                try:
                    self._revert(f, c.message)
                except RestoreIncomplete:
                    log.exception("could not revert %s after %s", f.window.kind, c.name)
        finally:
            self._casualty_handled.set()

    def _casualty_error(self, extra: str = "") -> DrillAborted:
        """The error the test thread raises for the casualty, once the watcher's reverts are done."""
        c = self._casualty
        assert c is not None
        self._casualty_handled.wait(120)  # a revert waits for its component to listen (15 s each, at most)
        done = [(f"{f.window.kind} {f.window.region or ''}".rstrip(), (f.window.t_revert or 0) - f.window.t_fault)
                for f in self._casualty_reverted if f.window.t_revert is not None]
        failed = [f"{f.window.kind} {f.window.region or ''}".rstrip() for f in self._stack if not f.reverted]
        return abort_error(c, done, failed, extra)

    def _sleep_watching(self, seconds: float) -> None:
        """Sleep *seconds*, but raise a casualty as soon as the watcher sees one."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self._casualty is not None:
                raise self._casualty_error()
            time.sleep(min(0.1, left))

    def _watch_until(self, done: Callable[[], bool], timeout: float) -> None:
        """Until *done()* (at most *timeout* s), but raise a casualty as soon as the watcher sees one."""
        end = time.monotonic() + timeout
        while not done() and time.monotonic() < end:
            if self._casualty is not None:
                raise self._casualty_error()
            time.sleep(0.1)

    def _tick_progress(self) -> None:
        """Main thread (the progress writer may suspend output capture): the live line."""
        now = time.monotonic()
        if now - self._last_progress < 0.5:
            return
        self._last_progress = now
        active = self.active
        ratio, _ = self._recent_error_ratio(active, now)
        self.progress(self._progress_line(active, now, ratio))

    def _recent_error_ratio(self, active: ActiveFault | None, now: float) -> tuple[float, int]:
        return ticks.recent_error_ratio(active.result.timeline.requests, now) if active is not None else (0.0, 0)

    def _stop_condition(self, active: ActiveFault, now: float, ratio: float, n: int) -> None:
        reason = self._stop.check(now, ratio, n)
        if reason is None:
            return
        active.result.timeline.mark(now, "stop_condition", reason)
        for f in reversed(list(self._stack)):  # innermost first: the exact inverse order
            try:
                self._revert(f, reason)
            except RestoreIncomplete:
                log.exception("stop condition could not revert %s", f.window.kind)

    def _progress_line(self, active: ActiveFault | None, now: float, ratio: float) -> str:
        watched = self._watcher.summary(now) if self._watcher is not None and self._phase != "done" else ""
        return ticks.progress_line(
            phase=self._phase, now=now, ratio=ratio, watched=watched,
            casualty=self._casualty.message if self._casualty is not None else None,
            window=active.window if active is not None else None,
            timeline=active.result.timeline if active is not None else None,
            survivors=active.result.survivors if active is not None else ())


def _entry_nodes_route(sources: Sources) -> bool:
    """Whether the prediction may count on the entry nodes' routes (any entry-node source that
    does not say it reads none): the drill and its dry run judge alike."""
    return any(getattr(n, "routable", "") is not None for n in sources.entry_nodes)
