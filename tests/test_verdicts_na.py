"""Verdicts without input (DESIGN.md §7), on hand-made timelines: not applicable with the
reason, never a pass; switchover by the definition the observations allow."""

from __future__ import annotations

import pytest

from gameday.model.timeline import AlarmObs, CpObs, DnsObs, FaultWindow, NodeObs, PollRate, RequestRec, Timeline
from gameday.reports import table
from gameday.runtime.settings import SLO
from gameday.verdicts.measure import switchover_definition
from gameday.verdicts.result import DrillResult
from gameday.verdicts.state import StatedReplication

NO_EPOCH = "no acknowledgement named the primary's epoch (a quorum store has none to fence)"
NO_MOVE = ("the fault takes region b out and its clients' move is not predicted (no prediction for this drill)")
"""write_recovery_vs_prediction, where the drill made no prediction of the clients' move."""

SURVIVORS = ("gateway-a", "gateway-c")


def _result(tl: Timeline, *, survivors: tuple[str, ...] = SURVIVORS, **kw: object) -> DrillResult:
    window = FaultWindow("gateway_down", "b", 0.95, 1.0, 4.0, 4.5)
    args: dict[str, object] = {"capacity": {"a": 100.0, "b": 100.0, "c": 100.0}, **kw}
    return DrillResult(fault=window, timeline=tl, slo=SLO(), survivors=survivors, offered=30, margin=0.2,
                       lost=("b",), started=0.0, switchover_observed=True, **args)  # type: ignore[arg-type]


def _nodes(tl: Timeline, *, versions: bool, switch_at: float = 1.5) -> None:
    for i in range(41):
        t = round(i * 0.1, 3)
        for n in SURVIVORS:
            moved = t >= switch_at
            tl.add(NodeObs(t, n, True, (2 if moved else 1) if versions else None,
                           ("a", "c") if moved else ("a", "b", "c"), None, sent=t - 0.01))


def _dns(tl: Timeline, converge_at: float = 2.0) -> None:
    for i in range(41):
        t = round(i * 0.1, 3)
        regions = ("a", "c") if t >= converge_at else ("a", "b", "c")
        tl.add(DnsObs(t, True, regions, 5, regions))


def test_no_control_plane_source_makes_versions_not_applicable() -> None:
    tl = Timeline()
    _nodes(tl, versions=True)
    _dns(tl)
    res = _result(tl, control_plane_source=False)
    c = res.assert_versions_incremented()
    assert not c.applicable and not c.passed
    assert c.detail == "n/a: no control-plane version source"
    res.assert_versions_monotonic()
    assert [(v.name, v.outcome, v.detail) for v in res.verdicts] == [
        ("versions", "n/a", "no control-plane version source")] * 2
    s = res.summary()
    assert s["versions"] == {"passed": None, "detail": "n/a: no control-plane version source"}
    assert table.drill_rows([s])[1][6] == "n/a: no control-plane version source"


def test_regions_without_capacity_make_headroom_not_applicable() -> None:
    res = _result(Timeline(), capacity={"a": 100.0, "b": None, "c": 0.0}, state_source=True,
                  stated_replication=StatedReplication("sync"),
                  task_queue=True, reads_own_writes=True)
    (c,) = res.assert_headroom()
    assert not c.applicable and c.detail == "n/a: no declared capacity for region(s) b, c"
    assert res.not_applicable() == {"headroom": "no declared capacity for region(s) b, c", "fencing": NO_EPOCH,
                                    "write_recovery_vs_prediction": NO_MOVE}
    assert table.drill_rows([res.summary()])[1][8] == "n/a: no declared capacity for region(s) b, c"


def test_no_alarm_source_makes_both_alarm_verdicts_not_applicable() -> None:
    tl = Timeline(alarms=[AlarmObs(2.0, "proxy-a", "stale_snapshot")])  # no source: not even this counts
    res = _result(tl, alarm_sources=False)
    res.assert_no_stale_snapshot_alarms()
    assert res.assert_stale_snapshot_alarm_fired() == []
    assert {str(v) for v in res.verdicts} == {"n/a: no alarm source"}
    assert table.drill_rows([res.summary()])[1][7] == "n/a: no alarm source"


def test_verdicts_with_input_still_pass_and_fail() -> None:
    tl = Timeline(alarms=[AlarmObs(2.0, "proxy-a", "stale_snapshot", "lag")], cp=[CpObs(0.5, 1), CpObs(3.0, 1)])
    res = _result(tl, state_source=True, stated_replication=StatedReplication("sync"),
                  task_queue=True, reads_own_writes=True)
    with pytest.raises(AssertionError, match="1 stale-snapshot alarm"):
        res.assert_no_stale_snapshot_alarms()
    with pytest.raises(AssertionError, match="did not increase for the fault"):
        res.assert_versions_incremented()
    assert res.assert_stale_snapshot_alarm_fired()
    assert [(v.name, v.outcome) for v in res.verdicts] == [
        ("stale_alarms", "fail"), ("versions", "fail"), ("stale_alarms", "pass")]
    # a state layer whose writes name no epoch; no prediction of the clients' move for a region out
    assert res.not_applicable() == {"fencing": NO_EPOCH, "write_recovery_vs_prediction": NO_MOVE}


def test_switchover_by_entry_node_versions_is_the_section_4_definition() -> None:
    tl = Timeline()
    _nodes(tl, versions=True)
    f = _result(tl).assert_switchover_under(10)
    assert f.definition == "entry-node versions"
    assert f.value == pytest.approx(0.5)
    assert f.resolution == pytest.approx(0.11)  # from the send of the last poll still including b
    assert "versions [2]" in f.detail


def test_switchover_without_versions_is_measured_from_routable_sets() -> None:
    tl = Timeline()
    _nodes(tl, versions=False)
    assert switchover_definition(tl.nodes, SURVIVORS) == "routable sets"
    f = _result(tl).assert_switchover_under(10)
    assert (f.definition, f.value) == ("routable sets", pytest.approx(0.5))
    assert "no versions reported" in f.detail
    assert table.drill_rows([_result(tl).summary()])[1][3] == "0.50±0.11s (routable sets)"


def test_switchover_without_entry_nodes_is_measured_from_dns_answers_and_served_by() -> None:
    tl = Timeline()
    _dns(tl, converge_at=2.0)
    res = _result(tl, survivors=())
    f = res.assert_switchover_under(10)
    assert (f.definition, f.value, f.resolution) == ("dns answers", pytest.approx(1.0), pytest.approx(0.1))
    # A client still served by b after the GSLB stopped answering with it: switchover is later.
    tl.extend_requests([RequestRec(1.0 + i * 0.05, 200, 0.01, "b" if i * 0.05 < 1.6 else "a") for i in range(60)])
    f = _result(tl, survivors=()).switchover()
    assert f.definition == "dns answers"
    assert f.value == pytest.approx(1.61)  # the answer to the first request after the last one b served
    assert "last request served by region b" in f.detail
    # Entry nodes that only answer (no routes) do not define switchover either.
    bare = Timeline(nodes=[NodeObs(t / 10, "gateway-a", True) for t in range(40)])
    assert switchover_definition(bare.nodes, ("gateway-a",)) == "dns answers"


def test_a_source_that_fell_behind_says_so_in_the_figure() -> None:
    tl = Timeline()
    for i in range(9):  # gateway-c answered only every 0.5 s
        t = i * 0.5
        tl.add(NodeObs(t, "gateway-c", True, 2 if t >= 1.5 else 1, ("a", "c") if t >= 1.5 else ("a", "b", "c")))
    for i in range(41):
        t = i * 0.1
        tl.add(NodeObs(t, "gateway-a", True, 2 if t >= 1.2 else 1, ("a", "c") if t >= 1.2 else ("a", "b", "c")))
    res = _result(tl, poll_rates={
        "gateway-c": PollRate("gateway-c", "HTTP JSON", 10.0, 2.0, 9, 9, 31, 0.5),
        "gateway-a": PollRate("gateway-a", "HTTP JSON", 10.0, 10.0, 41, 41, 0, 0.1)})
    f = res.switchover()
    assert f.limited_by == "gateway-c" and f.resolution == pytest.approx(0.5)
    assert "resolution 0.50 s, not 0.1 s: gateway-c was read 2.0 times/s of 10 asked" in f.detail
    assert res.summary()["sources_behind"] == ["gateway-c"]


def test_the_verdict_table_names_the_sources_that_fell_behind() -> None:
    tl = Timeline()
    _nodes(tl, versions=True)
    res = _result(tl, poll_rates={"gateway-c": PollRate("gateway-c", "HTTP JSON", 10.0, 2.0, 9, 9, 31, 0.5),
                                  "dns": PollRate("dns", "DNS", 10.0, 9.9, 99, 99, 0, 0.12)})
    s = {**res.summary(), "test": "t.py::test_x"}
    (line,) = table.behind_lines([s])
    assert line == ("test_x (gateway_down): sources behind their poll rate, resolution widened where they set "
                    "it: gateway-c 2.0/10 Hz")
    assert table.render_drills([s])[-1] == line


def test_an_alarm_source_that_never_answered_makes_the_alarm_verdicts_not_applicable() -> None:
    # "0 alarms" from a log file that is not there is not a pass (issue 28): n/a, naming the source.
    silent = {"log file /x/proxy-a.log of proxy-a (JSON field event)": "/x/proxy-a.log does not exist (yet)",
              "log file /x/proxy-b.log of proxy-b (JSON field event)": "/x/proxy-b.log does not exist (yet)"}
    res = _result(Timeline(), silent_alarm_sources=silent)
    res.assert_no_stale_snapshot_alarms()
    assert res.assert_stale_snapshot_alarm_fired() == []
    assert {(v.name, v.outcome) for v in res.verdicts} == {("stale_alarms", "n/a")}
    assert res.not_applicable()["stale_alarms"] == (
        "alarm source log file /x/proxy-a.log of proxy-a (JSON field event) never answered (and 1 more) "
        "(last error: /x/proxy-a.log does not exist (yet))")
