"""Each figure against the window the federation's own configuration predicts (DESIGN.md §8).

:class:`PredictionVerdicts` judges switchover, DNS convergence and client recovery against their
predicted windows (:mod:`gameday.verdicts.predict`), says which stage took the time of a late
one, and keeps a pass that only a starved harness's wider resolution allows from counting.
"""

from __future__ import annotations

from dataclasses import replace

from gameday.errors import HarnessStarved
from gameday.verdicts.judged import _JUDGED, Judged, Verdict
from gameday.verdicts.measure import Figure
from gameday.verdicts.predict import FIGURES, Judgement, Window, judge


class PredictionVerdicts(Judged):
    """The vs-prediction verdicts of a drill (``<figure>_vs_prediction``)."""

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
                    f"<= {timing.gslb_propagation:g} s: {timing.gslb_propagation_from}; a DNS server that applies "
                    "its health decisions later states so in timing.gslb_delay)")
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
