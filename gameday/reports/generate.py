"""``gameday report``: the HTML report of a run's Allure results.

With the Allure command line installed (:mod:`gameday.reports.allure_cli`) it generates
Allure's report into ``reports/allure-report/`` (carrying the previous report's history,
so Trend and History fill in across runs); without it, the self-contained single-file
report of :mod:`gameday.reports.standalone` into ``reports/gameday-report/index.html``.
The results default to the newest run's under ``reports/`` (``runs/*/allure-results``,
or ``allure-results``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gameday.errors import ReportError
from gameday.reports import allure_cli
from gameday.reports.results import read_results
from gameday.reports.standalone import render
from gameday.reports.trend import read_history, runs_of

Generator = Literal["auto", "allure", "builtin"]
GENERATORS: tuple[Generator, ...] = ("auto", "allure", "builtin")

INSTALL_HINT = ("install it with tests/report/install-report-tools.sh (npm allure-commandline into "
                f"~/.cache/gameday/allure), or point ${allure_cli.ALLURE_ENV} at an allure executable")


@dataclass(frozen=True, kw_only=True)
class ReportRequest:
    reports: Path
    """The reports directory: where runs, ``history.jsonl`` and the default output live."""
    results: Path | None = None
    """An Allure results directory; None: the newest run's under *reports*."""
    output: Path | None = None
    """Where the report goes; None: ``reports/allure-report`` (Allure) or ``reports/gameday-report``."""
    generator: Generator = "auto"
    """``allure`` requires the Allure command line, ``builtin`` never uses it, ``auto`` prefers it."""
    history: Path | None = None
    """The trend's ``history.jsonl``; None: ``reports/history.jsonl``."""


@dataclass(frozen=True, kw_only=True)
class Report:
    index: Path
    """The page to open."""
    generator: str
    """``allure <version>`` or ``builtin``."""
    results: Path
    tests: int
    runs_in_history: int
    note: str = ""
    """Why the builtin generator was used, when it was chosen automatically."""


def latest_results(reports: Path) -> Path:
    """The newest Allure results directory under *reports* (by the time its newest result was
    written). Raises ReportError naming what was looked for when there is none."""
    candidates = [d for d in (*reports.glob("runs/*/allure-results"), reports / "allure-results") if d.is_dir()]

    def newest(d: Path) -> float:
        times = [p.stat().st_mtime for p in d.glob("*-result.json")]
        return max(times, default=d.stat().st_mtime)

    if not candidates:
        raise ReportError(f"{reports}: no Allure results in it (looked for {reports}/runs/*/allure-results and "
                          f"{reports}/allure-results): run `gameday drill` first, or name a results "
                          "directory with --results")
    return max(candidates, key=newest)


def _check_output(output: Path) -> None:
    """Refuse to replace a directory that is not a report (a typo must not delete a project)."""
    if output.exists() and (not output.is_dir() or (any(output.iterdir()) and not (output / "index.html").exists())):
        raise ReportError(f"--output {output}: exists and is not a report (no index.html in it); "
                          "name a new or empty directory, or a previous report's")


def make_report(req: ReportRequest) -> Report:
    """Generate the report *req* asks for. Raises ReportError (no or empty results, a bad file,
    the generator failing, with its output's tail)."""
    results_dir = req.results if req.results is not None else latest_results(req.reports)
    results = read_results(results_dir)  # also for Allure: an empty or broken run is named here
    history = read_history(req.history if req.history is not None else req.reports / "history.jsonl")
    allure: allure_cli.Allure | None = None
    note = ""
    if req.generator != "builtin":
        allure = allure_cli.find_allure()
        if allure is None and req.generator == "allure":
            raise ReportError(f"--generator allure: no Allure command line found; {INSTALL_HINT}")
        if allure is None:
            note = f"no Allure command line found, so the self-contained report was written; {INSTALL_HINT}"
    if allure is not None:
        output = req.output if req.output is not None else req.reports / "allure-report"
        _check_output(output)
        allure_cli.generate(allure, results_dir, output)
        return Report(index=output / "index.html", generator=f"allure {allure.version}", results=results_dir,
                      tests=len(results.tests), runs_in_history=len(runs_of(history)), note=note)
    output = req.output if req.output is not None else req.reports / "gameday-report"
    _check_output(output)
    output.mkdir(parents=True, exist_ok=True)
    index = output / "index.html"
    tmp = output / f".index.html.{os.getpid()}"
    tmp.write_text(render(results, history), encoding="utf-8")
    tmp.replace(index)
    return Report(index=index, generator="builtin", results=results_dir, tests=len(results.tests),
                  runs_in_history=len(runs_of(history)), note=note)
