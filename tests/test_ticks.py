"""The per-tick pieces of a drill: the stop condition and the progress line (pure)."""

from __future__ import annotations

from gameday.model.ticks import StopCondition, progress_line, recent_error_ratio
from gameday.model.timeline import DnsObs, FaultWindow, NodeObs, RequestRec, Timeline, latest_per_node


def test_the_stop_condition_fires_only_after_the_breach_lasted() -> None:
    stop = StopCondition(ratio=0.5, after=5.0)
    assert stop.check(10.0, 0.9, 20) is None  # the breach starts
    assert stop.check(14.9, 0.9, 20) is None
    assert stop.check(15.0, 0.8, 20) == "client error ratio 80% above 50% for 5.0 s (stop after 5 s)"
    assert stop.check(16.0, 0.5, 20) is None and stop.breach_since is None  # at the ratio: no breach
    assert stop.check(17.0, 0.9, 0) is None and stop.breach_since is None  # no requests: no evidence
    assert stop.check(30.0, 0.9, 20) is None  # a new breach starts over


def test_recent_error_ratio_counts_requests_completed_in_the_last_second() -> None:
    reqs = [RequestRec(8.5, 200, 0.1), RequestRec(9.5, 0, 0.2), RequestRec(9.8, 200, 0.1),
            RequestRec(9.95, 503, 0.1)]  # the last completes after now
    assert recent_error_ratio(reqs, 10.0) == (0.5, 2)
    assert recent_error_ratio([], 10.0) == (0.0, 0)


def test_the_progress_line() -> None:
    tl = Timeline()
    tl.add(DnsObs(11.0, True, ("a", "c")))
    tl.add(NodeObs(11.0, "gateway-a", True, 2, ("a", "c")))
    tl.add(NodeObs(11.0, "gateway-c", True, 1, ("a", "b", "c")))
    w = FaultWindow("gateway_down", "b", 9.9, 10.0)
    line = progress_line(phase="observe", now=12.0, ratio=0.125, watched="alive 17/18", casualty=None,
                         window=w, timeline=tl, survivors=("gateway-a", "gateway-c"))
    assert line == ("[gameday] gateway_down b  observe   t+2.0s  dns converged  entry nodes switched 1/2  "
                    "client errors 12.5%  alive 17/18")
    assert progress_line(phase="baseline", now=1.0, ratio=0, watched="", casualty=None, window=None,
                         timeline=None, survivors=()) == "[gameday] baseline"
    assert progress_line(phase="observe", now=1.0, ratio=0, watched="", casualty="proxy-c died", window=w,
                         timeline=tl, survivors=()) == "[gameday] FAILING: proxy-c died"


def test_latest_per_node_keeps_each_nodes_last_reading_in_the_window() -> None:
    obs = [NodeObs(t, n, True, int(t), ("a",)) for t in (1.0, 2.0, 3.0) for n in ("gw-a", "px-a")]
    assert {n: o.t for n, o in latest_per_node(obs).items()} == {"gw-a": 3.0, "px-a": 3.0}
    assert {n: o.t for n, o in latest_per_node(obs, since=1.5, until=2.0).items()} == {"gw-a": 2.0, "px-a": 2.0}
    assert list(latest_per_node(obs, nodes={"px-a"}, until=1.0)) == ["px-a"]
    assert latest_per_node(obs, since=3.5) == {}
