"""gameday's built-in reporters: plugin objects on the result hooks, each switched off on its own.

=====================  ===========================================================================
``gameday_plots``      each drill's timeline plot (``timeline-N.png``) and, with ``--gameday-rounds``,
                       the switchover across rounds (``rounds-N.png``, per drill and per run)
``gameday_history``    the run history (``<reports>/history.jsonl``), appended at the end of the
                       run, and each drill's switchover judged against it (the regression flag,
                       ``--gameday-fail-on-regression``)
``gameday_allure``     gameday's Allure content: the drill's steps, its attachments (timeline,
                       verdicts, figures, records), labels, the regression tag, and the run's
                       environment, categories and executor files (allure-pytest's own results,
                       one per test, stay: ``-p no:allure_pytest`` is allure-pytest's switch)
=====================  ===========================================================================

``pytest -p no:gameday_plots`` switches the plots off (and so on), as ``-p no:junitxml`` does
pytest's JUnit writer: a CI that wants only the verdicts and JUnit saves the drawing (about a
CPU-second per drill). What stays, whatever is switched off, is the run's record: each drill's
figures (``figures-N.json``, with its verdicts), its raw timeline (CSV, JSON), the settings,
``run.json``, the terminal tables and JUnit.

Each implements :func:`~gameday.plugin.hooks.pytest_gameday_drill_recorded` and/or
:func:`~gameday.plugin.hooks.pytest_gameday_run_recorded`, as a user's reporter does.
:func:`call_reporters` calls every implementation of a result hook on its own: one that raises
does not keep the others from running (a failing dashboard upload must not cost the Allure
attachments), and what it raised is said under the run's tables. The built-ins run first
(``tryfirst``), plots before Allure (which attaches the plot), so a user's reporter finds their
files in ``files``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from gameday.plugin.session import HISTORY_PLUGIN, STATE_KEY, SessionState, history_path
from gameday.reports import allure_attach, plots, reporting, table
from gameday.reports.history import append_history

PLOTS_PLUGIN = "gameday_plots"
ALLURE_PLUGIN = allure_attach.ALLURE_PLUGIN

BUILT_IN: dict[str, str] = {
    PLOTS_PLUGIN: "each drill's timeline plot (`timeline-N.png`); with `--gameday-rounds`, the switchover "
                  "across rounds (`rounds-N.png`, per drill and per run)",
    HISTORY_PLUGIN: "the run history (`<reports>/history.jsonl`), and each drill's switchover judged against it "
                    "(the regression flag; `--gameday-fail-on-regression` is refused without it)",
    ALLURE_PLUGIN: "gameday's Allure content: the drill's steps, attachments, labels, regression tag, and the run's "
                   "environment, categories and executor files (allure-pytest's own results stay)",
}
"""The built-in reporters by plugin name (what ``-p no:<name>`` switches off), for the reference page."""

log = logging.getLogger(__name__)


def register(config: pytest.Config) -> None:
    """Register the built-in reporters not switched off with ``-p no:<name>``. Allure first:
    among ``tryfirst`` implementations pluggy calls the latest registered first, and the plots
    must exist before Allure attaches them."""
    pm = config.pluginmanager
    for name, plugin in ((ALLURE_PLUGIN, AllureReporter()), (HISTORY_PLUGIN, HistoryReporter()),
                         (PLOTS_PLUGIN, TimelinePlots())):
        if not pm.is_blocked(name) and not pm.has_plugin(name):
            pm.register(plugin, name)


def call_reporters(hook: Any, shared: Mapping[str, Any], copied: Mapping[str, Any]) -> list[str]:
    """Call each implementation of the result hook *hook* on its own, in pluggy's order, with the
    arguments *shared* (the same objects for all: ``files``, which a reporter may add its own
    files to, the item, the result) and *copied* (a fresh JSON copy for each: what one reporter
    changes, the next does not see). Returns one line per implementation that raised (logged
    with its traceback), never raises: a reporter must not replace the test's outcome or stop
    the run's summary. A hookwrapper is not called (it cannot be isolated): said as an error."""
    errors = []
    for impl in reversed(hook.get_hookimpls()):  # pluggy calls the list from its end
        who = f"{hook.name} ({_short(impl.plugin_name)})"
        if impl.hookwrapper or impl.wrapper:
            errors.append(f"{who}: a hookwrapper is not supported on gameday's result hooks; it was not called")
            continue
        kwargs = {**shared, **{k: json.loads(json.dumps(v, default=str)) for k, v in copied.items()}}
        try:
            impl.function(*[kwargs[a] for a in impl.argnames])
        except Exception as exc:  # anything a user's reporter raises
            log.exception("gameday reporter %s failed", who)
            errors.append(f"{who}: {type(exc).__name__}: {exc}"[:500])
    return errors


def _short(plugin_name: str) -> str:
    """A plugin's name as the error line gives it: a conftest's file name, not its whole path."""
    return Path(plugin_name).name if os.sep in plugin_name else plugin_name


def _state(config: pytest.Config) -> SessionState:
    return config.stash[STATE_KEY]


def _say(config: pytest.Config, line: str) -> None:
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(line)


class TimelinePlots:
    """``gameday_plots``: the timeline plot of each drill; the rounds plots."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_gameday_drill_recorded(self, item: pytest.Item, result: Any, summary: Mapping[str, Any],
                                      files: dict[str, Path]) -> None:
        state = _state(item.config)
        figures = Path(files["figures"])
        png = figures.with_name(figures.name.replace("figures-", "timeline-", 1)).with_suffix(".png")
        png.write_bytes(plots.timeline_png(plots.timeline_series(result)))
        files["timeline_png"] = png
        base = item.nodeid.split("[")[0]
        if state.settings.rounds > 1 and len(state.round_switchovers.get(base, [])) > 1:
            rounds = figures.with_name(figures.name.replace("figures-", "rounds-", 1)).with_suffix(".png")
            rounds.write_bytes(plots.rounds_png(base.split("::")[-1], state.round_switchovers[base],
                                                state.settings.slo.switchover_limit))
            files["rounds_png"] = rounds

    @pytest.hookimpl(tryfirst=True)
    def pytest_gameday_run_recorded(self, config: pytest.Config, drills: Sequence[Mapping[str, Any]],
                                    run_dir: Path) -> None:
        s = _state(config).settings
        if s.rounds <= 1:
            return
        by_test: dict[str, list[float]] = {}
        for d in drills:
            sw = d.get("switchover")
            if isinstance(sw, dict) and sw.get("value_s") is not None:
                by_test.setdefault(str(d.get("test", "")).split("[")[0], []).append(float(sw["value_s"]))
        for i, (test, values) in enumerate(sorted(by_test.items())):
            path = Path(run_dir) / f"rounds-{i}.png"
            path.write_bytes(plots.rounds_png(test.split("::")[-1], values, s.slo.switchover_limit))
            _say(config, f"switchover across rounds ({test.split('::')[-1]}): {path}")


class HistoryReporter:
    """``gameday_history``: the run history, appended at the end of the run. (Each drill's
    regression check reads it: :func:`gameday.plugin.session.judge_regression`, only while this
    reporter is on.)"""

    @pytest.hookimpl(tryfirst=True)
    def pytest_gameday_run_recorded(self, config: pytest.Config, drills: Sequence[Mapping[str, Any]],
                                    run_dir: Path) -> None:
        state = _state(config)
        s = state.settings
        if s.dry_run:
            return
        rows = reporting.history_rows([dict(d) for d in drills], run=Path(run_dir).name,
                                      commit=reporting.git_commit(), settings=s, profile=state.profile,
                                      failed_tests=state.failed_tests)
        if rows:
            append_history(history_path(s), rows)
            _say(config, f"history: {len(rows)} drill(s) appended to {history_path(s)}")


class AllureReporter:
    """``gameday_allure``: a drill's Allure attachments, and the run's environment, categories and
    executor files. (The steps, labels and regression tag written during the run ask
    :func:`gameday.reports.allure_attach.allure_active`, which is false while this is off.)"""

    @pytest.hookimpl(tryfirst=True)
    def pytest_gameday_drill_recorded(self, item: pytest.Item, summary: Mapping[str, Any],
                                      files: dict[str, Path]) -> None:
        if not allure_attach.allure_active(item.config):
            return
        state = _state(item.config)
        allure_attach.attach_drill(item.config, dict(summary), table.drill_rows([dict(summary)]), files=dict(files),
                                   context=reporting.context(state.settings, state.profile))

    @pytest.hookimpl(tryfirst=True)
    def pytest_gameday_run_recorded(self, config: pytest.Config) -> None:
        directory = allure_attach.results_dir(config)
        if directory is None or not allure_attach.allure_active(config):
            return
        state = _state(config)
        regions = [r.name for r in state.topology.regions] if state.topology is not None else []
        env = reporting.environment(state.settings, state.profile, regions, state.software)
        allure_attach.write_results_files(directory, env, os.environ, run=state.run_dir.name)
