"""A drill's result: its figures, and the assertions a game day makes about them.

Every ``assert_*`` raises a plain ``AssertionError`` whose message says what was
expected, what was seen, where and when; it never raises for a healthy federation and
it can fail (each has a negative control in the test suite).

A verdict whose input the federation does not expose (no control-plane version source, no
declared capacities, no alarm source) is *not applicable*: its ``assert_*`` records
``n/a: <reason>`` in :attr:`DrillResult.verdicts` and returns without raising. It is never
a pass: the verdict table, run.json and JUnit show the reason, and a test whose every
asserted verdict was not applicable is reported skipped (:mod:`gameday.plugin.reporting`).

Which verdicts exist, what each needs and how it is shown is one table,
:data:`gameday.verdicts.registry.VERDICTS` (its docstring says how to add one); a verdict
registered there with a ``check`` is asserted by :meth:`DrillResult.assert_verdict`.

A verdict that would fail while the harness was starved over the fault's window (the observer
could not read at the rate the figure's resolution needs, :mod:`gameday.verdicts.harness`) is
*inconclusive*: recorded ``inconclusive`` with the measured rates and gaps and what it would
have said, and raised as :class:`gameday.errors.HarnessStarved`, not ``AssertionError``: the
federation is neither passed nor failed on what a busy machine did to the measurement.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from gameday.errors import HarnessStarved
from gameday.model.timeline import Casualty, FaultWindow, Timeline
from gameday.runtime.settings import SLO
from gameday.verdicts import harness
from gameday.verdicts.capacity import dynamic_headroom, stale_alarms, static_headroom
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
from gameday.verdicts.predict import FIGURES, Judgement, Prediction, Window, judge
from gameday.verdicts.registry import NA, VERDICTS
from gameday.verdicts.stats import FALSE_FAILURE

if TYPE_CHECKING:
    from gameday.model.timeline import PollRate


@dataclass(frozen=True)
class Verdict:
    """One ``assert_*`` call and how it ended."""

    name: str
    """The verdict's name in :data:`~gameday.verdicts.registry.VERDICTS` (``switchover``,
    ``versions``, ...; ``<figure>_vs_prediction`` for the predicted windows)."""
    outcome: Literal["pass", "fail", "n/a", "inconclusive"]
    """``inconclusive``: it would have failed, but the harness was starved (the detail says how,
    and what it would have said); neither a pass nor a fail of the federation."""
    detail: str = ""
    """The failure message, the reason it is not applicable, or for a pass what it was judged on
    where a part of it had no input (the headroom's utilisation without a utilisation source)."""
    figure: str = ""
    """What was measured, as shown (``2.31 s``, ``71 % peak utilisation``); empty: no figure."""
    resolution: str = ""
    """How precisely it is known (``± 0.10 s``); empty: exact or not a duration."""
    limit: str = ""
    """What it was judged against (``180 s``, ``80 %``, ``0 alarms``)."""
    false_failure: str = ""
    """For a statistical verdict, the most probability with which it fails a healthy federation
    (``0.001``, :mod:`gameday.verdicts.stats`); empty: not statistical."""

    def __str__(self) -> str:
        return f"{NA}{self.detail}" if self.outcome == "n/a" else self.outcome

    def as_dict(self) -> dict[str, str]:
        out = {"name": self.name, "outcome": self.outcome, "detail": self.detail, "figure": self.figure,
               "resolution": self.resolution, "limit": self.limit}
        if self.false_failure:
            out["false_failure"] = self.false_failure
        return out


@dataclass
class _Measured:
    """What an ``assert_*`` fills in while it judges (the figure, resolution and limit it used)."""

    figure: str = ""
    resolution: str = ""
    limit: str = ""
    detail: str = ""
    """For a pass: what it was judged on, where part of its input was missing."""
    false_failure: str = ""
    borderline: bool = False
    """A pass that its figure's resolution does not settle (the limit lies within it): with a
    starved harness, whose resolution is wider than asked for, that pass is inconclusive."""

    def duration(self, f: Figure, limit: float) -> None:
        self.figure = "not reached" if f.value is None else f"{f.value:.2f} s"
        self.resolution = "" if f.value is None else f"± {f.resolution:.2f} s"
        self.limit = f"{limit:g} s"
        self.borderline = f.value is not None and f.value <= limit < f.value + f.resolution


_JUDGED = "; judged on that observation: "
"""Between what starved the harness and what a verdict would have said, in an inconclusive one."""

VerdictHook = Callable[["Verdict", BaseException | None], None]
"""Called as each ``assert_*`` ends with its verdict and the assertion it raised (None: it
passed or was not applicable); a report renders it (an Allure step that fails with it)."""


@dataclass
class DrillResult:
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
    verdicts: list[Verdict] = field(default_factory=list)
    """Every ``assert_*`` called on this result, in order."""
    on_verdict: VerdictHook | None = None
    """Told of every verdict as its ``assert_*`` ends (the report's steps)."""

    # -- figures -----------------------------------------------------------------------
    @property
    def _until(self) -> float:
        return self.fault.t_revert if self.fault.t_revert is not None else time.monotonic()

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
        """*until*: judge only the windows that end by then (default: the revert, or now)."""
        tl = self.timeline.copy()
        return client_recovery(tl.requests, self.fault.t_fault, self._until if until is None else until,
                               window=self.slo.recovery_window, slo=self.slo.error_ratio,
                               clock_uncertainty=self.clock_uncertainty)

    @property
    def _restore_from(self) -> float | None:
        """Where "the version increases for the restore" starts counting: the revert call's
        start (a region's agent resumed first can publish before the call returns)."""
        return self.fault.t_revert_call if self.fault.t_revert_call is not None else self.fault.t_revert

    def versions(self) -> Check:
        if (reason := self.not_applicable().get("versions")) is not None:
            return Check("versions", False, NA + reason, applicable=False)
        tl = self.timeline.copy()
        end = self.fault.t_restored or time.monotonic()
        region = self.fault.region
        regional = region if (self.instance_outage and region is not None
                              and any(o.region == region for o in tl.regional_cp)) else None
        return version_check(tl, self.fault.t_fault, self._restore_from, end, regional=regional)

    def not_applicable(self) -> dict[str, str]:
        """Verdict -> why it has no input here (only the verdicts that have none; each
        verdict's ``needs`` in :data:`~gameday.verdicts.registry.VERDICTS`)."""
        return VERDICTS.not_applicable(self)

    @contextmanager
    def _verdict(self, name: str) -> Iterator[_Measured]:
        """Record how the ``assert_*`` in the block ended, with what it measured."""
        m = _Measured()
        try:
            yield m
        except AssertionError as exc:
            first = str(exc).splitlines()[0][:300] if str(exc) else ""
            if starved := self.starvation():
                inconclusive = self._inconclusive(name, first, starved)
                self._record(Verdict(name, "inconclusive", str(inconclusive), m.figure, m.resolution, m.limit,
                                     m.false_failure), inconclusive)
                raise inconclusive from exc
            self._record(Verdict(name, "fail", first, m.figure, m.resolution, m.limit, m.false_failure), exc)
            raise
        if m.borderline and (starved := self.starvation()):
            inconclusive = self._inconclusive(name, f"{m.figure} {m.resolution} against {m.limit}: the limit lies "
                                                    "within the widened resolution", starved)
            self._record(Verdict(name, "inconclusive", str(inconclusive), m.figure, m.resolution, m.limit,
                                 m.false_failure), inconclusive)
            raise inconclusive
        self._record(Verdict(name, "pass", m.detail, m.figure, m.resolution, m.limit, m.false_failure), None)

    def starvation(self) -> harness.Starvation:
        """Whether the harness kept up over the fault's window (:mod:`gameday.verdicts.harness`):
        the starved sources, empty when it did or when nothing was observed live."""
        rates, checks = self.window_rates, self.window_check_timeouts
        if not rates and self.rates_since is not None:
            rates = self.rates_since(self.fault.t_fault)
            checks = self.checks_since(self.fault.t_fault) if self.checks_since is not None else {}
        untouched = [r for r in self.capacity if r not in self.lost and r not in self.already_lost]
        return harness.assess(rates, checks, untouched)

    @staticmethod
    def _inconclusive(name: str, would: str, starved: harness.Starvation) -> HarnessStarved:
        return HarnessStarved(f"{name} inconclusive: {starved.describe()}{_JUDGED}{would}")

    def _record(self, v: Verdict, exc: BaseException | None) -> None:
        self.verdicts.append(v)
        if self.on_verdict is not None:
            self.on_verdict(v, exc)

    def _na(self, name: str) -> str | None:
        """The reason *name* is not applicable (recorded as its verdict), or None."""
        reason = self.not_applicable().get(name)
        if reason is not None:
            self._record(Verdict(name, "n/a", reason), None)
        return reason

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

    # -- assertions ----------------------------------------------------------------------
    def assert_switchover_under(self, limit: float | None = None) -> Figure:
        """Switchover time below *limit* seconds (default: the SLO, 180 s)."""
        limit = self.slo.switchover_limit if limit is None else limit
        with self._verdict("switchover") as m:
            f = self.switchover()
            m.duration(f, limit)
            how = "" if f.definition in ("", "entry-node versions") else f" (measured from {f.definition})"
            if f.value is None:
                raise AssertionError(
                    f"switchover{how} after {self.fault.kind} of region {self.fault.region} not reached within "
                    f"{self._until - self.fault.t_fault:.1f} s (limit {limit:g} s): {f.detail}")
            if f.value > limit:
                raise AssertionError(
                    f"switchover{how} took {f.value:.2f} s ± {f.resolution:.2f} s, limit {limit:g} s: {f.detail}")
        return f

    def assert_dns_converged(self, limit: float | None = None) -> Figure:
        limit = self.slo.switchover_limit if limit is None else limit
        with self._verdict("dns_convergence") as m:
            f = self.dns_convergence()
            m.duration(f, limit)
            if f.value is None or f.value > limit:
                raise AssertionError(f"DNS did not converge within {limit:g} s: {f}; {f.detail}")
        return f

    def assert_client_recovered(self, limit: float | None = None) -> Figure:
        limit = self.slo.switchover_limit if limit is None else limit
        with self._verdict("client_recovery") as m:
            f = self.client_recovery()
            m.duration(f, limit)
            m.false_failure = f"{FALSE_FAILURE:g}"  # each window's error ratio: a binomial bound
            if f.value is None or f.value > limit:
                raise AssertionError(f"clients did not recover within {limit:g} s: {f.detail}")
        return f

    def assert_versions_incremented(self) -> Check:
        if (reason := self._na("versions")) is not None:
            return Check("versions", False, NA + reason, applicable=False)
        with self._verdict("versions") as m:
            c = self.versions()
            m.figure, m.limit = c.detail[:120], "increments for the fault and the restore, never back"
            if not c.passed:
                raise AssertionError(f"version check failed: {c.detail}")
        return c

    def assert_versions_monotonic(self) -> Check:
        """Versions never go back (for faults that change no routing, e.g. the control plane down)."""
        if (reason := self._na("versions")) is not None:
            return Check("versions", False, NA + reason, applicable=False)
        with self._verdict("versions") as m:
            tl = self.timeline.copy()
            end = self.fault.t_restored or time.monotonic()
            c = version_check(tl, self.fault.t_fault, self._restore_from, end, require_increments=False)
            m.figure, m.limit = c.detail[:120], "never back"
            if not c.passed:
                raise AssertionError(f"version check failed: {c.detail}")
        return c

    def client_error_ratio(self) -> tuple[float, int]:
        """Client error ratio and request count between the fault and its revert."""
        tl = self.timeline.copy()
        reqs = [r for r in tl.requests if self.fault.t_fault <= r.t <= self._until]
        return error_ratio(reqs), len(reqs)

    def assert_error_ratio_under(self, limit: float | None = None) -> float:
        """Traffic kept flowing: the client error ratio during the fault within *limit* (SLO)."""
        limit = self.slo.error_ratio if limit is None else limit
        with self._verdict("error_ratio") as m:
            ratio, n = self.client_error_ratio()
            m.figure, m.limit = f"{ratio:.2%} of {n} requests", f"{limit:.2%}"
            if n == 0:
                raise AssertionError(f"no client requests recorded during {self.fault.kind}: is the load running?")
            if ratio > limit:
                raise AssertionError(f"client error ratio {ratio:.2%} of {n} requests during {self.fault.kind} "
                                     f"({self._until - self.fault.t_fault:.1f} s), limit {limit:.2%}")
        return ratio

    def assert_no_route_changes(self) -> None:
        """No oscillation: during the fault no entry node's routes changed, the control-plane
        version stayed put, and the GSLB kept answering with every region it answered before.
        (Entry nodes that report no routes and a missing control-plane source are not judged;
        the GSLB always is.)"""
        with self._verdict("route_changes") as m:
            m.limit = "no entry-node route, control-plane version or GSLB answer change"
            tl = self.timeline.copy()
            t0, t1 = self.fault.t_fault, self._until
            problems = []
            before: dict[str, tuple[str, ...]] = {}
            for o in sorted(tl.nodes, key=lambda o: o.t):
                if not o.ok or o.t > t1 or o.routable is None:
                    continue
                prev = before.get(o.node)
                if o.t >= t0 and prev is not None and set(prev) != set(o.routable):
                    problems.append(f"{o.node} changed routes {sorted(prev)} -> {sorted(o.routable)} "
                                    f"at t{o.t - t0:+.1f} s")
                before[o.node] = o.routable
            cp = [c.version for c in tl.cp if c.source == "poll" and c.version is not None and t0 <= c.t <= t1]
            if cp and max(cp) != min(cp):
                problems.append(f"control-plane version moved v{min(cp)} -> v{max(cp)} during the fault")
            if self.fault.region is not None:
                answered = any(self.fault.region in d.regions for d in tl.dns if t0 + 1.0 <= d.t <= t1)
                if not answered:
                    problems.append(f"the GSLB stopped answering with region {self.fault.region}")
            m.figure = f"{len(problems)} change(s)"
            if problems:
                raise AssertionError("routes oscillated: " + "; ".join(problems[:6]))

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

    def assert_gradual_readmission(self, window: float = 2.0) -> tuple[float, float, float]:
        """R10: the returning region comes back on a weight ramp: its DNS share right after the
        restore is well below its share at the end of the observation and below its weight."""
        with self._verdict("readmission") as m:
            early, late, full = self.readmission_shares(window)
            m.figure = f"DNS share {early:.0%} first {window:g} s, {late:.0%} at the end, {full:.0%} by weight"
            m.limit = "first < 60 % of the end and of the weight"
            if late <= 0:
                raise AssertionError(f"region {self.fault.region} never got DNS answers after the restore "
                                     f"(observed until t{self._until - self.fault.t_fault:+.1f} s)")
            if not early < 0.6 * late or not early < 0.6 * full:
                raise AssertionError(
                    f"region {self.fault.region} came back at once, not on a ramp: DNS share {early:.0%} in the "
                    f"first {window:g} s after the restore, {late:.0%} at the end, {full:.0%} by weight")
        return early, late, full

    def assert_headroom(self) -> list[Check]:
        """Static N-1 before the fault and dynamic headroom during it (n/a without capacities)."""
        if (reason := self._na("headroom")) is not None:
            return [Check("headroom", False, NA + reason, applicable=False)]
        with self._verdict("headroom") as m:
            peak = self.peak_utilisation()
            m.figure = f"{peak[1]:.0%} peak utilisation ({peak[0]})" if peak else "no utilisation observed"
            m.limit = f"{self.slo.utilisation_limit:.0%}"
            m.false_failure = f"{FALSE_FAILURE:g}"  # a sign test and a binomial bound (gameday.verdicts.stats)
            capacity = {r: float(c or 0.0) for r, c in self.capacity.items()}
            static = static_headroom(capacity, self.offered, self.margin)
            tl = self.timeline.copy()
            survivors = tuple(r for r in capacity if r not in self.lost)
            unobservable = () if self.utilisation_regions is None else \
                tuple(r for r in survivors if r not in self.utilisation_regions)
            # Utilisation is judged once the clients had moved (client recovery), where measured.
            recovered = self.client_recovery().value if self.removes_region and self.switchover_observed else None
            dyn = dynamic_headroom(tl.util, tl.requests, survivors, start=self.fault.t_fault, end=self._until,
                                   utilisation_limit=self.slo.utilisation_limit,
                                   overload_ratio=self.slo.error_ratio, unobservable=unobservable,
                                   steady_from=None if recovered is None else self.fault.t_fault + recovered)
            failed = [c for c in (static, dyn) if not c.passed]
            if failed:
                raise AssertionError("headroom: " + "; ".join(f"{c.name}: {c.detail}" for c in failed))
            if unobservable:  # a pass on less than it could have been: say on what
                m.detail = f"dynamic_headroom: {dyn.detail}"
                if not peak:
                    m.figure = "utilisation n/a (no utilisation source)"
        return [static, dyn]

    def assert_no_stale_snapshot_alarms(self) -> None:
        if self._na("stale_alarms") is not None:
            return
        with self._verdict("stale_alarms") as m:
            events = self.stale_alarm_events()
            m.figure, m.limit = f"{len(events)} alarm(s)", "0"
            if events:
                raise AssertionError(f"{len(events)} stale-snapshot alarm(s) during the drill, expected 0: "
                                     + "; ".join(events[:5]))

    def assert_stale_snapshot_alarm_fired(self) -> list[str]:
        """The opposite check, for drills where staleness is real (control plane down)."""
        if self._na("stale_alarms") is not None:
            return []
        with self._verdict("stale_alarms") as m:
            events = self.stale_alarm_events()
            m.figure, m.limit = f"{len(events)} alarm(s)", "at least 1"
            if not events:
                raise AssertionError(
                    f"expected a stale-snapshot alarm during {self.fault.kind} "
                    f"({self._until - self.fault.t_fault:.1f} s), none was raised")
        return events

    def assert_verdict(self, name: str, **limits: Any) -> Verdict:
        """Judge verdict *name* by its registry entry's ``check`` (a verdict a conftest or
        plugin registered, :mod:`gameday.verdicts.registry`): not applicable with the reason
        when its input is missing, else recorded with its figure and limit.

        Args:
            limits: passed to the entry's ``check`` (``limit=0.5``).

        Returns:
            The recorded verdict.

        Raises:
            AssertionError: the verdict failed (the entry's message).
            KeyError: no verdict *name* is registered (the message lists those that are).
            TypeError: verdict *name* has no ``check``: it is a built-in with its own
                ``assert_*`` methods, which the message names.
        """
        kind = VERDICTS.get(name)
        if kind is None:
            raise KeyError(f"no verdict {name!r} is registered; expected one of {', '.join(VERDICTS.names())}")
        if kind.check is None:
            raise TypeError(f"verdict {name!r} is asserted by {', '.join(kind.asserts)}, not assert_verdict")
        if self._na(name) is not None:
            return self.verdicts[-1]
        with self._verdict(name) as m:
            r = kind.check(self, **limits)
            m.figure, m.resolution, m.limit, m.detail = r.figure, r.resolution, r.limit, r.detail
            if not r.passed:
                raise AssertionError(r.message or f"verdict {name}: {r.figure}, limit {r.limit}")
        return self.verdicts[-1]

    # -- against the prediction (DESIGN.md §8) ------------------------------------------------
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

    def _late_stage(self, name: str, f: Figure, w: Window) -> str:
        """Which stage most likely took the time of a figure later than its window."""
        p = self.prediction
        assert p is not None
        assert f.value is not None
        t0, slack = self.fault.t_fault, self.slo.prediction_slack
        changed = self._health_changed()
        det, timing = p.detection, p.timing
        if name == "client_recovery":
            dns = self.dns_convergence()
            window = p.window("dns_convergence")
            if dns.value is not None and window.known and dns.value > window.latest + dns.resolution + slack:
                return f"DNS converged late (t+{dns.value:.2f} s, predicted by {window.latest:.2f} s)"
            failed = [r.t for r in self.timeline.copy().requests if r.failed and t0 <= r.t <= self._until]
            if dns.value is not None and failed and timing.dns_ttl is not None:
                held = max(failed) - t0 - dns.value
                if held > timing.dns_ttl + timing.request:
                    return (f"clients kept the old address past the TTL: requests failed until "
                            f"t+{max(failed) - t0:.2f} s, {held:.2f} s after DNS converged (t+{dns.value:.2f} s), "
                            f"TTL {timing.dns_ttl:g} s ({timing.dns_ttl_from})")
            last = f"the last client error at t+{max(failed) - t0:.2f} s" if failed else "no client error seen"
            return last + (f"; DNS converged at t+{dns.value:.2f} s" if dns.value is not None else "")
        if det is not None and changed is not None and changed[0] - t0 > det.latest + self.poll_interval + slack:
            took = changed[0] - t0
            rounds = (f", about {took / timing.probe_interval:.0f} probe rounds of {timing.probe_interval:g} s "
                      f"instead of fall = {timing.fall}") if timing.probe_interval else ""
            return (f"detection took {took:.2f} s{rounds} (the control plane published v{changed[1]} at "
                    f"t+{took:.2f} s; predicted detection {det.earliest:.2f}-{det.latest:.2f} s), or the fault "
                    "took effect late")
        if changed is None:
            return ("no control-plane version change seen: detection cannot be told from propagation"
                    if self.control_plane_source else
                    "no control-plane version source: detection cannot be told from propagation")
        took = changed[0] - t0
        if name == "dns_convergence":
            return (f"DNS kept answering region {self.fault.region} {f.value - took:.2f} s after the federation's "
                    f"health state changed (control-plane v{changed[1]} at t+{took:.2f} s; stated GSLB propagation "
                    f"<= {timing.gslb_propagation:g} s)")
        return (f"the entry nodes excluded region {self.fault.region} {f.value - took:.2f} s after the control plane's "
                f"v{changed[1]} (t+{took:.2f} s; stated propagation <= {timing.entry_propagation:g} s: "
                f"{timing.entry_propagation_from})")

    def vs_prediction(self, name: str) -> Verdict:
        """Figure *name* (switchover, dns_convergence, client_recovery) against its predicted window."""
        return self._vs_prediction(name)[0]

    def _vs_prediction(self, name: str) -> tuple[Verdict, Judgement | None]:
        verdict = f"{name}_vs_prediction"
        if self.prediction is None:
            return Verdict(verdict, "n/a", "no prediction for this drill (it takes no region out)"), None
        w = self.prediction.window(name)
        if not w.known:
            return Verdict(verdict, "n/a", str(w.unknown), limit="n/a"), None
        f = {"switchover": self.switchover, "dns_convergence": self.dns_convergence,
             "client_recovery": self.client_recovery}[name]()
        j = judge(w, f.value, f.resolution, slack=self.slo.prediction_slack,
                  injection_uncertainty=self.fault.injection_uncertainty)
        shown = name.replace("_", " ")
        fig = "not reached" if f.value is None else f"{f.value:.2f} s"
        res = "" if f.value is None else f"± {f.resolution:.2f} s"
        limit = f"predicted {w.shown()} (+ resolution + {self.slo.prediction_slack:g} s slack)"
        if j.outcome == "pass" and f.value is not None and f.resolution > self.poll_interval \
                and (starved := self.starvation()):
            # A pass only because a starved harness widened the resolution (its tolerance) says
            # nothing: judged at the resolution asked for, it would not have passed.
            strict = judge(w, f.value, self.poll_interval, slack=self.slo.prediction_slack,
                           injection_uncertainty=self.fault.injection_uncertainty)
            if strict.outcome != "pass":
                return Verdict(verdict, "inconclusive",
                               str(self._inconclusive(verdict, f"{shown} {fig} ± {f.resolution:.2f} s is "
                                                      f"{strict.outcome} against predicted {w.shown()} at the "
                                                      f"{self.poll_interval:g} s resolution asked for", starved)),
                               fig, res, limit), strict
        if j.outcome == "pass":
            return Verdict(verdict, "pass", "", fig, res, limit), j
        if j.outcome == "not reached" and self.fault.aborted:
            return Verdict(verdict, "n/a", f"{shown} not reached before the drill was aborted ({self.fault.aborted})",
                           fig, res, limit), j
        if j.outcome == "not reached":
            return Verdict(verdict, "fail", f"{shown} not reached; predicted {w.shown()} ({w.derivation})", fig,
                           res, limit), j
        if j.outcome == "late":
            assert f.value is not None
            return Verdict(verdict, "fail",
                           f"{shown} {f.value:.2f} s ± {f.resolution:.2f} s is {j.by:.2f} s later than predicted "
                           f"{w.shown()} (+ {j.tolerance_late:.2f} s resolution and slack): "
                           f"{self._late_stage(name, f, w)}", fig, res, limit), j
        return Verdict(verdict, "fail",
                       f"{shown} {fig} ± {f.resolution:.2f} s is {j.by:.2f} s faster than the stated timing allows "
                       f"(earliest {w.earliest:.2f} s: {w.derivation}): the fault did not take effect as declared, "
                       "or the timing is wrong", fig, res, limit), j

    def assert_as_predicted(self) -> list[Verdict]:
        """Switchover, DNS convergence and client recovery each inside the window the
        federation's own timing predicts (plus its resolution and ``--gameday-prediction-slack``).

        One verdict per figure (``switchover_vs_prediction``, ...): late says by how much and which
        stage most likely took the time, early says the fault or the stated timing is not what it
        claims, an unknown input makes it n/a. Raises one ``AssertionError`` naming every figure
        that failed, after recording all three.
        """
        out: list[Verdict] = []
        failed: list[str] = []
        starved = self.starvation()
        for name in FIGURES:
            v = self.vs_prediction(name)
            exc: BaseException | None = None
            if v.outcome == "inconclusive":  # a pass only at the resolution the starvation widened
                exc = HarnessStarved(v.detail)
                failed.append(v.detail.split(_JUDGED, 1)[-1])
            if v.outcome == "fail":
                exc = AssertionError(f"{name} vs prediction: {v.detail}")
                failed.append(str(exc))
                if starved:
                    exc = self._inconclusive(v.name, str(exc), starved)
                    v = replace(v, outcome="inconclusive", detail=str(exc))
            self._record(v, exc)
            out.append(v)
        if failed and starved:
            raise HarnessStarved(f"not as predicted, inconclusive: {starved.describe()}{_JUDGED}" + "; ".join(failed))
        if failed:
            raise AssertionError("not as predicted: " + "; ".join(failed))
        return out

    def summary(self) -> dict[str, object]:
        """Everything a report needs, as plain data."""
        out: dict[str, object] = {
            "fault": self.fault.kind, "region": self.fault.region, "round": self.round, "seed": self.seed,
            "injection_uncertainty_s": round(self.fault.injection_uncertainty, 4),
            "aborted": self.fault.aborted,
        }
        if self.casualty is not None:
            out["casualty"] = self.casualty.as_dict(self.fault.t_fault)
        for name, f in self.figures().items():
            out[name] = f.as_dict()
        if self.prediction is not None:
            out["prediction"] = self.prediction.as_dict()
            if self.removes_region and self.switchover_observed:
                vs: dict[str, object] = {}
                starved = bool(self.starvation())
                for n in FIGURES:
                    verdict, j = self._vs_prediction(n)
                    if starved and verdict.outcome == "fail":
                        verdict = replace(verdict, outcome="inconclusive")
                    vs[n] = {"outcome": verdict.outcome, "how": j.outcome if j is not None else "n/a",
                             "by_s": round(j.by, 3) if j is not None else None, "detail": verdict.detail,
                             "window": self.prediction.window(n).shown()}
                out["vs_prediction"] = vs
        end = self.fault.t_restored or time.monotonic()
        na = self.not_applicable()
        if "versions" in na:
            out["versions"] = {"passed": None, "detail": NA + na["versions"]}
        else:
            v = version_check(self.timeline.copy(), self.fault.t_fault, self._restore_from, end,
                              require_increments=self.removes_region and self.switchover_observed)
            out["versions"] = {"passed": v.passed, "detail": v.detail}
        out["stale_alarms"] = [] if "stale_alarms" in na else self.stale_alarm_events()
        out["not_applicable"] = na
        peak = self.peak_utilisation() if "headroom" not in na else None
        out["peak_utilisation"] = (None if peak is None else
                                   {"region": peak[0], "utilisation": round(peak[1], 4),
                                    "limit": self.slo.utilisation_limit})
        out["verdicts"] = [v.as_dict() for v in self.verdicts]
        if self.window_rates:
            out["harness"] = harness.summary(self.window_rates, self.starvation())
        if self.poll_rates:
            out["poll_rates"] = {k: r.as_dict() for k, r in self.poll_rates.items()}
            behind = sorted(k for k, r in self.poll_rates.items() if r.behind)
            if behind:
                out["sources_behind"] = behind
        out.update(self.notes)
        return out
