"""`gameday report` on bad input and failing generators: clear errors (naming the directory,
the file, the field, or the generator's command and its output), nothing overwritten.
No browser; the real Allure command line where a test says so."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from gameday.errors import ReportError
from gameday.reports.generate import ReportRequest, latest_results, make_report
from gameday.reports.results import read_results
from gameday.reports.standalone import render
from gameday.reports.trend import read_history
from tests.report.conftest import gameday
from tests.report.tiny import CATEGORY, tiny_runs


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Real allure-pytest results of the tiny project: one passing run and one failing."""
    root = tmp_path_factory.mktemp("tiny")
    ok, failed = tiny_runs(root / "project", [(root / "ok", False), (root / "failed", True)])
    return ok, failed


@pytest.fixture
def no_allure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine without the Allure command line: not on PATH, not installed, not named."""
    monkeypatch.delenv("GAMEDAY_ALLURE", raising=False)
    monkeypatch.setenv("GAMEDAY_ALLURE_HOME", str(tmp_path / "no-allure-here"))
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                              if not (Path(p) / "allure").exists()))


def _fake_allure(tmp_path: Path, body: str) -> Path:
    """A stand-in `allure` executable (a shell script) for the generator's failure paths,
    which the real one cannot be made to take on demand: says it is 2.46.1, then runs *body*."""
    script = tmp_path / "allure"
    script.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo 2.46.1; exit 0; fi\n{body}\n')
    script.chmod(0o755)
    return script


def test_no_results_directory_is_named_with_what_to_do(tmp_path: Path) -> None:
    r = gameday("report", "--reports", str(tmp_path / "reports"), cwd=tmp_path)
    assert r.returncode == 2
    assert f"{tmp_path / 'reports'}: no Allure results in it" in r.stderr
    assert "run `gameday drill` first" in r.stderr
    r = gameday("report", "--results", str(tmp_path / "nope"), cwd=tmp_path)
    assert r.returncode == 2 and f"{tmp_path / 'nope'}: no such results directory" in r.stderr, r.stderr


def test_empty_results_and_a_broken_result_file_are_named(tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match=r"empty: holds no Allure test result \(\*-result.json\)"):
        make_report(ReportRequest(reports=tmp_path, results=tmp_path / "empty", generator="builtin"))
    broken = tmp_path / "broken"
    shutil.copytree(tiny[0], broken)
    victim = sorted(broken.glob("*-result.json"))[0]
    victim.write_text('{"name": "x", "steps": "not a list"}')
    with pytest.raises(ReportError, match=rf"{victim.name}: field 'steps' is 'not a list', expected a list"):
        read_results(broken)
    victim.write_text("{truncated")
    r = gameday("report", "--generator", "builtin", "--results", str(broken), "--reports", str(tmp_path),
                cwd=tmp_path)
    assert r.returncode == 2 and f"{victim}: not a readable JSON file" in r.stderr, r.stderr
    assert not (tmp_path / "gameday-report").exists(), "a report was written from broken results"


def test_the_newest_run_is_the_default(tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    older, newer = tmp_path / "runs" / "b-old" / "allure-results", tmp_path / "runs" / "a-new" / "allure-results"
    shutil.copytree(tiny[0], older)
    shutil.copytree(tiny[1], newer)
    past = time.time() - 3600
    for f in older.iterdir():
        os.utime(f, (past, past))
    assert latest_results(tmp_path) == newer  # by when the results were written, not by name


def test_without_allure_auto_writes_the_self_contained_page_and_says_why(
        tmp_path: Path, tiny: tuple[Path, Path], no_allure: None) -> None:
    report = make_report(ReportRequest(reports=tmp_path, results=tiny[1]))
    assert report.generator == "builtin" and report.index == tmp_path / "gameday-report" / "index.html"
    assert "no Allure command line found" in report.note and "install-report-tools.sh" in report.note
    page = report.index.read_text()
    # The failed verdict is filed under the project's category, its message shown.
    assert f"<b>{CATEGORY}</b> (1)" in page and "above the limit" in page
    with pytest.raises(ReportError, match="--generator allure: no Allure command line found"):
        make_report(ReportRequest(reports=tmp_path, results=tiny[1], generator="allure"))


def test_a_failing_generator_shows_its_output_and_keeps_the_previous_report(
        tmp_path: Path, tiny: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "allure-report"
    out.mkdir()
    (out / "index.html").write_text("the previous report")
    (out / "history").mkdir()
    (out / "history" / "history.json").write_text("{}")
    fake = _fake_allure(tmp_path, 'echo "Exception in thread main: java.lang.OutOfMemoryError" >&2; exit 3')
    r = gameday("report", "--results", str(tiny[0]), "--output", str(out), cwd=tmp_path,
                env={"GAMEDAY_ALLURE": str(fake)})
    assert r.returncode == 2
    assert "the Allure generator exited 3" in r.stderr and "java.lang.OutOfMemoryError" in r.stderr, r.stderr
    assert f"{fake} generate --clean -o" in r.stderr, r.stderr
    assert (out / "index.html").read_text() == "the previous report"
    assert (out / "history" / "history.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["allure", "allure-report"], "staging left behind"
    silent = _fake_allure(tmp_path, "exit 0")
    monkeypatch.setenv("GAMEDAY_ALLURE", str(silent))
    with pytest.raises(ReportError, match=r"the Allure generator wrote no index\.html"):
        make_report(ReportRequest(reports=tmp_path, results=tiny[0], output=out))
    monkeypatch.setenv("GAMEDAY_ALLURE", str(tmp_path / "missing-allure"))
    with pytest.raises(ReportError, match=r"\$GAMEDAY_ALLURE=.*missing-allure: not an executable file"):
        make_report(ReportRequest(reports=tmp_path, results=tiny[0], output=out))


def test_an_output_directory_that_is_not_a_report_is_refused(tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    project = tmp_path / "my-project"
    project.mkdir()
    (project / "main.py").write_text("print('mine')")
    r = gameday("report", "--generator", "builtin", "--results", str(tiny[0]), "--output", str(project),
                cwd=tmp_path)
    assert r.returncode == 2 and "exists and is not a report (no index.html in it)" in r.stderr, r.stderr
    assert sorted(p.name for p in project.iterdir()) == ["main.py"]


def test_history_lines_are_checked_naming_the_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    good = {"time": "2026-12-01T02:00:00+00:00", "run": "r1", "test": "t", "switchover_s": 0.5, "passed": True}
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "switchover_s": "fast"}) + "\n")
    with pytest.raises(ReportError, match=r"history.jsonl:3: field 'switchover_s' is 'fast', expected seconds"):
        read_history(path)
    path.write_text(json.dumps({**good, "time": "yesterday"}) + "\n")
    with pytest.raises(ReportError, match=r"history.jsonl:1: field 'time' is 'yesterday', expected an ISO-8601"):
        read_history(path)
    path.write_text(json.dumps(good) + "\n")
    assert [r.switchover_s for r in read_history(path)] == [0.5]
    assert read_history(tmp_path / "absent.jsonl") == []


def _recording_browser(tmp_path: Path) -> tuple[Path, Path]:
    """A `$BROWSER` (Python's webbrowser runs it with the URL) that fetches the URL it is
    given, as a browser would, and records the URL and the HTTP status (or "file")."""
    record = tmp_path / "opened.txt"
    script = tmp_path / "browser.py"
    script.write_text(
        "import sys, urllib.request\n"
        "url = sys.argv[1]\n"
        "status = urllib.request.urlopen(url, timeout=30).status if url.startswith('http') else 'file'\n"
        f"open({str(record)!r}, 'w').write(f'{{url}} {{status}}')\n")
    return script, record


def test_aborted_drills_read_and_show_as_aborted_in_the_history_view(tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    path = tmp_path / "history.jsonl"
    good = {"time": "2026-12-01T02:00:00+00:00", "run": "r1", "test": "t", "switchover_s": 0.5, "passed": True}
    cut = {**good, "time": "2026-12-01T03:00:00+00:00", "run": "r2", "passed": False,
           "aborted": "interrupted by Ctrl-C (SIGINT)"}
    path.write_text(json.dumps(good) + "\n" + json.dumps(cut) + "\n")
    rows = read_history(path)
    assert [(r.run, r.aborted) for r in rows] == [("r1", None), ("r2", "interrupted by Ctrl-C (SIGINT)")]
    page = render(read_results(tiny[0]), rows)
    assert page.count("aborted: interrupted by Ctrl-C (SIGINT)") == 1
    assert "grey ring" not in page  # (the plot is an image; its title is checked in test_plots)
    path.write_text(json.dumps({**good, "aborted": True}) + "\n")
    with pytest.raises(ReportError, match=r"history.jsonl:1: field 'aborted' is True, expected why the drill"):
        read_history(path)


def test_open_opens_the_page_file_or_served(tmp_path: Path, tiny: tuple[Path, Path], report_tools: None) -> None:
    import signal
    import subprocess
    import sys

    script, record = _recording_browser(tmp_path)
    env = {**os.environ, "BROWSER": f"{sys.executable} {script} %s"}
    r = gameday("report", "--open", "--generator", "builtin", "--results", str(tiny[0]), "--reports",
                str(tmp_path), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 60
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert record.read_text() == f"{(tmp_path / 'gameday-report' / 'index.html').as_uri()} file"
    record.unlink()
    # Allure's report is served on loopback until Ctrl-C.
    proc = subprocess.Popen([sys.executable, "-m", "gameday.cli", "report", "--open", "--generator", "allure",
                             "--results", str(tiny[0]), "--reports", str(tmp_path)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not record.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert record.exists(), f"the browser was not opened: {proc.poll()} {proc.stderr.read() if proc.stderr else ''}"
        url, status = record.read_text().rsplit(" ", 1)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/index.html") and status == "200", url
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert f"serving the report at {url.removesuffix('index.html')}" in out
