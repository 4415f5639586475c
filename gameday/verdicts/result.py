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

from dataclasses import dataclass, replace
from typing import Any

from gameday.verdicts import harness
from gameday.verdicts.capacity import dynamic_headroom, static_headroom
from gameday.verdicts.judged import Verdict, VerdictHook
from gameday.verdicts.measure import (
    Check,
    Figure,
    read_latency,
    version_check,
)
from gameday.verdicts.predict import FIGURES
from gameday.verdicts.registry import NA, VERDICTS
from gameday.verdicts.state import state_summary
from gameday.verdicts.stats import FALSE_FAILURE
from gameday.verdicts.vs_prediction import PredictionVerdicts

__all__ = ["DrillResult", "Verdict", "VerdictHook"]


@dataclass
class DrillResult(PredictionVerdicts):
    """What one drill observed and the game day's assertions about it.

    Read by concern, each in its own module: the fields and the figures measured from the
    timeline (:class:`gameday.verdicts.figures.DrillFigures`), how each verdict is recorded
    (:class:`gameday.verdicts.judged.Judged`), the verdicts against the prediction
    (:class:`gameday.verdicts.vs_prediction.PredictionVerdicts`), and here the built-in
    ``assert_*`` and the summary every report reads.
    """

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
                m.exact = "went back" in c.detail  # seen lower after higher: no poll rate explains it
                raise AssertionError(f"version check failed: {c.detail}")
        return c

    def assert_versions_monotonic(self) -> Check:
        """Versions never go back (for faults that change no routing, e.g. the control plane down)."""
        if (reason := self._na("versions")) is not None:
            return Check("versions", False, NA + reason, applicable=False)
        with self._verdict("versions") as m:
            tl = self.timeline.copy()
            end = self._versions_until
            c = version_check(tl, self.fault.t_fault, self._restore_from, end, require_increments=False,
                              t_call=self.fault.t_call)
            m.figure, m.limit = c.detail[:120], "never back"
            if not c.passed:
                m.exact = True  # a version seen lower after higher: no poll rate explains it
                raise AssertionError(f"version check failed: {c.detail}")
        return c

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
                m.exact = failed == [static]  # N-1 arithmetic over declared capacities: nothing sampled
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
        with self._verdict(name, exact=kind.exact) as m:
            r = kind.check(self, **limits)
            m.figure, m.resolution, m.limit, m.detail = r.figure, r.resolution, r.limit, r.detail
            if not r.passed:
                raise AssertionError(r.message or f"verdict {name}: {r.figure}, limit {r.limit}")
        return self.verdicts[-1]

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
        end = self._versions_until
        # Latency during the fault (the checklist's figure): the requests sent until the revert.
        out["read_latency"] = read_latency(self.timeline.copy().requests, self.fault.t_fault, self._until)
        na = self.not_applicable()
        if "versions" in na:
            out["versions"] = {"passed": None, "detail": NA + na["versions"]}
        else:
            v = version_check(self.timeline.copy(), self.fault.t_fault, self._restore_from, end,
                              require_increments=self.removes_region and self.switchover_observed,
                              t_call=self.fault.t_call)
            out["versions"] = {"passed": v.passed, "detail": v.detail}
        out["stale_alarms"] = [] if "stale_alarms" in na else self.stale_alarm_events()
        out["not_applicable"] = na
        # A nested fault's block ends before the outermost's read-back: its state figures are
        # the outermost drill's (its verdicts, asserted after the outermost block, judge them).
        if self.state_source and not (self.nested and self.timeline.data_check is None):
            out["state"] = state_summary(self.timeline.copy(), self.fault)
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
