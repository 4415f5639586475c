"""The Allure reporter: steps, labels, attachments and the results directory's own files.

Active only when allure-pytest writes results (``--alluredir``); the only module that
imports allure. What it writes:

- per drill test: one step per phase (steady state, inject, observe, restore) and one per
  verdict (a failed verdict fails its own step), the timeline PNG, the verdict table, the
  raw timeline (CSV, JSON), locust's statistics CSV, the settings and topology/profile
  with secrets redacted; labels epic/feature/story, severity, target, topology; the seed
  and region as parameters excluded from the history id, so that they never split a
  test's history;
- per conformance test: epic/feature/story from its rule id and title;
- at the end of the session (controller only): ``environment.properties``,
  ``categories.json`` and ``executor.json`` (the CI that ran it, else host and user).
"""

from __future__ import annotations

import getpass
import json
import re
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gameday.reports.steps import StepRecord, verdict_title
from gameday.verdicts.registry import VERDICTS

if TYPE_CHECKING:
    from gameday.verdicts.result import Verdict

# Per test (node id): the drills attached so far, so a test with several drills (rounds, two faults)
# gets every region in its parameter and every drill's verdict line in its description.
_SEEN_KEY = pytest.StashKey[dict[str, list[dict[str, Any]]]]()



ALLURE_PLUGIN = "gameday_allure"
"""The name gameday's Allure reporter registers under: ``pytest -p no:gameday_allure`` switches
gameday's Allure content off (allure-pytest's own results stay)."""


def allure_active(config: pytest.Config) -> bool:
    """allure-pytest writes results (``--alluredir``) and gameday's Allure reporter is on."""
    return bool(getattr(config.option, "allure_report_dir", None)) and config.pluginmanager.has_plugin(ALLURE_PLUGIN)


def results_dir(config: pytest.Config) -> Path | None:
    d = getattr(config.option, "allure_report_dir", None)
    return Path(d) if d else None


def _reporter(config: pytest.Config) -> Any:
    """allure-pytest's reporter (its items, to retitle a step at its end), or None."""
    listener = config.pluginmanager.get_plugin("allure_listener")
    return getattr(listener, "allure_logger", None)


# -- steps -------------------------------------------------------------------------------------
class AllureSteps:
    """:class:`gameday.reports.steps.Steps` as Allure steps of the running test."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @contextmanager
    def phase(self, title: str) -> Iterator[StepRecord]:
        record = StepRecord(title)
        ctx = self._open(title)
        try:
            yield record
        except BaseException as exc:
            self._close(ctx, record, exc)
            raise
        self._close(ctx, record, None)

    def _open(self, title: str) -> Any:
        import allure  # noqa: PLC0415  (optional integration)

        ctx: Any = allure.step(title)
        ctx.__enter__()
        return ctx

    def _close(self, ctx: Any, record: StepRecord, exc: BaseException | None) -> None:
        """Give the open step the record's final title and parameters, then close it
        (failed or broken with *exc*, as Allure judges the exception)."""
        from allure_commons.model2 import Parameter  # noqa: PLC0415

        reporter = _reporter(self.config)
        item = reporter.get_item(ctx.uuid) if reporter is not None else None
        if item is not None:
            item.name = record.title
            item.parameters = [Parameter(name=k, value=str(v)) for k, v in record.params.items()]
        if exc is None:
            ctx.__exit__(None, None, None)
        else:
            ctx.__exit__(type(exc), exc, exc.__traceback__)

    def record(self, title: str, params: Mapping[str, str], exc: BaseException | None) -> None:
        """A step for a fact already established (a verdict, a regression check), failed with *exc*."""
        self._close(self._open(title), StepRecord(title, dict(params)), exc)

    def verdict(self, v: Verdict, exc: BaseException | None) -> None:
        """One step per verdict: failed with the assertion when the verdict failed."""
        self.record(verdict_title(v), {k: s for k, s in (("figure", v.figure), ("resolution", v.resolution),
                                                         ("limit", v.limit), ("detail", v.detail)) if s}, exc)


def tag_regression(config: pytest.Config) -> None:
    """Tag the running test ``regression`` (Allure's filters and the test's header show tags)."""
    if allure_active(config):
        import allure  # noqa: PLC0415

        dynamic: Any = allure.dynamic  # partly unannotated in allure-python
        dynamic.tag("regression")


def step_note(config: pytest.Config, title: str, params: Mapping[str, str], *, failed: str | None = None) -> None:
    """A step that records a fact (the regression check): failed with *failed* as its message."""
    AllureSteps(config).record(title, params, AssertionError(failed) if failed is not None else None)


# -- labels ------------------------------------------------------------------------------------
def _scenario(item: pytest.Item) -> str:
    """``gateway outage`` from suites/gameday/test_gateway_outage.py."""
    return item.path.stem.removeprefix("test_").replace("_", " ")


def label_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Epic, feature, story and severity for drills (``gameday`` marker or ``drill``
    fixture) and conformance checks, unless the test sets them itself."""
    if not allure_active(config):
        return
    import allure  # noqa: PLC0415

    for item in items:
        own = {m.kwargs.get("label_type") for m in item.iter_markers(name="allure_label")}
        conf = item.get_closest_marker("conformance")
        fixtures = getattr(item, "fixturenames", ())
        if conf is not None:
            rule = str(conf.args[0] if conf.args else conf.kwargs.get("rule", "?"))
            title = str(conf.args[1] if len(conf.args) > 1 else conf.kwargs.get("title", "")) or item.name
            labels = {"epic": "conformance", "feature": rule, "story": title,
                      "severity": "normal"}
        elif item.get_closest_marker("gameday") is not None or "drill" in fixtures:
            labels = {"epic": "game day", "feature": _scenario(item), "severity": "critical"}
        else:
            continue
        for kind, value in labels.items():
            if kind not in own:
                item.add_marker(allure.severity(value) if kind == "severity" else  # type: ignore[no-untyped-call]
                                getattr(allure, kind)(value))


# -- a drill's attachments -------------------------------------------------------------------------
def _title(summary: dict[str, Any]) -> str:
    head = f"{summary.get('fault')} {summary.get('region') or ''}".strip()
    return f"{head}, round {int(summary.get('round') or 0) + 1}"


def _bad(value: str) -> bool:
    return value in ("FAIL", "not reached") or "ABORTED" in value or value.startswith("REGRESSION")


def verdict_html(summary: dict[str, Any], rows: list[list[str]]) -> str:
    """One drill's verdicts as a vertical table (figure | value | detail): fits Allure's narrow pane."""
    head, *body = rows
    values = body[0] if body else ["-"] * len(head)
    cell = "padding:4px 10px;border:1px solid #ddd;vertical-align:top"
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'></head>",
           "<body style='margin:8px;font:13px/1.4 sans-serif;color:#222'>",
           f"<div style='font-weight:bold;margin-bottom:6px'>{escape(_title(summary))} "
           f"- seed {escape(str(summary.get('seed')))}</div>",
           "<table style='border-collapse:collapse'>",
           f"<tr style='background:#f0f0f0'><th style='{cell};text-align:left'>figure</th>"
           f"<th style='{cell};text-align:left'>value</th><th style='{cell};text-align:left'>detail</th></tr>"]
    # A verdict column's detail is its registry entry's (gameday.verdicts.registry).
    kinds = {k.column: k for k in VERDICTS.columns()}
    for name, value in zip(head, values, strict=True):
        kind = kinds.get(name)
        detail = kind.detail_of(summary) if kind is not None else ""
        if name == "vs history" and isinstance(summary.get("regression"), dict):
            detail = str(summary["regression"].get("message", ""))
        colour = "color:#c9302c;font-weight:bold" if _bad(value) else ""
        out.append(f"<tr><td style='{cell}'>{escape(name)}</td>"
                   f"<td style='{cell};white-space:nowrap;{colour}'>{escape(value)}</td>"
                   f"<td style='{cell}'>{escape(detail)}</td></tr>")
    out += ["</table>", "</body></html>"]
    return "\n".join(out)


def verdict_line(summary: dict[str, Any], rows: list[list[str]]) -> str:
    """The one-line verdict of a drill, as in the terminal table."""
    head, *body = rows
    values = dict(zip(head, body[0], strict=True)) if body else {}
    parts = [f"{k.column} {values[str(k.column)]}" for k in VERDICTS.columns() if k.in_line and k.column in values]
    return f"{_title(summary)}: " + ", ".join(parts)


def attach_drill(config: pytest.Config, summary: dict[str, Any], rows: list[list[str]], *,
                 files: Mapping[str, Path], context: Mapping[str, str]) -> None:
    """Attach a drill's report to the running test.

    Args:
        summary: the drill's figures (``DrillResult.summary`` plus the session's keys).
        rows: its verdict table (``table.drill_rows([summary])``).
        files: what to attach by kind: ``timeline_png``, ``rounds_png``, ``timeline_csv``,
            ``timeline_json``, ``locust_stats``, ``settings`` (files that do not exist are left out).
        context: ``target`` and ``topology`` for labels and parameters.
    """
    if not allure_active(config):
        return
    import allure  # noqa: PLC0415  (optional integration)

    title = _title(summary)
    kinds = {"timeline_png": ("timeline", allure.attachment_type.PNG),
             "rounds_png": ("switchover across rounds", allure.attachment_type.PNG),
             "timeline_csv": ("timeline (CSV)", allure.attachment_type.CSV),
             "timeline_json": ("timeline (JSON)", allure.attachment_type.JSON),
             "locust_stats": ("locust statistics (CSV)", allure.attachment_type.CSV),
             "settings": ("settings and topology (secrets redacted)", allure.attachment_type.JSON)}
    allure.attach(verdict_html(summary, rows), name=f"verdicts: {title}",
                  attachment_type=allure.attachment_type.HTML)
    for key, (name, kind) in kinds.items():
        path = files.get(key)
        if path is not None and path.is_file():
            allure.attach.file(str(path), name=f"{name}: {title}", attachment_type=kind)  # type: ignore[no-untyped-call]
    allure.attach(json.dumps(summary, indent=2, default=str), name=f"figures: {title}",
                  attachment_type=allure.attachment_type.JSON)

    dynamic: Any = allure.dynamic  # partly unannotated in allure-python
    seen = config.stash.setdefault(_SEEN_KEY, {}).setdefault(str(summary.get("test", "")), [])
    seen.append({"fault": summary.get("fault"), "region": summary.get("region"),
                 "line": verdict_line(summary, rows)})
    # Shown on the test, but excluded from Allure's history id: the seed (and the region it picks)
    # changes from run to run, and must not split one test's history into one entry per seed.
    regions = list(dict.fromkeys(str(s["region"]) for s in seen if s["region"]))
    allure.dynamic.parameter("seed", summary.get("seed"), excluded=True)
    allure.dynamic.parameter("region", ", ".join(regions) or "-", excluded=True)
    if len(seen) == 1:
        for key in ("target", "topology"):
            if context.get(key):
                allure.dynamic.parameter(key, context[key], excluded=True)
                dynamic.label(key, context[key])
    # Behaviors tab: feature = the scenario (label_items), story = the fault kind (once each).
    if [s["fault"] for s in seen].count(summary.get("fault")) == 1:
        dynamic.story(str(summary.get("fault")))
    if [s["region"] for s in seen].count(summary.get("region")) == 1:
        dynamic.label("region", str(summary.get("region") or "-"))
    items = "".join(f"<li>{escape(s['line'])}</li>" for s in seen)
    dynamic.description_html(f"<p>gameday drill verdicts (seed {escape(str(summary.get('seed')))}):</p>"
                             f"<ul>{items}</ul>")


def regression_status(config: pytest.Config, message: str, *, fail: bool) -> None:
    """At the test's teardown: put the regression in the Allure result's status details
    (a passed test otherwise shows none), and fail it with ``--gameday-fail-on-regression``."""
    if not allure_active(config):
        return
    from allure_commons.model2 import Status, StatusDetails  # noqa: PLC0415

    reporter = _reporter(config)
    test = reporter.get_test(None) if reporter is not None else None
    if test is None:
        return
    if test.status in (None, Status.PASSED):
        test.statusDetails = StatusDetails(message=message)
        if fail:
            test.status = Status.FAILED


# -- the results directory's own files ----------------------------------------------------------
CATEGORIES: list[dict[str, Any]] = [
    # Allure matches messageRegex against the whole message (Java's String.matches): (?s) lets
    # it span lines. Infrastructure and refusals first: their messages are never assertions.
    {"name": "Infrastructure: target unreachable", "matchedStatuses": ["broken", "failed"],
     "messageRegex": r"(?s).*\b(TargetUnreachable|ComponentFailed|ComponentDied|LoadCollapsed|LoadError)\b.*"},
    {"name": "Infrastructure: restore incomplete", "matchedStatuses": ["broken", "failed"],
     "messageRegex": r"(?s).*\bRestoreIncomplete\b.*"},
    {"name": "Refused drills", "matchedStatuses": ["broken", "failed", "skipped"],
     "messageRegex": r"(?s).*\b(DrillRefused|DrillLockTimeout)\b.*"},
    {"name": "Inconclusive: harness starved (neither pass nor fail)", "matchedStatuses": ["broken", "failed"],
     "messageRegex": r"(?s).*\bHarnessStarved\b.*"},
    {"name": "Switchover regressions", "matchedStatuses": ["failed", "passed"],
     "messageRegex": r"(?s)REGRESSION: switchover.*"},
    {"name": "SLO breaches (a verdict failed)", "matchedStatuses": ["failed"],
     "messageRegex": r"(?s)AssertionError.*"},
]


def categorise(status: str, message: str) -> str | None:
    """The category Allure puts a result in (the first that matches), as :data:`CATEGORIES` say."""
    for c in CATEGORIES:
        if status in c["matchedStatuses"] and re.fullmatch(c["messageRegex"], message):
            return str(c["name"])
    return None


def environment_properties(env: Mapping[str, str]) -> str:
    """Java properties text (``key = value``; ``\\``, ``=``, ``:`` and newlines escaped)."""
    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")

    return "".join(f"{esc(k).replace(' ', '_')} = {esc(v)}\n" for k, v in env.items())


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def executor(environ: Mapping[str, str], run: str = "") -> dict[str, Any]:
    """Allure's ``executor.json`` (its Executors panel): which CI ran the run, with the run's and
    the job's URLs where the environment has them (GitHub Actions ``GITHUB_*``, GitLab
    ``CI_*``, Jenkins ``JENKINS_URL``/``BUILD_*``, any other CI by ``CI`` and ``CI_*``);
    elsewhere the host and the user. *run*: the run's id (its run directory's name)."""
    server, repo, run_id = (environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run_id:
        url = f"{server}/{repo}/actions/runs/{run_id}"
        number = environ.get("GITHUB_RUN_NUMBER", "")
        job = f", job {environ['GITHUB_JOB']}" if environ.get("GITHUB_JOB") else ""
        return {"name": "GitHub Actions", "type": "github", "url": url, "buildUrl": url,
                "buildOrder": _int(number), "reportName": run,
                "buildName": f"{environ.get('GITHUB_WORKFLOW', repo)} #{number or run_id}{job}"}
    if environ.get("GITLAB_CI") and environ.get("CI_PIPELINE_URL"):
        job = environ.get("CI_JOB_NAME", "")
        return {"name": "GitLab CI", "type": "gitlab", "url": environ["CI_PIPELINE_URL"],
                "buildUrl": environ.get("CI_JOB_URL", environ["CI_PIPELINE_URL"]),
                "buildOrder": _int(environ.get("CI_PIPELINE_IID")),
                "buildName": f"{environ.get('CI_PROJECT_PATH', 'pipeline')} #{environ.get('CI_PIPELINE_IID', '?')}"
                             + (f", job {job}" if job else ""), "reportName": run}
    if environ.get("JENKINS_URL") and environ.get("BUILD_URL"):
        return {"name": "Jenkins", "type": "jenkins", "url": environ["JENKINS_URL"], "buildUrl": environ["BUILD_URL"],
                "buildOrder": _int(environ.get("BUILD_NUMBER")),
                "buildName": f"{environ.get('JOB_NAME', 'job')} #{environ.get('BUILD_NUMBER', '?')}", "reportName": run}
    if environ.get("CI", "").lower() in ("1", "true", "yes"):
        url = environ.get("CI_JOB_URL") or environ.get("CI_PIPELINE_URL") or environ.get("CI_BUILD_URL") or ""
        name = environ.get("CI_NAME") or "CI"
        out: dict[str, Any] = {"name": name, "type": name.lower().replace(" ", "-"),
                               "buildName": " ".join(p for p in (environ.get("CI_JOB_NAME", ""), run) if p) or name,
                               "reportName": run}
        if url:
            out["url"] = out["buildUrl"] = url
        return out
    user = environ.get("USER") or environ.get("LOGNAME") or _user()
    host = socket.gethostname()
    return {"name": f"{user}@{host}", "type": "local", "buildName": run or f"{user}@{host}", "reportName": run}


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a container's arbitrary uid)
        return "unknown user"


def write_results_files(directory: Path, env: Mapping[str, str], environ: Mapping[str, str],
                        run: str = "") -> list[Path]:
    """Write environment.properties, categories.json and executor.json (:func:`executor`) into
    the Allure results *directory*; returns what was written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = [directory / "environment.properties", directory / "categories.json", directory / "executor.json"]
    written[0].write_text(environment_properties(env), encoding="utf-8")
    written[1].write_text(json.dumps(CATEGORIES, indent=2), encoding="utf-8")
    written[2].write_text(json.dumps(executor(environ, run), indent=2), encoding="utf-8")
    return written
