"""A run's history rows and environment, from its drill summaries and settings."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from gameday.interfaces import HasSoftware
from gameday.reports.reporting import environment, history_rows
from gameday.runtime.settings import Settings
from gameday.targets.local import LocalTarget
from gameday.targets.local.natsserver import nats_server_version

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
    software = {"nats-server": "v2.10.22"}
    env = environment(Settings(seed=42, topology=Path("clusters/mine.yaml"), rounds=3), None, ["a", "b"], software)
    assert env["seed"] == "42" and env["rounds"] == "3" and env["regions"] == "a, b"
    assert env["topology"] == "clusters/mine.yaml" and env["target"] == "local"
    assert env["nats-server"] == "v2.10.22" and env["locust"][0].isdigit() and env["python"].startswith("3.")


def test_the_local_target_names_the_nats_server_it_runs() -> None:
    """What the environment shows for a local run comes from the target (HasSoftware): the
    real binary's --version."""
    assert issubclass(LocalTarget, HasSoftware)
    assert nats_server_version().startswith("v2.")


def test_an_environment_without_software_names_none() -> None:
    """A target without HasSoftware: nothing is made up (no nats-server line on kube)."""
    env = environment(Settings(seed=1), None, ["a"])
    assert "nats-server" not in env
