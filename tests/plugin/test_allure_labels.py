"""Conformance checks in the Allure results, and the results directory's own files under
pytest-xdist (written once, by the controller, and not lost to allure-pytest's writing).
No federation: the checks here need none."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"
CHECKS = """
import pytest

@pytest.mark.conformance("R2", "a 1-2 probe blip moves no traffic")
def test_blip():
    pass

@pytest.mark.conformance("R8", "weights")
def test_weights():
    assert 80 == 20, "the GSLB answered b 80 % of the time, weight 20 %"

def test_plain():
    pass
"""


def _by_name(d: Path) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for p in d.glob("*-result.json"):
        r = json.loads(p.read_text())
        labels: dict[str, list[str]] = {}
        for label in r["labels"]:
            labels.setdefault(label["name"], []).append(label["value"])
        out[r["name"]] = labels
    return out


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_conformance_labels_and_the_results_files(pytester: pytest.Pytester, workers: list[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini(INI)
    pytester.makepyfile(test_r=CHECKS)
    result = pytester.runpytest_subprocess("--alluredir=allure", "--clean-alluredir", "--gameday-seed=11",
                                           "--gameday-topology=" + str(Path(__file__).parents[2] / "clusters" /
                                                                       "local.yaml"), *workers, timeout=120)
    result.assert_outcomes(passed=2, failed=1)
    labels = _by_name(pytester.path / "allure")
    assert labels["test_blip"]["epic"] == ["conformance"]
    assert labels["test_blip"]["feature"] == ["R2"] and labels["test_blip"]["story"] == [
        "a 1-2 probe blip moves no traffic"]
    assert labels["test_blip"]["severity"] == ["normal"]
    assert labels["test_weights"]["feature"] == ["R8"]
    assert "epic" not in labels["test_plain"]  # neither a drill nor a check: left alone
    env = (pytester.path / "allure" / "environment.properties").read_text()
    assert "seed = 11" in env and "target = local" in env
    assert json.loads((pytester.path / "allure" / "categories.json").read_text())[0]["name"].startswith(
        "Infrastructure")
    executor = json.loads((pytester.path / "allure" / "executor.json").read_text())
    if not os.environ.get("CI"):  # off CI: the run names the host and user that ran it, and the run
        assert executor["type"] == "local" and "@" in executor["name"], executor
    assert executor["reportName"] in executor["buildName"] and executor["reportName"], executor  # the run's id
    assert not (pytester.path / "reports" / "history.jsonl").exists()  # no drill, no history
