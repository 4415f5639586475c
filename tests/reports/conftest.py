"""Hand-made drill results for the report tests: a gateway_down of region b at t=10 s."""

from __future__ import annotations

import pytest

from gameday.model.timeline import AlarmObs, CpObs, DnsObs, FaultWindow, NodeObs, RequestRec, Timeline, UtilObs
from gameday.runtime.settings import SLO
from gameday.verdicts.result import DrillResult

NODES = ("gateway-a", "gateway-b", "gateway-c", "proxy-a", "proxy-b", "proxy-c")


def handmade(*, switch_at: float = 11.0, converge_at: float = 11.5) -> DrillResult:
    """60 req/s split 50/30/20 over a, b, c until the fault (t=10 s); b's requests fail
    until clients move (t=12 s), then a and c carry everything; reverted at t=20 s."""
    tl = Timeline(t0=0.0)
    for i in range(250):  # 0..25 s at 10 Hz
        t = round(i * 0.1, 3)
        out = 10.0 <= t < 20.5
        for n in NODES:
            down = n == "gateway-b" and 10.0 <= t < 20.0
            moved = out and t >= switch_at and n.split("-")[1] != "b"
            version = 1 if t < switch_at else (2 if t < 20.5 else 3)
            tl.add(NodeObs(t, n, not down, None if down else version,
                           None if down else (("a", "c") if moved else ("a", "b", "c")), False, sent=t - 0.01))
        answers = ("a", "c", "a", "c") if out and t >= converge_at else ("a", "b", "a", "c")
        tl.add(DnsObs(t, True, tuple(sorted(set(answers))), 5, answers))
        tl.add(CpObs(t, version if t < 20.5 else 3))
        for r, u in (("a", 0.5), ("b", 0.3 if not out else 0.0), ("c", 0.2 if not out else 0.45)):
            tl.add(UtilObs(t, r, u))
        for k in range(6):  # 60 req/s
            ts = round(t + k / 60, 4)
            region = ("a", "a", "a", "b", "b", "c")[k]
            if out and region == "b":
                region = None if ts < 12.0 else ("a" if k == 3 else "c")
            tl.add(RequestRec(ts, 200 if region else 0, 0.02, region, None if region else "refused"))
    tl.add(AlarmObs(15.0, "proxy-c", "stale_snapshot", "lagging broadcast"))
    for t, label in ((8.0, "baseline"), (9.9, "inject_call"), (10.0, "fault"), (20.0, "revert"),
                     (21.0, "restored")):
        tl.mark(t, label)
    window = FaultWindow("gateway_down", "b", 9.9, 10.0, 20.0, 21.0, t_revert_call=19.8)
    survivors = tuple(n for n in NODES if not n.endswith("-b"))
    return DrillResult(fault=window, timeline=tl, slo=SLO(recovery_window=2.0), survivors=survivors,
                       capacity={"a": 100.0, "b": 100.0, "c": 100.0}, offered=60, margin=0.2, lost=("b",),
                       started=0.0, switchover_observed=True, weights={"a": 50, "b": 30, "c": 20}, seed=7)


@pytest.fixture
def drill_result() -> DrillResult:
    return handmade()
