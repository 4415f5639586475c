"""The run history (reports/history.jsonl) and the regression flag."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest

from gameday.reports.history import HistoryRow, append_history, check_regression, load_history, regression

TEST = "suites/gameday/test_gateway_outage.py::test_random_gateway_outage"


def row(run: str, switchover: float | None, *, test: str = TEST, fault: str = "gateway_down", seed: int = 1,
        region: str = "b", passed: bool = True, aborted: str | None = None) -> HistoryRow:
    return HistoryRow(time="2026-12-01T12:00:00Z", run=run, commit=None, target="local",
                      topology="clusters/local.yaml", seed=seed, test=test, fault=fault, region=region, round=0,
                      switchover_s=switchover, dns_converge_s=1.0, client_recovery_s=2.5, passed=passed,
                      aborted=aborted)


def test_rows_round_trip_one_json_object_per_line(tmp_path: Path) -> None:
    path = tmp_path / "reports" / "history.jsonl"
    first, second = [row("r1", 1.0), row("r1", None, fault="region_blackhole")], [row("r2", 1.2, seed=9)]
    append_history(path, first)
    append_history(path, second)
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert set(json.loads(lines[0])) == {"time", "run", "commit", "target", "topology", "seed", "test", "fault",
                                         "region", "round", "switchover_s", "dns_converge_s", "client_recovery_s",
                                         "passed", "aborted", "predicted_s", "vs_prediction"}
    assert load_history(path) == first + second


def test_rows_carry_the_prediction_and_older_rows_without_it_still_load(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    predicted = dataclasses.replace(row("r1", 1.0), predicted_s={"switchover": [0.4, 0.7]},
                                    vs_prediction={"switchover": "fail"})
    append_history(path, [predicted])
    old = row("r0", 1.0).as_dict()
    del old["predicted_s"], old["vs_prediction"]  # written before predictions existed
    with path.open("a") as f:
        f.write(json.dumps(old) + "\n")
    assert load_history(path) == [predicted, row("r0", 1.0)]
    with path.open("a") as f:
        f.write(json.dumps({**old, "predicted_s": {"switchover": "soon"}}) + "\n")
    assert len(load_history(path)) == 2  # the malformed row is skipped (with a warning naming it)


def test_a_missing_history_is_empty(tmp_path: Path) -> None:
    assert load_history(tmp_path / "nothing.jsonl") == []


def test_corrupt_lines_are_skipped_with_a_warning_naming_the_line(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "history.jsonl"
    good = json.dumps(row("r1", 1.0).as_dict())
    bad_type = json.dumps({**row("r2", 1.0).as_dict(), "seed": "three"})
    missing = json.dumps({k: v for k, v in row("r3", 1.0).as_dict().items() if k != "passed"})
    path.write_text("\n".join([good, '{"time": "2026-12-01T12:0', bad_type, "[1, 2]", missing, "", good]) + "\n")
    with caplog.at_level(logging.WARNING, logger="gameday.reports.history"):
        rows = load_history(path)
    assert [r.run for r in rows] == ["r1", "r1"]
    text = caplog.text
    assert f"{path} line 2 skipped" in text
    assert "line 3 skipped: field 'seed' must be int (got 'three')" in text
    assert "line 4 skipped: expected a JSON object, got list" in text
    assert "line 5 skipped: field 'passed' is missing" in text


def test_exactly_fifty_percent_above_the_median_is_not_a_regression() -> None:
    prev = [row("r1", 2.0), row("r2", 1.0), row("r3", 3.0)]  # median 2.0
    assert regression(prev, 3.0) is None
    assert check_regression(prev, 3.0).status == "ok"
    flagged = regression(prev, 3.01)
    assert flagged is not None and flagged.startswith("REGRESSION: switchover 3.01 s is +50% against the median "
                                                      "2.00 s of 3 previous runs")
    assert check_regression(prev, 3.01).flag == "REGRESSION +50%"


def test_fewer_than_three_previous_runs_give_no_verdict_and_say_so() -> None:
    prev = [row("r1", 1.0), row("r2", 1.0), row("r2", 1.0)]  # two runs (r2 had two rounds)
    c = check_regression(prev, 100.0)
    assert c.status == "no verdict" and c.flag == "no history (2/3)"
    assert "2 previous run(s) with a switchover, 3 needed" in c.message
    assert regression(prev, 100.0) is None  # no verdict is never a regression, and never a pass
    assert check_regression([], 1.0).flag == "no history (0/3)"
    assert check_regression([*prev, row("r3", 1.0)], None).status == "no verdict"


def test_only_the_same_test_and_fault_count_and_rows_of_others_must_be_picked() -> None:
    prev = [row("r1", 1.0), row("r2", 1.0), row("r3", 1.0), row("r4", 0.1, fault="region_blackhole"),
            row("r5", 0.1, test="other::test"), row("r6", None)]
    assert check_regression(prev, 1.6, test=TEST, fault="gateway_down").status == "regression"
    assert check_regression(prev, 1.4, test=TEST, fault="gateway_down").status == "ok"
    with pytest.raises(ValueError, match="3 different test/fault pairs"):
        check_regression(prev, 1.0)


def test_each_previous_run_counts_once() -> None:
    # r1 ran three rounds of 1.0 s; r2 and r3 one of 9.0 s each: the median of runs is 9.0 (of rows it would be 1.0).
    prev = [row("r1", 1.0), row("r1", 1.0), row("r1", 1.0), row("r2", 9.0), row("r3", 9.0)]
    assert check_regression(prev, 10.0).median_s == 9.0


# -- aborted drills (issue 19, item 7) ----------------------------------------------------------------
def test_an_aborted_row_round_trips_and_older_lines_without_the_field_still_read(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    aborted = row("r1", 0.9, passed=False, aborted="interrupted by Ctrl-C (SIGINT)")
    append_history(path, [aborted])
    old = {k: v for k, v in row("r0", 1.0).as_dict().items() if k != "aborted"}  # a line from before the field
    with path.open("a") as f:
        f.write(json.dumps(old) + "\n" + json.dumps({**old, "run": "r2", "aborted": 3}) + "\n")
    rows = load_history(path)
    assert [(r.run, r.aborted) for r in rows] == [("r1", "interrupted by Ctrl-C (SIGINT)"), ("r0", None)]


def test_aborted_drills_are_not_in_the_median() -> None:
    # Three good runs at 1.0 s and three aborted ones at 5.0 s (half-observed, their switchover
    # measured on a federation that was being torn down): the median is of the good ones.
    good = [row(f"g{i}", 1.0) for i in range(3)]
    aborted = [row(f"x{i}", 5.0, passed=False, aborted="ComponentDied: launcher exited") for i in range(3)]
    c = check_regression(good + aborted, 1.6)
    assert c.status == "regression" and c.median_s == 1.0 and c.previous == 3
    # Negative control: the same figures without the mark move the median to 3.0 and hide the regression.
    unmarked = [row(f"x{i}", 5.0, passed=False) for i in range(3)]
    c = check_regression(good + unmarked, 1.6)
    assert c.status == "ok" and c.median_s == 3.0


def test_aborted_runs_do_not_make_up_the_three_needed() -> None:
    prev = [row("g1", 1.0), row("g2", 1.0), row("x1", 1.0, aborted="interrupted by SIGTERM")]
    c = check_regression(prev, 100.0)
    assert c.status == "no verdict" and c.flag == "no history (2/3)"


def test_an_aborted_drill_gets_no_regression_verdict_and_says_why() -> None:
    prev = [row(f"g{i}", 1.0) for i in range(3)]
    c = check_regression(prev, 9.0, aborted="interrupted by Ctrl-C (SIGINT)")
    assert c.status == "no verdict" and c.flag == "aborted"
    assert c.message == "no regression verdict: the drill was aborted (interrupted by Ctrl-C (SIGINT))"
    assert check_regression(prev, 9.0).status == "regression"  # the same figure, not aborted
