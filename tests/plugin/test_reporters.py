"""gameday's own reporters are plugins on the result hooks, each switched off with ``-p no:<name>``;
every reporter is called on its own (gameday.plugin.reporters)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pluggy
import pytest

from gameday.plugin import hooks
from gameday.plugin.reporters import call_reporters

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"


def _manager(*plugins: tuple[str, object]) -> pluggy.PluginManager:
    pm = pluggy.PluginManager("pytest")
    pm.add_hookspecs(hooks)
    for name, plugin in plugins:
        pm.register(plugin, name)
    return pm


class _Raises:
    @pytest.hookimpl(tryfirst=True)
    def pytest_gameday_run_recorded(self, drills: list[dict[str, Any]]) -> None:
        drills[0]["switchover"] = "changed"  # its own copy
        raise RuntimeError("the dashboard is down")


class _Records:
    def __init__(self) -> None:
        self.got: list[tuple[Any, ...]] = []

    @pytest.hookimpl
    def pytest_gameday_run_recorded(self, config: object, drills: list[dict[str, Any]], run_dir: Path) -> None:
        self.got.append((config, drills, run_dir))


class _Wraps:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_gameday_run_recorded(self) -> Any:
        yield


def test_each_reporter_is_called_on_its_own_with_its_own_copy() -> None:
    """One that raises (called first) does not stop the next; each gets its own copy of the
    drills; the shared arguments are the same objects; a hookwrapper is named and not called."""
    records = _Records()
    pm = _manager(("records", records), ("raises", _Raises()), ("wraps", _Wraps()))
    drills = [{"test": "t::x", "switchover": {"value_s": 1.5}}]
    config, run_dir = object(), Path("reports/runs/r")
    errors = call_reporters(pm.hook.pytest_gameday_run_recorded, {"config": config, "run_dir": run_dir},
                            {"drills": drills, "conformance": []})
    assert errors == [
        "pytest_gameday_run_recorded (wraps): a hookwrapper is not supported on gameday's result hooks; it was "
        "not called",
        "pytest_gameday_run_recorded (raises): RuntimeError: the dashboard is down",
    ]
    assert records.got == [(config, drills, run_dir)]  # equal: the raising one's change did not reach it
    assert records.got[0][0] is config and records.got[0][1] is not drills
    assert drills == [{"test": "t::x", "switchover": {"value_s": 1.5}}]


def test_fail_on_regression_without_the_history_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:gameday_history", "--gameday-fail-on-regression")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gameday-fail-on-regression judges each drill against the run history, "
                                 "which -p no:gameday_history switched off*"])


RECORDER = """
import json


def pytest_gameday_drill_recorded(item, result, summary, files):
    with open("reporter.jsonl", "a") as f:
        f.write(json.dumps({"files": sorted(files), "verdicts": len(summary["verdicts"])}) + "\\n")
"""


def test_the_built_in_reporters_switch_off_and_the_record_stays(pytester: pytest.Pytester) -> None:
    """A real drill with the plots, the history and gameday's Allure content switched off: no
    timeline plot, no history, no gameday attachment or run file in the Allure results (allure-
    pytest's own result stays), no regression judged; the figures with their verdicts, the raw
    timeline, JUnit and the user's reporter as always."""
    pytester.makeini(INI)
    pytester.makeconftest(RECORDER)
    pytester.makepyfile(test_drill="""
        import pytest

        @pytest.mark.gameday
        def test_outage(drill, load):
            with drill.fault("gateway_down", drill.pick_region()) as fault:
                result = drill.observe_switchover(fault)
            result.assert_switchover_under(10)
            result.assert_versions_incremented()
    """)
    result = pytester.runpytest_subprocess(
        "-p", "no:gameday_plots", "-p", "no:gameday_history", "-p", "no:gameday_allure", "--gameday-seed=5",
        "--gameday-recovery-window=3", "--junitxml=junit.xml", "--alluredir=allure-results", timeout=240)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*gameday drill verdicts*"])
    assert "report error" not in result.stdout.str()
    figures = list((pytester.path / "reports" / "runs").glob("*/drills/*/figures-0.json"))
    assert len(figures) == 1
    data = json.loads(figures[0].read_text())
    assert {v["name"] for v in data["verdicts"]} >= {"switchover", "versions"}
    assert "regression" not in data  # not judged without the history
    drill_dir = figures[0].parent
    assert sorted(p.name for p in drill_dir.iterdir()) == ["figures-0.json", "timeline-0.csv", "timeline-0.json"]
    assert not (pytester.path / "reports" / "history.jsonl").exists()
    assert (pytester.path / "junit.xml").read_text().count("<testcase") == 1
    allure = pytester.path / "allure-results"
    results = [json.loads(p.read_text()) for p in allure.glob("*-result.json")]
    assert [r["name"] for r in results] == ["test_outage"]  # allure-pytest's own result
    assert not any(r.get("attachments") for r in results), results
    assert not (allure / "environment.properties").exists() and not (allure / "categories.json").exists()
    line = json.loads((pytester.path / "reporter.jsonl").read_text())
    assert line == {"files": ["figures", "locust_stats", "settings", "timeline_csv", "timeline_json"],
                    "verdicts": len(data["verdicts"])}
