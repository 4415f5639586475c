"""The session's reporting half: what the drills recorded, written out and shown.

- when a test's call ends (:func:`after_phase`): each drill's timeline plot, raw timeline,
  the settings, the rounds plot and the Allure attachments, with the verdicts it asserted;
- on each test report (:func:`annotate_report`): the drill figures, conformance rule ids and
  the verdicts that were not applicable, as user properties (they travel through xdist), and
  a test whose every verdict was not applicable reported skipped;
- at the end (:func:`terminal_summary`): the verdict and conformance tables, the history
  appended, the regression lines, what a signal interrupted, and ``run.json``.

It reads the session's state (:class:`gameday.plugin.session.SessionState`) and the stash
keys the session fills, so it sits beside the session in the plugin, not in
:mod:`gameday.reports`: that package is below the drill (which writes its Allure steps), and
a reports module reading the session would close the circle plugin -> drill -> reports ->
plugin. The formats themselves (tables, plots, history rows, Allure files) are
:mod:`gameday.reports`'.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from typing import Any

import pytest

from gameday.load.generator import LoadGenerator
from gameday.load.runner import LoadRunner
from gameday.plugin import reporters
from gameday.plugin.session import (
    DRILLS_KEY,
    PENDING_KEY,
    REGRESSION_KEY,
    RESULTS_KEY,
    STATE_KEY,
    SessionState,
    safe_nodeid,
)
from gameday.reports import allure_attach, junit, rawdata, table
from gameday.runtime.interrupts import ledger_pending, signal_name
from gameday.verdicts import harness
from gameday.verdicts.result import DrillResult

INCONCLUSIVE_PROPERTY = junit.INCONCLUSIVE_PROPERTY
"""The user property (and JUnit property) a test whose failure was a starved harness carries
(with its node id in :data:`gameday.reports.junit.NODEID_PROPERTY`: ``gameday inconclusive`` reads both)."""
HARNESS_LOG_ENV = "GAMEDAY_HARNESS_LOG"
"""Where set, every drill appends one JSON line to this file: its test's node id and how well the
harness kept up (``gameday_harness``: each source's achieved rate and longest gap over the fault's
window). gameday's own tests collect their inner drills' lines into their JUnit properties."""
INCONCLUSIVE_KEY = pytest.StashKey[str]()
"""On a test's item: why its call was inconclusive (the teardown report carries it to JUnit)."""
INCONCLUSIVE_LOG_ENV = "GAMEDAY_INCONCLUSIVE_LOG"
"""Where set, every inconclusive test appends one JSON line (``nodeid``, ``reason``) to this file:
for a wrapper or a CI that reruns only what a starved harness left undecided (gameday's own
tests rerun such an outer test once)."""

log = logging.getLogger(__name__)


def write_drill_reports(config: pytest.Config, state: SessionState, node: pytest.Item) -> None:
    """When the test's call ends (its verdicts folded in): each drill's timeline plot, raw
    timeline, the settings, the rounds plot, and the Allure attachments of the test."""
    for res, summary, index, runner in node.stash.get(PENDING_KEY, []):
        _write_drill_report(config, state, node, res, summary=summary, index=index, runner=runner)
    node.stash[PENDING_KEY] = []


def _write_drill_report(config: pytest.Config, state: SessionState, node: pytest.Item, res: DrillResult, *,
                        summary: dict[str, Any], index: int, runner: LoadGenerator | None) -> None:
    """The drill's record (its raw timeline, the settings, its figures with the verdicts), then
    the reporters on :func:`~gameday.plugin.hooks.pytest_gameday_drill_recorded`: the built-in
    ones (:mod:`gameday.plugin.reporters`: the plots, Allure) first, then the user's."""
    out_dir = state.run_dir / "drills" / safe_nodeid(node.nodeid)
    files = {"figures": out_dir / f"figures-{index}.json", "timeline_csv": out_dir / f"timeline-{index}.csv",
             "timeline_json": out_dir / f"timeline-{index}.json", "settings": state.run_dir / "settings.json"}
    files["timeline_csv"].write_text(rawdata.timeline_csv(res))
    files["timeline_json"].write_text(rawdata.timeline_json(res))
    if not files["settings"].exists():
        files["settings"].parent.mkdir(parents=True, exist_ok=True)
        model = state.profile.profile if state.profile is not None else state.topology
        where = state.profile.path if state.profile is not None else state.settings.topology
        files["settings"].write_text(rawdata.settings_json(state.settings, model, where))
    if isinstance(runner, LoadRunner):  # locust's own statistics
        files["locust_stats"] = runner.stats_csv
    files["figures"].write_text(json.dumps(summary, indent=2, default=str))  # now with its verdicts
    failed = reporters.call_reporters(config.hook.pytest_gameday_drill_recorded,
                                      {"item": node, "result": res, "files": files}, {"summary": summary})
    if failed:  # said in the figures (and so in the summary's report errors), never raised
        summary.setdefault("report_errors", []).extend(failed)
        files["figures"].write_text(json.dumps(summary, indent=2, default=str))


def label_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Allure labels (epic/feature/story, severity) for drills and conformance checks."""
    allure_attach.label_items(config, items)


def after_phase(item: pytest.Item) -> None:
    """When the test's call (or teardown) has run: its drills' plots, raw data and Allure
    attachments, with the verdicts it asserted folded in.

    Here, in ``pytest_runtest_call``/``pytest_runtest_teardown`` (:mod:`gameday.plugin`), not in
    ``pytest_runtest_makereport``: drawing takes seconds, and a Ctrl-C arriving then must stop
    the run as one in the test does. Raised inside makereport it went through allure-pytest's
    old-style makereport wrapper, which pluggy reports as a PluggyTeardownRaisedWarning."""
    state = item.config.stash.get(STATE_KEY, None)
    if state is None or not item.stash.get(PENDING_KEY, None):
        return
    fold_verdicts(item)
    write_drill_reports(item.config, state, item)


def fold_verdicts(item: pytest.Item) -> None:
    """Put the verdicts each drill of *item* asserted into its summary."""
    summaries: list[dict[str, Any]] = item.stash.get(DRILLS_KEY, [])
    results: list[DrillResult] = item.stash.get(RESULTS_KEY, [])
    for summary, res in zip(summaries, results, strict=False):
        summary["verdicts"] = [v.as_dict() for v in res.verdicts]


def annotate_report(item: pytest.Item, report: pytest.TestReport) -> None:
    """Attach drill figures and conformance rule ids to the report (travels through xdist).
    Cheap bookkeeping only (see :func:`after_phase`)."""
    if report.when == "call":
        judge_not_applicable(item, report)
    if report.when == "teardown":
        state = item.config.stash.get(STATE_KEY, None)
        regression = item.stash.get(REGRESSION_KEY, None)
        if regression is not None:
            allure_attach.regression_status(item.config, regression[0], fail=regression[1])
        for s in item.stash.get(DRILLS_KEY, []):
            report.user_properties.append(("gameday_drill", json.dumps(s, default=str)))
            if state is not None:
                state.reported.add(id(s))
        if state is not None and state.software and not state.software_sent:
            report.user_properties.append(("gameday_software", json.dumps(state.software)))
            state.software_sent = True
        # (JUnit writes the teardown report's properties: one per verdict that was not applicable)
        if INCONCLUSIVE_KEY in item.stash:  # JUnit writes the teardown report's properties
            report.user_properties.append((INCONCLUSIVE_PROPERTY, item.stash[INCONCLUSIVE_KEY]))
            report.user_properties.append((junit.NODEID_PROPERTY, item.nodeid))
        for res in item.stash.get(RESULTS_KEY, []):
            if res.window_rates:  # how well the harness kept up: the observer's achieved rates
                line = json.dumps(harness.summary(res.window_rates, res.starvation()))
                report.user_properties.append(("gameday_harness", line))
                _append_line(HARNESS_LOG_ENV, json.dumps({"nodeid": item.nodeid, "harness": json.loads(line)}))
            report.user_properties += [("gameday_na", f"{v.name}: {v}") for v in res.verdicts if v.outcome == "n/a"]
            report.user_properties += [
                ("gameday_vs_prediction", f"{v.name.removesuffix('_vs_prediction')}: {v.outcome} {v.figure} "
                 f"{v.resolution}, {v.limit}" + (f": {v.detail}" if v.detail else ""))
                for v in res.verdicts if v.name.endswith("_vs_prediction")]
    marker = item.get_closest_marker("conformance")
    if marker is not None and (report.when == "call" or (report.when == "setup" and report.outcome != "passed")):
        rule = marker.args[0] if marker.args else marker.kwargs.get("rule", "?")
        title = marker.args[1] if len(marker.args) > 1 else marker.kwargs.get("title", "")
        report.user_properties.append(("gameday_conformance", json.dumps({"rule": rule, "title": title})))


def mark_inconclusive(item: pytest.Item, report: pytest.TestReport, reason: str) -> None:
    """*report* failed on a starved harness (:class:`gameday.errors.HarnessStarved`): say so in
    its properties (they travel through xdist, and reach JUnit) and, where asked, in the log of
    :data:`INCONCLUSIVE_LOG_ENV`."""
    first = reason.splitlines()[0][:1000] if reason else "harness starved"
    report.user_properties.append((INCONCLUSIVE_PROPERTY, first))
    item.stash[INCONCLUSIVE_KEY] = first
    _append_line(INCONCLUSIVE_LOG_ENV, json.dumps({"nodeid": item.nodeid, "reason": first}))


def _append_line(env: str, line: str) -> None:
    """One line appended to the file environment variable *env* names (nothing when unset)."""
    path = os.environ.get(env)
    if path:
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError as exc:
            log.warning("could not append to %s=%s: %r", env, path, exc)


def is_inconclusive(report: pytest.TestReport) -> bool:
    """The report is a failure that :func:`mark_inconclusive` marked."""
    return any(k == INCONCLUSIVE_PROPERTY for k, _ in getattr(report, "user_properties", ()))


def judge_not_applicable(item: pytest.Item, report: pytest.TestReport) -> None:
    """When the test's call ends: fold the verdicts its drills asserted into their summaries,
    and report the test *skipped* (with the reasons) when every verdict it asserted was not
    applicable: a drill with no inputs must not pass."""
    results = item.stash.get(RESULTS_KEY, [])
    fold_verdicts(item)
    verdicts = [v for res in results for v in res.verdicts]
    na = [v for v in verdicts if v.outcome == "n/a"]
    if report.passed and verdicts and len(na) == len(verdicts):
        reasons = "; ".join(dict.fromkeys(f"{v.name} {v}" for v in na))
        line = item.location[1]
        report.outcome = "skipped"
        report.longrepr = (str(item.path), (line or 0) + 1,
                           f"Skipped: every verdict this test asserted was not applicable: {reasons}")


def terminal_summary(tr: Any, state: SessionState) -> None:
    state.summarised = True
    drills: list[dict[str, Any]] = []
    rules: list[dict[str, Any]] = []
    reasons = {rep.nodeid: table.one_line_reason(rep)
               for rep in [*tr.stats.get("failed", []), *tr.stats.get("inconclusive", [])]
               if getattr(rep, "when", "call") in ("call", "setup")}
    for reports in tr.stats.values():
        for rep in reports:
            for key, value in getattr(rep, "user_properties", []):
                if key == "gameday_drill":
                    drills.append(json.loads(value))
                elif key == "gameday_software":
                    state.software.update(json.loads(value))
                elif key == "gameday_conformance":
                    entry = json.loads(value)
                    entry["outcome"] = "inconclusive" if is_inconclusive(rep) else rep.outcome
                    entry["test"] = rep.nodeid
                    entry["reason"] = table.one_line_reason(rep)
                    rules.append(entry)
    drills += unreported_drills(state)
    state.drills = drills
    state.conformance = rules
    if drills:
        tr.write_sep("=", "gameday drill verdicts")
        for line in table.render_drills(drills, reasons):
            tr.write_line(line)
        if state.settings.rounds > 1:
            for line in table.render_rounds(drills):
                tr.write_line(line)
        tr.write_line(f"figures, timelines and records: {state.run_dir}")
    if rules:
        tr.write_sep("=", "gameday conformance summary")
        for line in table.render_conformance(rules):
            tr.write_line(line)
    if drills or rules:
        for line in finish_reports(tr.config, state, drills):
            tr.write_line(line)
    # A test inconclusive after its rerun is listed here; one that passed then, under the reruns.
    starved = [rep for rep in tr.stats.get("inconclusive", []) if getattr(rep, "when", "call") in ("call", "setup")]
    if starved:
        tr.write_sep("=", "gameday: inconclusive (harness starved: neither pass nor fail of the federation)")
        for rep in starved:  # the whole message: pytest shows no traceback for this outcome
            crash = getattr(getattr(rep, "longrepr", None), "reprcrash", None)
            tr.write_line(f"INCONCLUSIVE {rep.nodeid} - {crash.message if crash else table.one_line_reason(rep)}")
        tr.write_line("the observer could not read the federation at the rate its figures need (a busy machine); "
                      "run it again on a quieter one, or with fewer parallel drills")
    reruns = [rep for rep in tr.stats.get("rerun", []) if "HarnessStarved" in str(getattr(rep, "longrepr", ""))]
    if reruns:  # pytest-rerunfailures (--only-rerun HarnessStarved): count them, say which and why
        tr.write_sep("=", f"gameday: {len(reruns)} test run(s) inconclusive (harness starved) and rerun")
        for rep in reruns:
            crash = getattr(getattr(rep, "longrepr", None), "reprcrash", None)
            tr.write_line(f"RERUN {rep.nodeid} - {crash.message[:400] if crash else 'HarnessStarved'}")
    if state.interrupts.first is not None:
        tr.write_sep("=", "gameday: interrupted")
        for line in interruption_summary(state):
            tr.write_line(line)
        state.interruption_said = True
    write_run_file(tr.config, state)
    if getattr(tr.config, "workerinput", None) is None:
        errors = [f"{d.get('test')}: {e}" for d in drills for e in d.get("report_errors", [])]
        state.failed_tests = set(reasons)
        errors += reporters.call_reporters(tr.config.hook.pytest_gameday_run_recorded,
                                           {"config": tr.config, "run_dir": state.run_dir},
                                           {"drills": drills, "conformance": rules})
        if errors:
            tr.write_sep("=", f"gameday: {len(errors)} report error(s) (the verdicts stand)")
            for line in errors:
                tr.write_line(line)


def unreported_drills(state: SessionState) -> list[dict[str, Any]]:
    """The drills this process recorded that no test report carried: a Ctrl-C or SIGTERM
    stops pytest before the interrupted test's teardown report. They are still shown and
    appended to the history, aborted (the reason the drill recorded, else why the run
    stopped), so the trend and the regression verdict leave them out."""
    out = []
    for s in state.recorded:
        if id(s) in state.reported:
            continue
        if not s.get("aborted"):
            first = state.interrupts.first
            s["aborted"] = (f"the run was interrupted by {signal_name(first)} before its test ended"
                            if first is not None else "its test reported no result")
        out.append(s)
    return out


def regressions(drills: list[dict[str, Any]]) -> list[str]:
    """The regression sentence of every drill that regressed against its history."""
    return [f"{str(d.get('test', '')).split('::')[-1]} ({d.get('fault')}): {d['regression']['message']}"
            for d in drills if isinstance(d.get("regression"), dict) and d["regression"].get("status") == "regression"]


def finish_reports(config: pytest.Config, state: SessionState, drills: list[dict[str, Any]]) -> list[str]:
    """At the end of the run (controller only): the regression lines for the summary. (The
    history, the rounds plots and Allure's run files are reporters': :mod:`gameday.plugin.reporters`.)"""
    if getattr(config, "workerinput", None) is not None:
        return []
    lines: list[str] = []
    regressed = regressions(drills)
    if regressed:
        state.regressed = regressed
        lines += [f"REGRESSION {line}" for line in regressed]
        if state.settings.fail_on_regression:
            lines.append("--gameday-fail-on-regression: the run fails")
    return lines


def interruption_summary(state: SessionState) -> list[str]:
    """What a signal interrupted and what was reverted (the same for Ctrl-C and SIGTERM)."""
    it = state.interrupts
    assert it.first is not None
    assert it.first_at is not None
    at = it.first_at
    lines = [f"{signal_name(it.first)} received; {it.count} signal(s) in all"]
    hit = [f for f in state.faults if f.t_fault <= at <= f.t_done]
    for f in hit:
        if f.t_revert is None:
            lines.append(f"NOT reverted: {f.what}")
        elif f.t_revert >= at:
            lines.append(f"reverted: {f.what} ({f.t_revert - at:.2f} s after the signal, "
                         f"{f.t_revert - f.t_fault:.1f} s after it was injected)")
        else:
            lines.append(f"reverted: {f.what} (the revert was under way when the signal came; it was finished, "
                         f"steady state included, before stopping)")
    lines += [f"reverted at teardown: {w} (its drill did not get to revert it)" for w in state.swept]
    if not hit and not state.swept:
        lines.append("no fault was in effect: nothing to revert")
    pending = ledger_pending(state.ledger.path, os.getpid())
    if pending:
        lines.append(f"still in the ledger: {', '.join(pending)}: run `gameday restore "
                     f"--reports {state.settings.reports}`")
    else:
        lines.append(f"ledger: nothing pending from this run ({state.ledger.path})")
    return lines


def write_run_file(config: pytest.Config, state: SessionState) -> None:
    if getattr(config, "workerinput", None) is not None or not (state.drills or state.conformance):
        return  # the controller writes the run file, and only for runs that drilled or checked
    data = {
        "seed": state.settings.seed, "target": state.settings.target,
        "topology": str(state.settings.topology or "clusters/local.yaml"),
        "profile": str(state.profile.path) if state.profile is not None else None,
        "profile_sha256": state.profile.sha256 if state.profile is not None else None,
        "started": state.started, "finished": time.time(), "argv": sys.argv,
        "drills": state.drills, "conformance": state.conformance, "regressions": state.regressed,
    }
    with contextlib.suppress(OSError):
        state.run_dir.mkdir(parents=True, exist_ok=True)
        (state.run_dir / "run.json").write_text(json.dumps(data, indent=2, default=str))
