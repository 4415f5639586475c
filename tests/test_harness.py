"""A starved harness is not a failed federation (gameday.verdicts.harness, DrillResult): on
hand-made rates and timelines, which verdicts come out inconclusive, and which still pass or fail."""

from __future__ import annotations

import json

import pytest

from gameday.errors import HarnessStarved
from gameday.model.timeline import PollRate, UtilObs
from gameday.observers.observer import _Counter
from gameday.reports import table
from gameday.reports.allure_attach import categorise
from gameday.verdicts import harness
from gameday.verdicts.result import DrillResult
from tests.test_predict import _result


def _rate(source: str, hz: float, gap: float, *, nominal: float = 10.0, window: float = 10.0,
          failed: int = 0) -> PollRate:
    polls = round(hz * window)
    return PollRate(source, source, nominal, hz, polls, polls - failed, 0, gap)


HEALTHY = {"observer": _rate("observer", 9.9, 0.12), "dns": _rate("dns", 9.9, 0.2),
           "gateway-a": _rate("gateway-a", 9.8, 0.3)}
# The CI failure of issue 22: "dns was read 4.9 times/s of 10 asked (longest gap 1.07 s)".
STARVED = {**HEALTHY, "dns": _rate("dns", 4.9, 1.07)}


def test_half_the_asked_rate_or_a_long_gap_is_starvation_and_a_failing_source_is_not() -> None:
    assert not harness.assess(HEALTHY)
    s = harness.assess(STARVED)
    assert [r.source for r in s.starved] == ["dns"]
    assert s.window_s == pytest.approx(10.0, abs=0.2)
    assert "dns was read 4.9 times/s of 10 asked (longest gap 1.07 s, limit 1.00 s)" in s.describe()
    assert harness.is_starved(_rate("gateway-a", 9.5, 1.3))  # the rate is fine, one gap is not
    assert not harness.is_starved(_rate("gateway-a", 5.1, 0.9))  # just over half, gaps under a second
    # A source whose reads failed (a stopped or blackholed gateway hangs to its timeout) is the
    # fault's doing, not the harness's.
    assert not harness.is_starved(_rate("gateway-b", 2.0, 0.5, failed=3))
    # The observer's own loop is always judged.
    loop = _rate("observer", 3.0, 0.9)
    assert harness.is_starved(loop)
    assert harness.describe(loop).startswith("the observer's loop ran 3.0 times/s of 10 asked")
    # A 2 Hz source may go five of its own intervals unread.
    assert not harness.is_starved(_rate("utilisation a", 2.0, 2.4, nominal=2.0))
    assert harness.is_starved(_rate("utilisation a", 2.0, 2.6, nominal=2.0))
    # The observer's loop is listed first when both starved.
    both = harness.assess({**STARVED, "observer": loop})
    assert [r.source for r in both.starved] == ["observer", "dns"]


def test_the_rate_over_a_window_counts_its_edges_as_gaps() -> None:
    c = _Counter("x", 10.0)
    for i in range(100):  # 0.0 .. 9.9 s every 0.1 s, but nothing between 3.0 and 4.5
        t = i * 0.1
        if not 3.0 < t < 4.5:
            c.done(t, True)
    whole = c.rate("x", 0.0, 9.9)
    assert whole.max_gap_s == pytest.approx(1.5, abs=0.01)
    assert harness.is_starved(whole)
    after = c.rate("x", 5.0, 9.9)
    assert after.polls == 50 and after.max_gap_s == pytest.approx(0.1, abs=0.01)
    assert not harness.is_starved(after)
    late = c.rate("x", 5.0, 12.0)  # nothing read after 9.9 s: a 2.1 s gap at the end
    assert late.max_gap_s == pytest.approx(2.1, abs=0.01)


def test_the_rate_is_judged_over_ten_intervals_at_least_and_the_gap_always() -> None:
    c = _Counter("x", 10.0)
    for t in (0.0, 0.26, 0.5, 0.76, 1.0, 1.26):  # every 0.25 s: 4 Hz of 10
        c.done(t, True)
    short = c.rate("x", 0.01, 0.5)  # an aborted drill's window: 2 reads in 0.49 s
    assert short.span_s == pytest.approx(0.49) and short.achieved_hz < harness.STARVED_RATE * 10
    assert not harness.is_starved(short)  # 5 intervals: one late read moves the rate by a fifth
    assert harness.is_starved(c.rate("x", 0.0, 1.26))  # 12.6 intervals at 4.8 Hz: starved
    # A 2 Hz source's rate needs 5 s; its gap limit (2.5 s) is judged in a 4 s window too.
    util = _Counter("utilisation a", 2.0)
    for t in (0.0, 0.5, 3.5):
        util.done(t, True)
    assert harness.is_starved(util.rate("utilisation a", 0.0, 4.0))
    assert not harness.is_starved(util.rate("utilisation a", 3.0, 4.0))  # 1 read in 1 s, no long gap
    # Without a window length (rates as older records hold them): the rate judged as before.
    assert harness.is_starved(_rate("x", 3.0, 0.3))


def _starved(res: DrillResult) -> DrillResult:
    res.window_rates = STARVED
    return res


def test_a_verdict_that_would_fail_on_a_starved_harness_is_inconclusive_not_failed() -> None:
    # Slow detection (the control plane learns at t+1.5 s): fails against its prediction...
    healthy = _result(switch_at=2.6, dns_at=2.6, cp_at=2.5, errors_until=3.5)
    healthy.window_rates = HEALTHY
    with pytest.raises(AssertionError, match="not as predicted"):
        healthy.assert_as_predicted()
    assert [v.outcome for v in healthy.verdicts] == ["fail", "fail", "pass"]
    # ... and the same figures observed by a starved harness say nothing about the federation.
    res = _starved(_result(switch_at=2.6, dns_at=2.6, cp_at=2.5, errors_until=3.5))
    with pytest.raises(HarnessStarved, match=r"not as predicted, inconclusive: harness starved over the 10\.0 s") as e:
        res.assert_as_predicted()
    assert not isinstance(e.value, AssertionError)
    assert "dns was read 4.9 times/s of 10 asked" in str(e.value)
    assert "judged on that observation: switchover vs prediction: switchover 1.60 s" in str(e.value)
    assert res.verdicts[0].detail.startswith("switchover_vs_prediction inconclusive: harness starved over the")
    assert [v.outcome for v in res.verdicts] == ["inconclusive", "inconclusive", "pass"]
    summary = res.summary()
    assert summary["vs_prediction"]["switchover"]["outcome"] == "inconclusive"  # type: ignore[index]
    assert summary["harness"]["starved"] is True  # type: ignore[index]
    assert summary["harness"]["sources"]["dns"]["achieved_hz"] == 4.9  # type: ignore[index]
    # A hard limit the starved drill would fail: inconclusive as well, with what it would have said.
    with pytest.raises(HarnessStarved, match=r"switchover inconclusive: .*switchover took 1\.60 s"):
        res.assert_switchover_under(1.0)
    assert res.verdicts[-1].outcome == "inconclusive"


def test_a_verdict_that_passes_on_a_starved_harness_passes_unless_its_resolution_decides_it() -> None:
    res = _starved(_result(switch_at=1.6, dns_at=1.6, cp_at=1.5, errors_until=2.5))
    assert res.assert_switchover_under().value == pytest.approx(0.6)  # 0.6 s against 180 s: a pass
    assert res.verdicts[-1].outcome == "pass"
    assert [v.outcome for v in res.assert_as_predicted()] == ["pass", "pass", "pass"]


def _gap(res: DrillResult, lo: float, hi: float) -> DrillResult:
    """Take every entry-node and DNS observation in (lo, hi) off the timeline: the harness slept."""
    tl = res.timeline
    tl.nodes[:] = [o for o in tl.nodes if not lo < o.t < hi]
    tl.dns[:] = [o for o in tl.dns if not lo < o.t < hi]
    return res


def test_a_pass_only_the_starved_resolution_allows_is_inconclusive() -> None:
    # The switch (t+0.6 s) happened while the harness slept from t+0.1 s to t+1.3 s: first seen
    # at t+1.3 s +/- 1.2 s. Within the prediction's tolerance only because of that 1.2 s.
    def slept() -> DrillResult:
        return _gap(_result(switch_at=1.6, dns_at=1.6, cp_at=1.5, errors_until=2.5), 1.05, 2.25)

    healthy = slept()
    assert healthy.vs_prediction("switchover").outcome == "pass"  # no rates: nothing says it was starved
    res = _starved(slept())
    v = res.vs_prediction("switchover")
    assert v.outcome == "inconclusive"
    assert "late against predicted 0.40-0.70 s at the 0.1 s resolution asked for" in v.detail
    with pytest.raises(HarnessStarved):
        res.assert_as_predicted()
    # A hard limit inside the widened resolution (1.3 s +/- 1.2 s against 2 s) cannot be settled;
    # 180 s can.
    with pytest.raises(HarnessStarved, match="the limit lies within the widened resolution"):
        res.assert_switchover_under(2.0)
    assert res.assert_switchover_under().value == pytest.approx(1.3, abs=0.06)


def test_reports_say_inconclusive_and_why() -> None:
    res = _starved(_result(switch_at=2.6, dns_at=2.6, cp_at=2.5, errors_until=3.5))
    with pytest.raises(HarnessStarved):
        res.assert_as_predicted()
    summary = json.loads(json.dumps({**res.summary(), "test": "t.py::test_x"}, default=str))
    row = table.drill_rows([summary])[1]
    assert row[1] == "gateway_down (INCONCLUSIVE)"
    assert "INCONCLUSIVE (harness starved)" in row
    lines = table.render_drills([summary], {"t.py::test_x": "gameday.errors.HarnessStarved: switchover ..."})
    assert any(line.startswith("INCONCLUSIVE (harness starved: neither pass nor fail) test_x:") for line in lines)
    assert any("harness starved during the fault (a failing verdict is inconclusive): dns 4.9/10 Hz, gap 1.07 s"
               in line for line in lines)
    assert categorise("broken", "gameday.errors.HarnessStarved: switchover inconclusive: ...") == \
        "Inconclusive: harness starved (neither pass nor fail)"
    assert categorise("failed", "AssertionError: switchover took 4 s") == "SLO breaches (a verdict failed)"


def test_the_federation_s_own_checks_timing_out_on_an_untouched_region_is_starvation() -> None:
    s = harness.assess(HEALTHY, {"a": 4, "b": 2, "c": 0}, untouched=("b", "c"))
    assert s and s.check_timeouts == (("b", 2),)  # a is the region the drill broke: its timeouts are the fault
    assert "health checks timed out against regions the drill did not touch (b: 2)" in s.describe()
    assert not harness.assess(HEALTHY, {"a": 4}, untouched=("b", "c"))
    # In a drill: a verdict that would fail is inconclusive, and the summary says why.
    res = _result(switch_at=2.6, dns_at=2.6, cp_at=2.5, errors_until=3.5)
    res.window_rates, res.window_check_timeouts = HEALTHY, {"b": 5, "c": 1}
    res.capacity = {"a": None, "b": None, "c": None}  # b is the drill's region: c is untouched
    with pytest.raises(HarnessStarved, match=r"did not touch \(c: 1\)"):
        res.assert_as_predicted()
    assert res.summary()["harness"]["check_timeouts"] == {"c": 1}  # type: ignore[index]
    # A region the moved load overloaded is not untouched: its checks may time out from the
    # overload, which the headroom verdict judges; the drill is not starved for it.
    res.timeline.add(UtilObs(res.fault.t_fault + 2.0, "c", 0.97, 0))
    assert not res.starvation()


def test_the_reference_gslb_counts_its_timed_out_probes() -> None:
    from pathlib import Path

    from gameday.fedapp.common import JsonLog
    from gameday.fedapp.gslb import Gslb
    from gameday.model.topology import load_topology
    from gameday.targets.local.plan import plan_federation
    from tests.fedapp.test_gslb import _Sink

    g = Gslb(plan_federation(load_topology(), Path("/nonexistent")), JsonLog("gslb", _Sink()))
    for ok, error in ((True, ""), (False, "timeout"), (False, "HTTP 503"), (False, "timeout")):
        g.record_probe("b", ok, error)
    regions = g.status()["regions"]
    assert (regions["b"]["probe_timeouts"], regions["a"]["probe_timeouts"]) == (2, 0)


def test_failures_no_sampling_rate_explains_stay_failures_on_a_starved_harness() -> None:
    # Issue 28: inconclusive only where the harness could have changed the outcome. A version seen
    # lower after higher, and N-1 arithmetic over declared capacities, are failures however starved.
    from gameday.model.timeline import CpObs, DataCheck, WriteRec
    from gameday.verdicts.state import StatedReplication

    res = _starved(_result(switch_at=1.2, dns_at=1.2, cp_at=1.1, errors_until=2.0))
    res.timeline.cp.extend([CpObs(res.fault.t_fault + 2.0, 9), CpObs(res.fault.t_fault + 2.5, 3)])
    with pytest.raises(AssertionError, match="went back") as e:
        res.assert_versions_monotonic()
    assert not isinstance(e.value, HarnessStarved) and res.verdicts[-1].outcome == "fail"

    poor = _starved(_result(switch_at=1.2, dns_at=1.2, cp_at=1.1, errors_until=2.0))
    poor.capacity, poor.offered, poor.margin = {"a": 10.0, "b": 10.0, "c": 10.0}, 30.0, 0.2  # 20 for 36 req/s
    poor.utilisation_regions = frozenset()  # the dynamic part judges overload responses only: it passes
    with pytest.raises(AssertionError, match="static_headroom") as e:
        poor.assert_headroom()
    assert not isinstance(e.value, HarnessStarved) and poor.verdicts[-1].outcome == "fail"

    lost = _starved(_result(switch_at=1.2, dns_at=1.2, cp_at=1.1, errors_until=2.0))
    lost.state_source, lost.stated_replication = True, StatedReplication("sync")
    t = lost.fault.t_fault - 1.0
    lost.timeline.writes.append(WriteRec("w1", t, t + 0.01, "ack", "a", 1))
    lost.timeline.data_check = DataCheck(t=t + 9, acked=("w1",), missing=("w1",))
    with pytest.raises(AssertionError, match="1 of 1 acknowledged writes lost") as e:
        lost.assert_verdict("data_loss")
    assert not isinstance(e.value, HarnessStarved) and lost.verdicts[-1].outcome == "fail"
