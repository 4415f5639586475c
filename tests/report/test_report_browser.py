"""`gameday report` as a reviewer sees it: a real drill, the report generated with the real
Allure command line (and the self-contained fallback), served on loopback HTTP, opened in
headless Chromium, and checked from the page itself. Screenshots: reports/screenshots/.

One drill (``gameday drill``, ~30 s) is shared by the module; the trend is shown from three
small real allure-pytest runs (tests/report/tiny.py) reported one after the other.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gameday.reports.serve import serve_directory
from tests.report import pages
from tests.report.conftest import REPORT_GROUP, gameday
from tests.report.tiny import CATEGORY, ENVIRONMENT, NESTED_STEP, STEPS, tiny_runs

pytestmark = [pytest.mark.slow, REPORT_GROUP]

DRILL_TEST = "test_random_gateway_outage"


@pytest.fixture(scope="module")
def drill_reports(tmp_path_factory: pytest.TempPathFactory, report_tools: None) -> Path:
    """The reports directory of one real `gameday drill` (its run's allure-results inside)."""
    root = tmp_path_factory.mktemp("drill")
    # (client recovery over 3 s, not the default 10: the report shows it the same, 7 s sooner)
    r = gameday("drill", "--seed", "7", "--reports", str(root / "reports"), "--gameday-recovery-window=3", cwd=root,
                timeout=300)
    assert r.returncode == 0, f"gameday drill exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}"
    return root / "reports"


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        yield context.new_page()
    finally:
        context.close()


def _results_of(reports: Path) -> Path:
    (results,) = reports.glob("runs/*/allure-results")
    return results


def _environment_of(results: Path) -> dict[str, str]:
    props = results / "environment.properties"
    if not props.is_file():
        return {}
    return dict(tuple(part.strip() for part in line.split("=", 1))  # type: ignore[misc]
                for line in props.read_text().splitlines() if "=" in line)


def _assert_complete(results: Path, expected: pages.Expected) -> None:
    """A drill's Allure results carry its steps and environment.properties (issue 9)."""
    assert expected.steps, f"the drill wrote no Allure steps to {results}"
    assert (results / "environment.properties").is_file(), f"the drill wrote no environment.properties to {results}"


def test_allure_report_of_a_drill_shows_the_test_its_steps_timeline_and_environment(
        drill_reports: Path, page: Any) -> None:
    results = _results_of(drill_reports)
    # The default: the newest run's results under --reports, into <reports>/allure-report.
    r = gameday("report", "--reports", str(drill_reports), cwd=drill_reports.parent)
    assert r.returncode == 0, f"gameday report exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    assert "report (allure 2." in r.stdout, r.stdout
    report = drill_reports / "allure-report"
    expected = pages.Expected.of(results, DRILL_TEST)
    with serve_directory(report) as base:
        pages.allure_overview(page, base)
        pages.screenshot(page, "allure-drill-overview.png")
        _assert_complete(results, expected)
        pages.check_allure_environment(page, _environment_of(results))
        pages.open_allure_test(page, base, expected)
        pages.screenshot(page, "allure-drill-test.png")
        pages.check_allure_test(page, expected)
        pages.screenshot(page, "allure-drill-test-expanded.png")


def test_self_contained_report_of_a_drill_opens_from_disk_with_images_inlined(
        drill_reports: Path, page: Any) -> None:
    results = _results_of(drill_reports)
    out = drill_reports.parent / "fallback"
    r = gameday("report", "--generator", "builtin", "--results", str(results), "--output", str(out),
                "--reports", str(drill_reports), cwd=drill_reports.parent)
    assert r.returncode == 0, f"gameday report exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    assert sorted(p.name for p in out.iterdir()) == ["index.html"], "the fallback report is more than one file"
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.goto((out / "index.html").as_uri())
    expected = pages.Expected.of(results, DRILL_TEST)
    _assert_complete(results, expected)
    pages.screenshot(page, "builtin-drill.png")
    assert [u for u in requests if not u.startswith(("file:", "data:", "about:"))] == [], \
        f"the self-contained report fetched {requests}"
    pages.check_builtin_test(page, expected)
    pages.check_builtin_environment(page, _environment_of(results))
    history = drill_reports / "history.jsonl"
    runs = len({json.loads(line)["run"] for line in history.read_text().splitlines() if line.strip()})
    pages.check_builtin_trend(page, runs)
    pages.screenshot(page, "builtin-drill-expanded.png")


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory, report_tools: None) -> tuple[Path, list[Path]]:
    """Three real allure-pytest runs of the tiny project (the second fails a verdict), each
    reported with `gameday report` into one output directory, as a nightly job does. The
    first two reports are copied aside (report-0, report-1: the negative controls)."""
    root = tmp_path_factory.mktemp("three-runs")
    out = root / "allure-report"
    runs = tiny_runs(root / "project", [(root / f"results-{i}", fail) for i, fail in enumerate((False, True, False))])
    for i, results in enumerate(runs):
        r = gameday("report", "--results", str(results), "--output", str(out), "--reports", str(root), cwd=root)
        assert r.returncode == 0, f"gameday report of run {i} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
        if i < 2:
            shutil.copytree(out, root / f"report-{i}")
    return out, runs


def test_allure_trend_fills_after_three_runs_and_overview_shows_environment_and_categories(
        three_runs: tuple[Path, list[Path]], page: Any) -> None:
    out, runs = three_runs
    trend = json.loads((out / "history" / "history-trend.json").read_text())
    assert [t["data"]["failed"] for t in trend] == [0, 1, 0], f"history-trend.json (newest first): {trend}"
    # Each test's own history too (newest first): the drill test failed in the second run only.
    history = json.loads((out / "history" / "history.json").read_text())
    drill = next(v for v in history.values() if any(i["status"] == "failed" for i in v["items"]))
    assert [i["status"] for i in drill["items"]] == ["passed", "failed", "passed"], drill
    with serve_directory(out) as base:
        pages.allure_overview(page, base)
        assert pages.allure_trend_runs(page) == 3
        pages.check_allure_environment(page, ENVIRONMENT)
        pages.screenshot(page, "allure-trend-overview.png")
        expected = pages.Expected.of(runs[-1], "test_tiny_drill")
        assert expected.steps == STEPS and NESTED_STEP in expected.nested_steps
        pages.open_allure_test(page, base, expected)
        pages.check_allure_test(page, expected)
        pages.screenshot(page, "allure-tiny-test.png")


def test_checks_fail_on_a_report_that_lacks_what_they_look_for(
        three_runs: tuple[Path, list[Path]], page: Any) -> None:
    """Negative controls: the first report has one run in its trend and no failure (so no
    category), a test with no image fails the test-page check; the second report (a failed
    verdict) files the failure under the project's category."""
    out, runs = three_runs
    with serve_directory(out.parent / "report-0") as base:
        pages.allure_overview(page, base)
        assert pages.allure_trend_runs(page) <= 1
        with pytest.raises(AssertionError, match="Categories widget lacks"):
            pages.check_allure_categories(page, [CATEGORY])
        with pytest.raises(AssertionError, match="Environment widget lacks"):
            pages.check_allure_environment(page, {"target": "kind"})
        expected = pages.Expected.of(runs[0], "test_tiny_versions")
        pages.open_allure_test(page, base, expected)
        with pytest.raises(AssertionError, match="no image attachment"):
            pages.check_allure_test(page, expected)
    with serve_directory(out.parent / "report-1") as base:  # ... the second run failed a verdict
        pages.allure_overview(page, base)
        pages.check_allure_categories(page, [CATEGORY])
        pages.screenshot(page, "allure-failed-run-overview.png")


def test_self_contained_report_of_tiny_runs_shows_steps_categories_and_trend(
        three_runs: tuple[Path, list[Path]], page: Any, tmp_path: Path) -> None:
    _, runs = three_runs
    # A history of three runs in the drill's history.jsonl format (what each drill appends).
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps({
        "time": f"2026-12-0{i + 1}T02:00:00+00:00", "run": f"run-{i}", "commit": None, "target": "local",
        "topology": "tiny", "seed": i, "test": "test_tiny.py::test_tiny_drill", "fault": "gateway_down",
        "region": "a", "round": 0, "switchover_s": 0.5 + i, "dns_converge_s": 0.4, "client_recovery_s": 2.0,
        "passed": i != 1}) + "\n" for i in range(3)))
    out = tmp_path / "page"
    r = gameday("report", "--generator", "builtin", "--results", str(runs[1]), "--output", str(out),
                "--history", str(history), "--reports", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    page.goto((out / "index.html").as_uri())
    expected = pages.Expected.of(runs[1], "test_tiny_drill")
    pages.check_builtin_test(page, expected)
    pages.check_builtin_environment(page, ENVIRONMENT)
    pages.check_builtin_trend(page, 3)
    categories = page.locator("#categories").inner_text()
    assert f"{CATEGORY} (1)" in categories and "test_tiny_drill" in categories, categories
    # The failed verdict's step is open, with its message, without a click.
    failed = page.locator("li.step.status-failed > details[open] .message").first
    assert "above the limit" in failed.inner_text()
    pages.screenshot(page, "builtin-tiny.png")
    with pytest.raises(AssertionError, match="across 3 runs"):
        pages.check_builtin_trend(page, 4)
