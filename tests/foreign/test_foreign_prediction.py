"""Negative control on a federation gameday did not build: a profile that states a shorter
health-check interval than PowerDNS really runs fails the DNS vs-prediction verdict.

PowerDNS checks every 8 s (``lua-health-checks-interval``) while the profile states
``probe_interval: 1``: a refused gateway is left out 0-8 s after it stopped (uniformly, by
where the fault lands between check rounds), against the predicted 0-1 s (+ the figure's
resolution + 0.3 s slack). One drill passes that by chance about 1 time in 6, so three
seeded rounds are run and at least one must fail, each failure being exactly that verdict
(and those that follow from it), never the 180 s limit.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.foreign.conftest import FOREIGN_GROUP, _ensure_packages
from tests.foreign.federation import CheckTiming, ForeignFederation
from tests.foreign.processes import processes_under

pytestmark = [pytest.mark.slow, FOREIGN_GROUP]

HEADLINE = Path(__file__).parents[2] / "suites" / "gameday" / "test_gateway_outage.py"
INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"
REAL_INTERVAL_S = 8
STATED_INTERVAL_S = 1.0
ROUNDS = 3
LOADED_SLACK_S = 2.0  # PowerDNS's lag and the figure's resolution: a loaded 2-core CI machine adds ~1-2 s


@pytest.fixture(scope="module")
def slow_checker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForeignFederation]:
    """The foreign federation with PowerDNS checking every 8 s."""
    _ensure_packages(tmp_path_factory.getbasetemp().parent)
    root = tmp_path_factory.mktemp("foreign-slow")
    fed = ForeignFederation.plan(root, timing=dataclasses.replace(CheckTiming(), interval_s=REAL_INTERVAL_S))
    try:
        fed.start()
        fed.wait_steady(3 * REAL_INTERVAL_S)
        yield fed
    finally:
        fed.stop()
        left = processes_under(root)
        assert not left, f"processes outlived the foreign federation in {root}: {left}"


def test_a_profile_stating_a_shorter_check_interval_than_powerdns_runs_fails_its_prediction(
        slow_checker: ForeignFederation, pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makeini(INI)
    shutil.copyfile(HEADLINE, pytester.path / HEADLINE.name)
    data: dict[str, Any] = slow_checker.profile(capacity_rps=500.0)
    assert data["timing"]["probe_interval"] == REAL_INTERVAL_S  # what PowerDNS runs ...
    data["timing"]["probe_interval"] = STATED_INTERVAL_S  # ... and what this profile claims
    profile = tmp_path / "understated.yaml"
    profile.write_text(yaml.safe_dump(data, sort_keys=False))
    result = pytester.runpytest_subprocess(
        "--gameday-target=external", f"--gameday-profile={profile}", "--gameday-seed=5", f"--gameday-rounds={ROUNDS}",
        "--gameday-recovery-window=3", timeout=600)
    rounds = [json.loads(f.read_text()) for f in (pytester.path / "reports" / "runs").glob("*/drills/*/figures-*.json")]
    assert len(rounds) == ROUNDS
    failed_rounds = 0
    for figures in rounds:
        verdicts = {v["name"]: v for v in figures["verdicts"]}
        for limit in ("switchover", "dns_convergence", "client_recovery", "headroom"):
            assert verdicts[limit]["outcome"] == "pass", verdicts  # far inside 180 s
        dns = verdicts["dns_convergence_vs_prediction"]
        if dns["outcome"] == "fail":
            failed_rounds += 1
            assert "later than predicted 0.00-1.00 s" in dns["detail"], dns
        failed = {n for n, v in verdicts.items() if v["outcome"] == "fail"}
        # switchover is measured from the DNS answers here, client recovery follows them
        assert failed <= {"dns_convergence_vs_prediction", "switchover_vs_prediction",
                          "client_recovery_vs_prediction"}, verdicts
        assert figures["dns_convergence"]["value_s"] <= REAL_INTERVAL_S + LOADED_SLACK_S, figures["dns_convergence"]
    assert failed_rounds >= 1, [r["dns_convergence"] for r in rounds]
    result.assert_outcomes(failed=failed_rounds, passed=ROUNDS - failed_rounds)
    result.stdout.fnmatch_lines(["*AssertionError: not as predicted: *dns_convergence vs prediction: dns "
                                 "convergence * later than predicted 0.00-1.00 s*"])
