"""A drill's result: its figures, and the assertions a game day makes about them.

Every ``assert_*`` raises a plain ``AssertionError`` whose message says what was
expected, what was seen, where and when; it never raises for a healthy federation and
it can fail (each has a negative control in the test suite).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from gameday.timeline import FaultWindow, Timeline
from gameday.verdicts.capacity import dynamic_headroom, stale_alarms, static_headroom
from gameday.verdicts.measure import Check, Figure, client_recovery, dns_convergence, switchover, version_check
from gameday.settings import SLO


@dataclass
class DrillResult:
    """What one drill observed. Figures are computed from the timeline when asked.

    Attributes:
        fault: the fault's window (``t_revert`` is filled in when it is reverted).
        timeline: the live timeline (observers keep appending until the drill ends).
        slo: the objectives to judge by.
        survivors: entry nodes outside the failed region(s).
        capacity: region -> declared capacity, req/s.
        offered: offered load, req/s.
        margin: N-1 headroom margin.
        lost: regions out of service because of this drill.
    """

    fault: FaultWindow
    timeline: Timeline
    slo: SLO
    survivors: tuple[str, ...]
    capacity: Mapping[str, float]
    offered: float
    margin: float
    lost: tuple[str, ...] = ()
    started: float = field(default_factory=time.monotonic)
    round: int = 0
    seed: int = 0

    # -- figures -----------------------------------------------------------------------
    @property
    def _until(self) -> float:
        return self.fault.t_revert if self.fault.t_revert is not None else time.monotonic()

    def _region(self) -> str:
        if self.fault.region is None:
            raise AssertionError(f"fault {self.fault.kind} has no failed region to measure against")
        return self.fault.region

    def switchover(self) -> Figure:
        tl = self.timeline.copy()
        return switchover(tl.nodes, tl.cp, self._region(), self.survivors, self.fault.t_fault, self._until)

    def dns_convergence(self) -> Figure:
        return dns_convergence(self.timeline.copy(), self._region(), self.fault.t_fault, self._until)

    def client_recovery(self) -> Figure:
        tl = self.timeline.copy()
        return client_recovery(tl.requests, self.fault.t_fault, self._until,
                               self.slo.recovery_window, self.slo.error_ratio)

    def versions(self) -> Check:
        tl = self.timeline.copy()
        end = self.fault.t_restored or time.monotonic()
        return version_check(tl, self.fault.t_fault, self.fault.t_revert, end)

    def figures(self) -> dict[str, Figure]:
        """Switchover, DNS convergence and client recovery (when a region failed)."""
        if self.fault.region is None:
            return {}
        return {f.name: f for f in (self.switchover(), self.dns_convergence(), self.client_recovery())}

    def stale_alarm_events(self) -> list[str]:
        tl = self.timeline.copy()
        end = self.fault.t_restored or time.monotonic()
        return [f"{a.node} at t{a.t - self.fault.t_fault:+.1f} s: {a.detail}"
                for a in stale_alarms(tl.alarms, self.started, end)]

    # -- assertions ----------------------------------------------------------------------
    def assert_switchover_under(self, limit: float | None = None) -> Figure:
        """Switchover time below *limit* seconds (default: the SLO, 180 s)."""
        limit = self.slo.switchover_limit if limit is None else limit
        f = self.switchover()
        if f.value is None:
            raise AssertionError(
                f"switchover after {self.fault.kind} of region {self.fault.region} not reached within "
                f"{self._until - self.fault.t_fault:.1f} s (limit {limit:g} s): {f.detail}")
        if f.value > limit:
            raise AssertionError(
                f"switchover took {f.value:.2f} s ± {f.resolution:.2f} s, limit {limit:g} s: {f.detail}")
        return f

    def assert_dns_converged(self, limit: float | None = None) -> Figure:
        limit = self.slo.switchover_limit if limit is None else limit
        f = self.dns_convergence()
        if f.value is None or f.value > limit:
            raise AssertionError(f"DNS did not converge within {limit:g} s: {f}; {f.detail}")
        return f

    def assert_client_recovered(self, limit: float | None = None) -> Figure:
        limit = self.slo.switchover_limit if limit is None else limit
        f = self.client_recovery()
        if f.value is None or f.value > limit:
            raise AssertionError(f"clients did not recover within {limit:g} s: {f.detail}")
        return f

    def assert_versions_incremented(self) -> Check:
        c = self.versions()
        if not c.passed:
            raise AssertionError(f"version check failed: {c.detail}")
        return c

    def assert_headroom(self) -> list[Check]:
        """Static N-1 before the fault and dynamic headroom during it."""
        static = static_headroom(self.capacity, self.offered, self.margin)
        tl = self.timeline.copy()
        survivors = tuple(r for r in self.capacity if r not in self.lost)
        dyn = dynamic_headroom(tl.util, tl.requests, survivors, self.fault.t_fault, self._until,
                               self.slo.utilisation_limit, self.slo.error_ratio)
        failed = [c for c in (static, dyn) if not c.passed]
        if failed:
            raise AssertionError("headroom: " + "; ".join(f"{c.name}: {c.detail}" for c in failed))
        return [static, dyn]

    def assert_no_stale_snapshot_alarms(self) -> None:
        events = self.stale_alarm_events()
        if events:
            raise AssertionError(f"{len(events)} stale-snapshot alarm(s) during the drill, expected 0: "
                                 + "; ".join(events[:5]))

    def assert_stale_snapshot_alarm_fired(self) -> list[str]:
        """The opposite check, for drills where staleness is real (control plane down)."""
        events = self.stale_alarm_events()
        if not events:
            raise AssertionError(
                f"expected a stale-snapshot alarm during {self.fault.kind} "
                f"({self._until - self.fault.t_fault:.1f} s), none was raised")
        return events

    def summary(self) -> dict[str, object]:
        """Everything a report needs, as plain data."""
        out: dict[str, object] = {
            "fault": self.fault.kind, "region": self.fault.region, "round": self.round, "seed": self.seed,
            "injection_uncertainty_s": round(self.fault.injection_uncertainty, 4),
            "aborted": self.fault.aborted,
        }
        for name, f in self.figures().items():
            out[name] = f.as_dict()
        v = self.versions()
        out["versions"] = {"passed": v.passed, "detail": v.detail}
        out["stale_alarms"] = self.stale_alarm_events()
        return out
