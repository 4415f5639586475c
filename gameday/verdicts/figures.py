"""A drill's figures: what it observed, measured from its timeline when asked (no verdict).

:class:`DrillFigures` holds what one drill observed (the fault's window, the live timeline, the
objectives, the observer's rates) and measures the DESIGN.md §4 figures from it: switchover,
DNS convergence, client recovery, the version check, peak utilisation, stale alarms, and whether
the harness kept up (:meth:`DrillFigures.starvation`). Judging them is
:mod:`gameday.verdicts.judged` (how a verdict is recorded), :mod:`gameday.verdicts.vs_prediction`
(against the federation's own timing) and :mod:`gameday.verdicts.result` (the ``assert_*``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gameday.model.timeline import Casualty, FaultWindow, Timeline
from gameday.runtime.settings import SLO
from gameday.verdicts import harness
from gameday.verdicts.capacity import stale_alarms
from gameday.verdicts.measure import (
    Check,
    Figure,
    client_recovery,
    dns_convergence,
    error_ratio,
    switchover,
    switchover_definition,
    switchover_from_dns,
    version_check,
)
from gameday.verdicts.predict import Prediction
from gameday.verdicts.registry import NA, VERDICTS
from gameday.verdicts.state import StatedReplication, StoreEffect

if TYPE_CHECKING:
    from gameday.model.timeline import PollRate


@dataclass
class DrillFigures:
    """What one drill observed. Figures are computed from the timeline when asked.

    Attributes:
        fault: the fault's window (``t_revert`` is filled in when it is reverted).
        timeline: the live timeline (observers keep appending until the drill ends).
        slo: the objectives to judge by.
        survivors: entry nodes outside the failed region(s).
        capacity: region -> declared capacity, req/s (None or 0: not declared; headroom is n/a).
        offered: offered load, req/s.
        margin: N-1 headroom margin.
        lost: regions out of service because of this drill.
    """

    fault: FaultWindow
    timeline: Timeline
    slo: SLO
    survivors: tuple[str, ...]
    capacity: Mapping[str, float | None]
    offered: float
    margin: float
    lost: tuple[str, ...] = ()
    already_lost: tuple[str, ...] = ()
    """Regions out because of an enclosing fault (nested drills, N-2)."""
    cut_off: tuple[str, ...] = ()
    """Regions whose every process the fault froze (a blackhole): their proxies' alarms are real."""
    started: float = field(default_factory=time.monotonic)
    round: int = 0
    seed: int = 0
    weights: Mapping[str, float] = field(default_factory=dict)
    """Region -> static DNS weight (for answer shares)."""
    switchover_observed: bool = False
    """Set by ``drill.observe_switchover``: the figures were waited for, so report them."""
    notes: dict[str, object] = field(default_factory=dict)
    """Extra figures a drill records (inside the fault block) for the report."""
    casualty: Casualty | None = None
    """Why the watcher failed the drill (a component died, the load collapsed), if it did."""
    instance_outage: bool = False
    """The fault acts on the region's app instances (:attr:`gameday.faults.Fault.hits_instances`):
    where the timeline has that region's regional control-plane versions (R14), the version
    verdict judges those; otherwise, and for a region outage, the global version."""
    control_plane_source: bool = True
    """The target's sources include the control plane's version (else versions are n/a)."""
    alarm_sources: bool = True
    """The target's sources include alarms (else the alarm verdicts are n/a)."""
    silent_alarm_sources: Mapping[str, str] = field(default_factory=dict)
    """Alarm sources that never answered during the drill (description -> their last error),
    filled in when the fault's block ends: the alarm verdicts are then n/a, never a pass."""
    state_source: bool = False
    """The target's sources include a state layer's write path (else the state verdicts are n/a)."""
    nested: bool = False
    """A fault inside another's block: it shares the outermost fault's timeline, whose writes
    are read back only once the outermost is restored."""
    task_queue: bool = False
    """The drill added tasks to the federation's background workers' queue (else duplicates is n/a)."""
    reads_own_writes: bool = False
    """The drill's writer read its acknowledged writes back as their clients (else stale_reads is n/a)."""
    stated_replication: StatedReplication | None = None
    """How the federation states its store replicates (the RPO prediction's input; None: not stated)."""
    write_timeout: float | None = None
    """Seconds one write may take before it is indeterminate (the state source's; None: unknown)."""
    store_effect: StoreEffect | None = None
    """What the fault does to a store node (:attr:`gameday.faults.Fault.store_node`; None: nothing)."""
    state_primary: str | None = None
    """The region leading the data just before the fault, where the fault takes a store node and
    the target can say (:class:`~gameday.interfaces.HasStatePrimary`); else None."""
    utilisation_regions: frozenset[str] | None = None
    """Regions whose utilisation the target's sources read (None: every region). In the others
    the dynamic headroom's utilisation part is n/a (the overload ratio still counts)."""
    alarm_prefix: str = "proxy"
    """Alarms count from nodes whose name starts with this (the drill passes ``""``: its alarm
    sources already read only the nodes whose alarms count)."""
    poll_interval: float = 0.1
    """The observer's interval, seconds (the nominal resolution)."""
    clock_uncertainty: float = 0.0
    """How far request records may be off the harness's clock (remote load workers), seconds."""
    poll_rates: Mapping[str, PollRate] = field(default_factory=dict)
    """Per source, its achieved poll rate over the observer's life (filled in when the fault's
    block ends)."""
    window_rates: Mapping[str, PollRate] = field(default_factory=dict)
    """Per source (and the observer's own loop), its rate from ``t_fault`` to the end of the
    observation (filled in when the fault's block ends): what :meth:`starvation` judges."""
    window_check_timeouts: Mapping[str, int] = field(default_factory=dict)
    """Per region, the federation's own health checks that timed out from ``t_fault`` to the end
    of the observation (filled in when the fault's block ends; empty: no such source)."""
    checks_since: Callable[[float], Mapping[str, int]] | None = None
    """The observer's count of those from a time to now (see :attr:`rates_since`)."""
    rates_since: Callable[[float], Mapping[str, PollRate]] | None = None
    """The observer's rates from a time to now, for a verdict asserted inside the fault's block
    (before :attr:`window_rates` is filled in); None: not observed by a live observer."""
    prediction: Prediction | None = None
    """The windows the federation's own timing predicts for this drill (None: no prediction
    was made, e.g. a fault that takes no region out); :meth:`assert_as_predicted` judges them."""
    @property
    def _until(self) -> float:
        """The end of what the fault's figures are measured over: the revert call's start. From
        then on what is seen is the revert's doing: a foreign gateway restarted by a revert call
        that took a moment served a request sent before the call returned, and a switchover
        measured up to the return read "region a still served the last request" (a fresh-clone
        CI run on 2026-12-07)."""
        w = self.fault
        end = w.t_revert_call if w.t_revert_call is not None else w.t_revert
        return end if end is not None else time.monotonic()

    def _region(self) -> str:
        if self.fault.region is None:
            raise AssertionError(f"fault {self.fault.kind} has no failed region to measure against")
        return self.fault.region

    def switchover(self) -> Figure:
        """By the §4 definition where the entry nodes allow it; else from their routable sets,
        or from the GSLB's answers (the figure's ``definition`` says which)."""
        tl = self.timeline.copy()
        if switchover_definition(tl.nodes, self.survivors) == "dns answers":
            f = switchover_from_dns(tl, self._region(), self.fault.t_fault, self._until)
        else:
            f = switchover(tl.nodes, tl.cp, self._region(), self.survivors, t_fault=self.fault.t_fault,
                           until=self._until)
        return self._resolution_note(f)

    def dns_convergence(self) -> Figure:
        return self._resolution_note(dns_convergence(self.timeline.copy(), self._region(), self.fault.t_fault,
                                                     self._until))

    def _resolution_note(self, f: Figure) -> Figure:
        """Say so when the source that set the figure's resolution fell behind its rate: the
        resolution is the measured gap between its polls, wider than one nominal interval."""
        rate = self.poll_rates.get(f.limited_by or "")
        if f.value is None or rate is None or not (rate.behind or f.resolution > 2 * self.poll_interval):
            return f
        return replace(f, detail=f"{f.detail}; resolution {f.resolution:.2f} s, not "
                                 f"{self.poll_interval:g} s: {rate.source} was read {rate.achieved_hz:.1f} "
                                 f"times/s of {rate.nominal_hz:.0f} asked (longest gap {rate.max_gap_s:.2f} s)")

    def client_recovery(self, until: float | None = None) -> Figure:
        """*until*: judge only the windows that end by then (the drill still observing: the
        clustered-clients step waits for the end, :func:`~gameday.verdicts.measure.client_recovery`);
        default: the revert, or now, as the final figure."""
        tl = self.timeline.copy()
        return client_recovery(tl.requests, self.fault.t_fault, self._until if until is None else until,
                               window=self.slo.recovery_window, slo=self.slo.error_ratio,
                               clock_uncertainty=self.clock_uncertainty, final=until is None)

    @property
    def _restore_from(self) -> float | None:
        """Where "the version increases for the restore" starts counting: the revert call's
        start (a region's agent resumed first can publish before the call returns)."""
        return self.fault.t_revert_call if self.fault.t_revert_call is not None else self.fault.t_revert

    @property
    def _versions_until(self) -> float:
        """Where the version check stops reading: the end of the fault's observation (its test
        may keep observing after the steady state until the restore's version is recorded: a
        regional version can rise after the entry nodes route back, which is all the steady
        state waits for), else the steady state, else now."""
        w = self.fault
        return w.t_observed or w.t_restored or time.monotonic()

    def versions(self) -> Check:
        if (reason := self.not_applicable().get("versions")) is not None:
            return Check("versions", False, NA + reason, applicable=False)
        tl = self.timeline.copy()
        end = self._versions_until
        region = self.fault.region
        regional = region if (self.instance_outage and region is not None
                              and any(o.region == region for o in tl.regional_cp)) else None
        return version_check(tl, self.fault.t_fault, self._restore_from, end, regional=regional,
                             t_call=self.fault.t_call)

    def not_applicable(self) -> dict[str, str]:
        """Verdict -> why it has no input here (only the verdicts that have none; each
        verdict's ``needs`` in :data:`~gameday.verdicts.registry.VERDICTS`)."""
        return VERDICTS.not_applicable(self)

    def starvation(self) -> harness.Starvation:
        """Whether the harness kept up over the fault's window (:mod:`gameday.verdicts.harness`):
        the starved sources, empty when it did or when nothing was observed live."""
        rates, checks = self.window_rates, self.window_check_timeouts
        if not rates and self.rates_since is not None:
            rates = self.rates_since(self.fault.t_fault)
            checks = self.checks_since(self.fault.t_fault) if self.checks_since is not None else {}
        # A region the drill's moved load pushed above the utilisation limit is not untouched:
        # its own health checks may time out from that overload (the headroom verdict judges it;
        # a CI run once called an overloaded region's negative control inconclusive for it).
        overloaded = {u.region for u in self.timeline.copy().util
                      if u.utilisation > self.slo.utilisation_limit and u.t >= self.fault.t_fault}
        untouched = [r for r in self.capacity if r not in self.lost and r not in self.already_lost
                     and r not in overloaded]
        return harness.assess(rates, checks, untouched)

    def peak_utilisation(self) -> tuple[str, float] | None:
        """The surviving region with the highest utilisation during the fault, and that
        utilisation (0..1); None when no survivor's utilisation was observed."""
        tl = self.timeline.copy()
        lo, hi = self.fault.t_fault, self._until
        peaks = [(u.utilisation, u.region) for u in tl.util if u.region not in self.lost and lo <= u.t <= hi]
        if not peaks:
            return None
        util, region = max(peaks)
        return region, util

    @property
    def removes_region(self) -> bool:
        """True when this fault took its region out of service (switchover is measured)."""
        return self.fault.region is not None and self.fault.region in self.lost

    def figures(self) -> dict[str, Figure]:
        """Switchover, DNS convergence and client recovery (when a region failed)."""
        if not (self.removes_region and self.switchover_observed):
            return {}
        return {f.name: f for f in (self.switchover(), self.dns_convergence(), self.client_recovery())}

    def stale_alarm_events(self) -> list[str]:
        tl = self.timeline.copy()
        end = self.fault.t_restored or time.monotonic()
        # A proxy inside a region this drill cut off from everything is stale for real: it
        # does not count. Every other proxy must stay fresh.
        return [f"{a.node} at t{a.t - self.fault.t_fault:+.1f} s: {a.detail}"
                for a in stale_alarms(tl.alarms, self.started, end, self.alarm_prefix)
                if a.node.split("-", 1)[-1] not in self.cut_off]

    def client_error_ratio(self) -> tuple[float, int]:
        """Client error ratio and request count between the fault and its revert."""
        tl = self.timeline.copy()
        reqs = [r for r in tl.requests if self.fault.t_fault <= r.t <= self._until]
        return error_ratio(reqs), len(reqs)

    def readmission_shares(self, window: float = 2.0) -> tuple[float, float, float]:
        """DNS answer share of the returning region in the first and last *window* seconds
        after it was restored, and its share by static weight."""
        region = self._region()
        tl = self.timeline.copy()
        t_back = self.fault.t_restored or self._until
        after = [d for d in tl.dns if d.ok and d.t >= t_back]
        if not after:
            return 0.0, 0.0, 0.0
        end = after[-1].t

        def share(lo: float, hi: float) -> float:
            answers = [a for d in after if lo <= d.t <= hi for a in d.answers]
            return answers.count(region) / len(answers) if answers else 0.0

        weights = {r: c for r, c in self.weights.items() if r not in self.already_lost}
        return share(t_back, t_back + window), share(end - window, end), weights[region] / sum(weights.values())

    def _health_changed(self) -> tuple[float, int] | None:
        """When the federation's own health state changed for the fault: the first control-plane
        version above the one in force at ``t_fault`` (instant, version); None: not seen."""
        cp = sorted((c for c in self.timeline.copy().cp if c.source == "poll" and c.version), key=lambda c: c.t)
        before = max((c.version for c in cp if c.t <= self.fault.t_fault and c.version is not None), default=None)
        if before is None:
            return None
        after = next((c for c in cp if c.t > self.fault.t_fault and c.version is not None and c.version > before),
                     None)
        return (after.t, after.version) if after is not None and after.version is not None else None
