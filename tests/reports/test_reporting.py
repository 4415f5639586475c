"""A run's history rows and environment, from its drill summaries and settings."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from gameday.reports.reporting import environment, history_rows
from gameday.settings import Settings

NOW = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)


def _drill(test: str, **extra: object) -> dict[str, object]:
    return {"test": test, "fault": "gateway_down", "region": "b", "round": 1, "seed": 5,
            "switchover": {"value_s": 0.5}, "dns_convergence": {"value_s": 0.6}, "client_recovery": {"value_s": None},
            "verdicts": [{"name": "switchover", "outcome": "pass"}], **extra}


def test_one_row_per_drill_with_what_the_history_contract_says() -> None:
    drills = [_drill("s/t.py::test_a[round2]"),
              _drill("s/t.py::test_b", verdicts=[{"name": "switchover", "outcome": "fail"}]),
              _drill("s/t.py::test_c", aborted="client error ratio 90% above 50% for 5.0 s"),
              _drill("s/t.py::test_d"), _drill("s/t.py::test_e", verdicts=[{"name": "versions", "outcome": "n/a"}])]
    rows = history_rows(drills, run="20261201-120000-seed5-1-abc", commit="b9ab3f1", settings=Settings(seed=5),
                        profile=None, failed_tests={"s/t.py::test_d"}, now=NOW)
    assert [(r.test, r.passed) for r in rows] == [("s/t.py::test_a", True), ("s/t.py::test_b", False),
                                                  ("s/t.py::test_c", False), ("s/t.py::test_d", False),
                                                  ("s/t.py::test_e", True)]
    r = rows[0]
    assert (r.time, r.run, r.commit, r.target, r.topology, r.seed, r.fault, r.region, r.round) == (
        "2026-12-01T12:00:00Z", "20261201-120000-seed5-1-abc", "b9ab3f1", "local", "clusters/local.yaml", 5,
        "gateway_down", "b", 1)
    assert (r.switchover_s, r.dns_converge_s, r.client_recovery_s) == (0.5, 0.6, None)


def test_the_environment_names_versions_and_the_run() -> None:
    env = environment(Settings(seed=42, topology=Path("clusters/mine.yaml"), rounds=3), None, ["a", "b"])
    assert env["seed"] == "42" and env["rounds"] == "3" and env["regions"] == "a, b"
    assert env["topology"] == "clusters/mine.yaml" and env["target"] == "local"
    assert env["nats-server"].startswith("v2.") and env["locust"][0].isdigit() and env["python"].startswith("3.")
