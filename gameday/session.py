"""Per-session wiring beneath the plugin: targets, load, drills, and what gets reported.

The plugin module stays thin; this module turns settings into running things and
collects what the drills measured for the terminal summary, the run file and Allure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from gameday.drill import Drill
from gameday.errors import ConfigError, GamedayError
from gameday.faults import Ledger
from gameday.load.runner import LoadRunner
from gameday.profile import LoadedProfile, load_profile
from gameday.reports import allure_attach, table
from gameday.reports.timeline_svg import render_timeline_svg
from gameday.settings import Settings
from gameday.targets.base import Target
from gameday.topology import Topology, load_topology
from gameday.verdicts.result import DrillResult

log = logging.getLogger(__name__)

DRILLS_KEY = pytest.StashKey[list[dict[str, Any]]]()
RESULTS_KEY = pytest.StashKey[list[DrillResult]]()
"""The test's drill results, in the order of its DRILLS_KEY summaries (their verdicts are
asserted after the summaries are written: they are folded in when the test's call ends)."""


@dataclass
class SessionState:
    """What one pytest process knows about its gameday run."""

    settings: Settings
    topology: Topology | None = None
    """The topology; for the external target, derived from the profile (its regions, load, timing)."""
    profile: LoadedProfile | None = None
    """The external target's profile."""
    run_dir: Path = Path("reports")
    drills: list[dict[str, Any]] = field(default_factory=list)
    conformance: list[dict[str, Any]] = field(default_factory=list)
    previous_sigterm: Any = None
    started: float = field(default_factory=time.time)

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.settings.reports / ".gameday" / "ledger.json")


def with_seed(settings: Settings, seed: int) -> Settings:
    return dataclasses.replace(settings, seed=seed, seed_was_given=True)


def prepare(config: pytest.Config, state: SessionState) -> None:
    """Validate the topology and create the run directory (before any test runs).

    Raises:
        pytest.UsageError: the topology file is invalid (names file and field).
    """
    try:
        if state.settings.target == "external":
            assert state.settings.profile is not None  # settings.resolve requires it
            state.profile = load_profile(state.settings.profile)
            state.topology = state.profile.profile.as_topology()
        else:
            state.topology = load_topology(state.settings.topology)
    except ConfigError as exc:
        raise pytest.UsageError(f"gameday: {exc}") from exc
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None and "gameday_run_dir" in worker_input:
        state.run_dir = Path(worker_input["gameday_run_dir"])
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        state.run_dir = state.settings.reports / "runs" / f"{stamp}-seed{state.settings.seed}"


# -- signals: SIGTERM restores like Ctrl-C ---------------------------------------------------------
def install_sigterm_handler(state: SessionState) -> None:
    """Turn SIGTERM into KeyboardInterrupt so every ``finally`` (fault reverts) runs."""

    def _on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        state.previous_sigterm = signal.signal(signal.SIGTERM, _on_term)


def uninstall_sigterm_handler(state: SessionState) -> None:
    if state.previous_sigterm is not None:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, state.previous_sigterm)


# -- targets ---------------------------------------------------------------------------------------------
def make_target(state: SessionState, workdir: Path) -> Target:
    """Build the configured target (not yet up)."""
    assert state.topology is not None
    name = state.settings.target
    if name == "local":
        from gameday.targets.local import LocalTarget  # noqa: PLC0415

        return LocalTarget(state.topology, workdir)
    # kind/kube: tools, kubeconfig contexts and the allow-list are checked here, when the
    # target is built, so a missing piece fails the run before anything is created or broken.
    s = state.settings
    try:
        if name == "external":
            from gameday.targets.external import ExternalTarget  # noqa: PLC0415

            assert state.profile is not None  # prepare() loaded it
            return ExternalTarget(state.profile, workdir)
        if name == "kind":
            from gameday.targets.kind import KindTarget  # noqa: PLC0415  (imports kubernetes)

            return KindTarget(state.topology, workdir, dry_run=s.dry_run)
        if name == "kube":
            from gameday.targets.kube import KubeTarget  # noqa: PLC0415  (imports kubernetes)

            return KubeTarget(state.topology, workdir, allow=s.allow_context, dry_run=s.dry_run)
    except GamedayError as exc:
        raise pytest.UsageError(f"gameday: --gameday-target={name}: {exc}") from exc
    raise pytest.UsageError(f"gameday: --gameday-target={name}: unknown target; expected local, kind, kube or external")


@contextmanager
def federation(config: pytest.Config, state: SessionState) -> Iterator[Target]:
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    workdir = state.settings.reports / ".gameday" / "federations" / f"{worker}-{int(time.time())}"
    target = make_target(state, workdir)
    try:
        target.up()
        target.deploy()
        yield target
    finally:
        target.down()


@dataclass(frozen=True, kw_only=True)
class GamedayMarker:
    """``@pytest.mark.gameday(rate=..., users=...)``: per-test load overrides."""

    rate: float | None = None
    users: int | None = None

    @classmethod
    def of(cls, node: pytest.Item) -> GamedayMarker:
        m = node.get_closest_marker("gameday")
        if m is None:
            return cls()
        if m.args:
            raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.gameday takes keyword arguments only")
        try:
            return cls(**m.kwargs)
        except TypeError as exc:
            raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.gameday: {exc} (valid: rate, users)") from exc


@contextmanager
def load(config: pytest.Config, state: SessionState, target: Target, node: pytest.Item) -> Iterator[LoadRunner]:
    assert state.topology is not None
    s = state.settings.load
    marker = GamedayMarker.of(node)
    runner = LoadRunner(
        target.endpoints(),
        users=marker.users or s.users or state.topology.load.users,
        rate=marker.rate or s.rate or state.topology.load.rate,
        workdir=state.run_dir / "load" / _safe(node.nodeid),
        locustfile=s.locustfile,
        workers=s.workers,
    )
    runner.start()
    try:
        yield runner
    finally:
        runner.stop()


def _safe(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)[-120:]


def _progress_writer(config: pytest.Config) -> Any:
    """The live progress line: rewritten in place on a terminal, a line every 5 s in CI logs.

    Called from the test's thread only: it suspends output capture while it writes, the
    way pytest's own live logging does.
    """
    tr = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if tr is None or getattr(config, "workerinput", None) is not None:
        return lambda line: None  # xdist workers have no terminal
    tty = bool(tr.isatty)
    last = [0.0]

    def write(line: str) -> None:
        if not tty and time.monotonic() - last[0] < 5.0:
            return
        last[0] = time.monotonic()
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            if tty:
                tr.rewrite(line, erase=True)
            else:
                tr.write_line(line)

    return write


@contextmanager
def drill(config: pytest.Config, state: SessionState, target: Target, node: pytest.Item, *,
          runner: LoadRunner | None, round_index: int) -> Iterator[Drill]:
    assert state.topology is not None
    summaries: list[dict[str, Any]] = []
    node.stash[DRILLS_KEY] = summaries
    results: list[DrillResult] = []
    node.stash[RESULTS_KEY] = results

    def on_result(res: DrillResult) -> None:
        results.append(res)
        summaries.append(_record_result(config, state, node, res, runner=runner, index=len(summaries)))

    d = Drill(
        target, state.settings, seed_key=node.nodeid.split("[")[0], ledger=state.ledger,
        offered=runner.rate if runner else (state.settings.load.rate or state.topology.load.rate),
        margin=state.topology.load.margin, load=runner, progress=_progress_writer(config),
        # An external target knows its TTL from its profile or its DNS server's answers.
        round_index=round_index, dns_ttl=float(getattr(target, "dns_ttl", state.topology.timing.dns_ttl)),
        # Called as each fault's block ends, still inside the test, so that Allure
        # attaches the figures to the test itself rather than to a fixture teardown.
        on_result=on_result,
    )
    yield d


def _record_result(config: pytest.Config, state: SessionState, node: pytest.Item, res: DrillResult, *,
                   runner: LoadRunner | None, index: int) -> dict[str, Any]:
    out_dir = state.run_dir / "drills" / _safe(node.nodeid)
    summary = res.summary()
    summary["test"] = node.nodeid
    if runner is not None and res.fault.t_revert is not None:
        runner.poll()
        achieved = runner.achieved_rate(res.fault.t_fault, res.fault.t_revert)
        summary["load"] = {"target_rps": runner.rate, "achieved_rps": round(achieved, 2)}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"figures-{index}.json").write_text(json.dumps(summary, indent=2, default=str))
    svg = render_timeline_svg(res)
    (out_dir / f"timeline-{index}.svg").write_text(svg)
    allure_attach.attach_drill(config, summary, svg, table.drill_rows([summary]))
    return summary


def annotate_report(item: pytest.Item, report: pytest.TestReport) -> None:
    """Attach drill figures and conformance rule ids to the report (travels through xdist)."""
    if report.when == "call":
        judge_not_applicable(item, report)
    if report.when == "teardown":
        for s in item.stash.get(DRILLS_KEY, []):
            report.user_properties.append(("gameday_drill", json.dumps(s, default=str)))
    marker = item.get_closest_marker("conformance")
    if marker is not None and (report.when == "call" or (report.when == "setup" and report.outcome != "passed")):
        rule = marker.args[0] if marker.args else marker.kwargs.get("rule", "?")
        title = marker.args[1] if len(marker.args) > 1 else marker.kwargs.get("title", "")
        report.user_properties.append(("gameday_conformance", json.dumps({"rule": rule, "title": title})))


def judge_not_applicable(item: pytest.Item, report: pytest.TestReport) -> None:
    """When the test's call ends: fold the verdicts its drills asserted into their summaries,
    add a JUnit property ``gameday_na`` per verdict that was not applicable, and report the test
    *skipped* (with the reasons) when every verdict it asserted was not applicable: a drill
    with no inputs must not pass."""
    results = item.stash.get(RESULTS_KEY, [])
    summaries: list[dict[str, Any]] = item.stash.get(DRILLS_KEY, [])
    for summary, res in zip(summaries, results, strict=False):
        summary["verdicts"] = [v.as_dict() for v in res.verdicts]
    verdicts = [v for res in results for v in res.verdicts]
    na = [v for v in verdicts if v.outcome == "n/a"]
    for v in na:
        report.user_properties.append(("gameday_na", f"{v.name}: {v}"))
    if report.passed and verdicts and len(na) == len(verdicts):
        reasons = "; ".join(dict.fromkeys(f"{v.name} {v}" for v in na))
        line = item.location[1]
        report.outcome = "skipped"
        report.longrepr = (str(item.path), (line or 0) + 1,
                           f"Skipped: every verdict this test asserted was not applicable: {reasons}")


def terminal_summary(tr: Any, state: SessionState) -> None:
    drills: list[dict[str, Any]] = []
    rules: list[dict[str, Any]] = []
    for reports in tr.stats.values():
        for rep in reports:
            for key, value in getattr(rep, "user_properties", []):
                if key == "gameday_drill":
                    drills.append(json.loads(value))
                elif key == "gameday_conformance":
                    entry = json.loads(value)
                    entry["outcome"] = rep.outcome
                    entry["test"] = rep.nodeid
                    entry["reason"] = table.one_line_reason(rep)
                    rules.append(entry)
    state.drills = drills
    state.conformance = rules
    if drills:
        tr.write_sep("=", "gameday drill verdicts")
        for line in table.render_drills(drills):
            tr.write_line(line)
        if state.settings.rounds > 1:
            for line in table.render_rounds(drills):
                tr.write_line(line)
        tr.write_line(f"figures, timelines and records: {state.run_dir}")
    if rules:
        tr.write_sep("=", "gameday conformance summary")
        for line in table.render_conformance(rules):
            tr.write_line(line)
    write_run_file(tr.config, state)


def write_run_file(config: pytest.Config, state: SessionState) -> None:
    if getattr(config, "workerinput", None) is not None or not (state.drills or state.conformance):
        return  # the controller writes the run file, and only for runs that drilled or checked
    data = {
        "seed": state.settings.seed, "target": state.settings.target,
        "topology": str(state.settings.topology or "clusters/local.yaml"),
        "started": state.started, "finished": time.time(), "argv": sys.argv,
        "drills": state.drills, "conformance": state.conformance,
    }
    with contextlib.suppress(OSError):
        state.run_dir.mkdir(parents=True, exist_ok=True)
        (state.run_dir / "run.json").write_text(json.dumps(data, indent=2, default=str))
