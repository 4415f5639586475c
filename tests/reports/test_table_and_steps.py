"""The verdict table's headroom and history columns, the failure line under it, and the
step titles and figures a drill's phases and verdicts get."""

from __future__ import annotations

from typing import Any

import pytest

from gameday.reports import steps, table
from gameday.verdicts.result import DrillResult, Verdict


def _summary(**extra: Any) -> dict[str, Any]:
    return {"test": "t.py::test_outage", "fault": "gateway_down", "region": "b", "seed": 1, "round": 0,
            "switchover": {"value_s": 1.0, "resolution_s": 0.1}, "versions": {"passed": True},
            "stale_alarms": [], "not_applicable": {}, **extra}


def _cell(summary: dict[str, Any], column: str) -> str:
    head, row = table.drill_rows([summary])
    return row[head.index(column)]


def test_headroom_shows_the_worst_surviving_utilisation_against_the_limit() -> None:
    peak = {"region": "a", "utilisation": 0.712, "limit": 0.8}
    assert _cell(_summary(peak_utilisation=peak), "headroom") == "71%/80%"
    asserted = _summary(peak_utilisation=peak, verdicts=[{"name": "headroom", "outcome": "fail"}])
    assert _cell(asserted, "headroom") == "71%/80% FAIL"
    na = _summary(not_applicable={"headroom": "no declared capacities"})
    assert _cell(na, "headroom") == "n/a: no declared capacities"
    assert _cell(_summary(), "headroom") == "-"


def test_the_history_column_and_the_lines_under_the_table() -> None:
    reg = {"status": "regression", "flag": "REGRESSION +80%", "message": "REGRESSION: switchover 1.80 s is +80% ..."}
    s = _summary(regression=reg)
    assert _cell(s, "vs history") == "REGRESSION +80%"
    assert _cell(_summary(regression={"status": "no verdict", "flag": "no history (1/3)"}), "vs history") == \
        "no history (1/3)"
    lines = table.render_drills([s], {"t.py::test_outage": "AssertionError: switchover took 4.2 s, limit 2 s",
                                      "t.py::test_other": "not a drill of this table"})
    assert lines[3:] == ["FAILED test_outage: AssertionError: switchover took 4.2 s, limit 2 s",
                         "test_outage (gateway_down): REGRESSION: switchover 1.80 s is +80% ..."]


def test_the_prediction_column_names_each_figure_outside_its_window() -> None:
    def vs(**outcomes: tuple[str, str, float | None]) -> dict[str, Any]:
        return {n: {"outcome": o, "how": h, "by_s": b, "detail": "why"} for n, (o, h, b) in outcomes.items()}

    ok = ("pass", "pass", 0.0)
    assert _cell(_summary(vs_prediction=vs(switchover=ok, dns_convergence=ok, client_recovery=ok)),
                 "vs prediction") == "ok (not asserted)"
    late = _summary(vs_prediction=vs(switchover=("fail", "late", 1.234), dns_convergence=("fail", "early", 0.2),
                                     client_recovery=("n/a", "n/a", None)))
    assert _cell(late, "vs prediction") == "FAIL sw +1.23s late, dns -0.20s early (not asserted)"
    na = ("n/a", "n/a", None)
    done = [{"name": "dns_convergence_vs_prediction", "outcome": "n/a"}]
    assert _cell(_summary(vs_prediction=vs(switchover=na, dns_convergence=na), verdicts=done),
                 "vs prediction") == "n/a: why"
    assert _cell(_summary(vs_prediction=vs(switchover=ok, dns_convergence=na), verdicts=done),
                 "vs prediction") == "ok (dns n/a)"
    assert _cell(_summary(), "vs prediction") == "-"
    asserted = [{"name": "switchover_vs_prediction", "outcome": "fail"}]
    assert _cell({**late, "verdicts": asserted}, "vs prediction") == "FAIL sw +1.23s late, dns -0.20s early"


@pytest.mark.parametrize(("v", "title"), [
    (Verdict("switchover", "pass", "", "2.31 s", "± 0.10 s", "180 s"),
     "verdict switchover: PASS 2.31 s ± 0.10 s (limit 180 s)"),
    (Verdict("headroom", "fail", "headroom: ...", "91% peak utilisation (a)", "", "80%"),
     "verdict headroom: FAIL 91% peak utilisation (a) (limit 80%)"),
    (Verdict("versions", "n/a", "no control-plane version source"),
     "verdict versions: N/A: no control-plane version source"),
])
def test_verdict_step_titles(v: Verdict, title: str) -> None:
    assert steps.verdict_title(v) == title


def test_each_assertion_reports_its_figure_and_limit_and_its_failure(drill_result: DrillResult) -> None:
    seen: list[tuple[Verdict, BaseException | None]] = []
    drill_result.on_verdict = lambda v, exc: seen.append((v, exc))
    drill_result.assert_switchover_under(5)
    with pytest.raises(AssertionError, match=r"switchover took 1\.00 s"):
        drill_result.assert_switchover_under(0.5)
    drill_result.assert_headroom()
    with pytest.raises(AssertionError, match="1 stale-snapshot alarm"):
        drill_result.assert_no_stale_snapshot_alarms()
    (ok, e1), (bad, e2), (head, e3), (alarms, e4) = seen
    assert (ok.outcome, ok.figure, ok.resolution, ok.limit, e1) == ("pass", "1.00 s", "± 0.11 s", "5 s", None)
    assert (bad.outcome, bad.limit) == ("fail", "0.5 s") and isinstance(e2, AssertionError)
    assert (head.figure, head.limit, e3) == ("50% peak utilisation (a)", "80%", None)
    assert (alarms.outcome, alarms.figure, alarms.limit) == ("fail", "1 alarm(s)", "0") and e4 is not None
    assert drill_result.summary()["peak_utilisation"] == {"region": "a", "utilisation": 0.5, "limit": 0.8}


def test_phase_facts_from_the_timeline(drill_result: DrillResult) -> None:
    base = steps.baseline_facts(drill_result.timeline, 8.0, 9.9, ["a", "b", "c"])
    assert base["served"].startswith("60.") and "a 50%, b 33%, c 17%" in base["served"]
    assert base["entry nodes routing to every region"] == "6/6" and base["control-plane version"] == "v1"
    assert base["GSLB answer share"] == "a 50%, b 25%, c 25%"
    assert steps.baseline_title(base).startswith("steady state: 1.9 s, served 60.")
    obs = steps.observe_facts(drill_result)
    assert steps.observe_title(obs) == ("observe: switchover t+1.00 s ± 0.11 s, DNS convergence t+1.50 s ± 0.10 s, "
                                        "client recovery t+2.00 s ± 0.10 s")
    assert steps.restore_title(steps.restore_facts(drill_result)) == \
        "restore: reverted t+10.00 s, steady state again t+11.00 s"
    with steps.NoSteps().phase("anything") as record:
        record.title = "renamed"


def test_a_statistical_verdict_states_its_false_failure_probability() -> None:
    v = Verdict("headroom", "pass", "", "64% peak utilisation (b)", "", "80%", "0.001")
    assert steps.verdict_title(v) == ("verdict headroom: PASS 64% peak utilisation (b) (limit 80%, false-failure "
                                "probability <= 0.001)")
    assert v.as_dict()["false_failure"] == "0.001"  # in the JUnit gameday_drill property and run.json
    plain = Verdict("switchover", "pass", "", "0.50 s", "± 0.10 s", "180 s")
    assert "false_failure" not in plain.as_dict() and "false-failure" not in steps.verdict_title(plain)
