"""Per-session wiring beneath the plugin: targets, load, drills, and what each drill recorded.

The plugin module stays thin; this module turns settings into running things and records
what each drill measured (its figures, its regression check) in the session's state and the
test's stash. What is reported from them (each drill's plots and attachments, the test
reports' properties, the terminal summary, the history and ``run.json``) is
:mod:`gameday.plugin.reporting`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gameday.drill import Drill
from gameday.errors import ConfigError, DrillRefused, GamedayError, LoadError
from gameday.faults import FAULTS, Ledger
from gameday.interfaces import Endpoints, HasSoftware, StatesTiming, Target
from gameday.load.generator import LoadGenerator
from gameday.load.runner import LoadRunner
from gameday.model import preflight
from gameday.model.timeline import FaultWindow
from gameday.model.topology import DEFAULT_TOPOLOGY, MAX_DNS_TTL, Topology, load_topology
from gameday.reports import allure_attach, plots
from gameday.reports.history import HistoryRow, check_regression, load_history
from gameday.reports.steps import NoSteps, Steps
from gameday.restore import federation_turn
from gameday.runtime.interrupts import ACK_ENV, INTERRUPTS, Interrupts, ledger_pending
from gameday.runtime.procs import RUN_DIR_ENV, ProcRegistry, run_token
from gameday.runtime.settings import OPTIONS, TARGET_HELP, Settings
from gameday.runtime.statefile import CorruptFile
from gameday.targets import registry
from gameday.targets.profile import LoadedProfile, load_profile
from gameday.verdicts.predict import from_topology as timing_from_topology
from gameday.verdicts.predict import predict
from gameday.verdicts.result import DrillResult

log = logging.getLogger(__name__)

DRILLS_KEY = pytest.StashKey[list[dict[str, Any]]]()
PENDING_KEY = pytest.StashKey[list[tuple[DrillResult, dict[str, Any], int, "LoadGenerator | None"]]]()
"""Drills of the test whose plots and attachments are still to be written (at the call's end)."""
STATE_KEY = pytest.StashKey["SessionState"]()
"""The session's state (set by the plugin at configure)."""
REGRESSION_KEY = pytest.StashKey[tuple[str, bool]]()
HISTORY_PLUGIN = "gameday_history"
"""The name the history reporter (:mod:`gameday.plugin.reporters`) registers under; while it is
switched off (``-p no:gameday_history``) no drill is judged against the history."""
"""A drill of the test regressed: the message, and whether the run fails on it."""
RESULTS_KEY = pytest.StashKey[list[DrillResult]]()
"""The test's drill results, in the order of its DRILLS_KEY summaries (their verdicts are
asserted after the summaries are written: they are folded in when the test's call ends)."""

@dataclass
class FaultRecord:
    """A fault this process injected, as the interruption summary reports it."""

    what: str
    t_fault: float
    t_revert: float | None
    t_done: float
    """When its fault block ended (revert and steady-state wait done): until then a signal
    finds it in effect, even once the revert call itself has returned."""


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
    round_switchovers: dict[str, list[float]] = field(default_factory=dict)
    """Test (without parameters) -> switchover of each round this process ran (the rounds plot)."""
    regressed: list[str] = field(default_factory=list)
    """Drills whose switchover regressed against the history (the exit summary)."""
    failed_tests: set[str] = field(default_factory=set)
    """Node ids of the tests that failed (the history marks their drills failed), at the end."""
    history: list[HistoryRow] | None = None
    """reports/history.jsonl as it was when this process first read it (previous runs only)."""
    started: float = field(default_factory=time.time)
    interrupts: Interrupts = INTERRUPTS
    faults: list[FaultRecord] = field(default_factory=list)
    """Every fault injected in this process, reverted or not (the interruption summary)."""
    swept: list[str] = field(default_factory=list)
    """Faults the session itself reverted at teardown (a drill interrupted mid-injection)."""
    software: dict[str, str] = field(default_factory=dict)
    """What the target said its federation runs (:class:`HasSoftware`), for the report's
    environment; under xdist each worker sends it once with a test report."""
    software_sent: bool = False
    recorded: list[dict[str, Any]] = field(default_factory=list)
    """Every drill summary this process recorded; those no test report carried (the run was
    interrupted before the test's teardown report) still reach the table and the history,
    marked aborted."""
    reported: set[int] = field(default_factory=set)
    """``id()`` of the summaries a teardown report carried."""
    summarised: bool = False
    """gameday's terminal summary has run (pytest runs it for some exit statuses only)."""
    interruption_said: bool = False
    """The interruption summary has been written (:mod:`gameday.plugin.interrupted`)."""

    session_pid: int = field(default_factory=os.getpid)
    """The run's main process: this one, or the pytest-xdist controller of this worker."""

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.settings.reports / ".gameday" / "ledger.json", session_pid=self.session_pid)

    @property
    def procs(self) -> ProcRegistry:
        return ProcRegistry(self.settings.reports / ".gameday" / "procs")


def with_seed(settings: Settings, seed: int) -> Settings:
    return dataclasses.replace(settings, seed=seed, seed_was_given=True)


def prepare(config: pytest.Config, state: SessionState) -> None:
    """Validate the topology and create the run directory (before any test runs).

    Raises:
        pytest.UsageError: the topology file is invalid (names file and field).
    """
    workers = getattr(config.option, "numprocesses", None)  # pytest-xdist's -n, when installed
    # kube and kind with a profile drill the team's own federation, like external does
    profiled = state.settings.target == "external" or (state.settings.profile is not None
                                                       and state.settings.target in ("kube", "kind"))
    if profiled and workers not in (None, 0, "0"):
        # Each xdist worker has a federation of its own on the other targets; an external
        # federation is one, so two workers would break it at the same time.
        raise pytest.UsageError(f"gameday: --gameday-target={state.settings.target} drills the one federation "
                                f"its profile describes; -n {workers} would run drills in several pytest-xdist "
                                "workers against it at once: run without -n")
    try:
        if profiled:
            assert state.settings.profile is not None  # settings.resolve requires it for external
            state.profile = load_profile(state.settings.profile)
            state.topology = state.profile.profile.as_topology()
        else:
            state.topology = load_topology(state.settings.topology)
        # Timings that feed a verdict must let it fail. The topology's run the federation gameday
        # builds; a profile's federation detects staleness its own way (its timing is not checked).
        preflight.check_verdict_timings(
            None if profiled else state.topology.timing, state.settings.slo,
            offered=state.settings.load.rate or state.topology.load.rate,
            where=str(state.settings.profile if profiled else
                      state.settings.topology or f"the built-in topology {DEFAULT_TOPOLOGY}"))
    except ConfigError as exc:
        raise pytest.UsageError(f"gameday: {exc}") from exc
    worker_input = getattr(config, "workerinput", None)
    if worker_input is None:
        # What the target needs from this machine (kind/docker, a reachable API server, the
        # allow-list), before collection: one line, nothing created. The controller checks
        # once; xdist workers start only after it passed.
        try:
            registry.check(state.settings.target, state.topology, state.settings)
        except GamedayError as exc:
            raise pytest.UsageError(f"gameday: --gameday-target={state.settings.target}: {exc}") from exc
    if worker_input is not None and "gameday_session_pid" in worker_input:
        state.session_pid = int(worker_input["gameday_session_pid"])
    if worker_input is not None and "gameday_run_dir" in worker_input:
        state.run_dir = Path(worker_input["gameday_run_dir"])
    elif os.environ.get(RUN_DIR_ENV):
        state.run_dir = Path(os.environ[RUN_DIR_ENV])
    else:
        stamp, pid, rand = run_token().rsplit("-", 2)
        state.run_dir = state.settings.reports / "runs" / f"{stamp}-seed{state.settings.seed}-{pid}-{rand}"


# -- signals: SIGTERM restores like Ctrl-C, and nothing interrupts a revert ------------------------
def install_signal_handlers(config: pytest.Config, state: SessionState) -> None:
    """SIGINT and SIGTERM: the first reverts and stops, later ones report (:mod:`gameday.runtime.interrupts`)."""
    ack = None
    if getattr(config, "workerinput", None) is None:
        # Only the process `gameday drill` started acknowledges; its children (xdist
        # workers, components, locust) must not inherit the file.
        ack = os.environ.pop(ACK_ENV, None)
    state.interrupts.describe = lambda: describe_pending(state)
    state.interrupts.install(ack_path=Path(ack) if ack else None)


def keep_stderr() -> None:
    """Give the interrupt messages a copy of the real stderr (call before capture starts)."""
    if INTERRUPTS.err_fd is None:
        with contextlib.suppress(OSError):
            INTERRUPTS.err_fd = os.dup(2)


def uninstall_signal_handlers(state: SessionState) -> None:
    state.interrupts.uninstall()


def describe_pending(state: SessionState) -> str:
    """What is still being reverted or stopped, for the "still reverting" line. Reads the
    ledger without its lock: this runs in a signal handler, which must never wait."""
    busy = state.interrupts.busy_with()
    pending = ledger_pending(state.ledger.path, os.getpid())
    parts = []
    if pending:
        parts.append(", ".join(pending) + " (in the ledger, not reverted yet)")
    parts += busy
    return "; ".join(parts)  # empty: nothing is being reverted (the handler says so)


def clients_ttl(target: Target, topology: Topology) -> float:
    """Seconds the drill's clients hold a DNS answer: the TTL the target states (an external
    target's profile, else its DNS server's answers at the last health check; unknown: the
    longest the harness accepts), else the topology's."""
    if isinstance(target, StatesTiming):
        ttl = target.stated_timing().dns_ttl
        return float(ttl) if ttl is not None else float(MAX_DNS_TTL)
    return float(topology.timing.dns_ttl)


# -- targets ---------------------------------------------------------------------------------------------
def builtin_target_names() -> list[str]:
    return registry.names()


def builtin_target(name: str, topology: Topology, settings: Settings, workdir: Path) -> Target | None:
    """The built-in target *name* (the hook's fallback), or None when there is none."""
    return registry.make(name, topology, settings, workdir) if name in registry.REGISTRY else None


def target_names(config: pytest.Config) -> list[str]:
    """Every target name ``--gameday-target`` accepts: the built-ins and the hooks' names."""
    answers = config.hook.pytest_gameday_target_names(config=config)
    return sorted({str(n) for names in answers for n in names})


def make_target(state: SessionState, workdir: Path, config: pytest.Config | None = None) -> Target:
    """Build the configured target (not yet up): the ``pytest_gameday_make_target`` hook
    answers first (a conftest's or plugin's target), then the built-ins (no *config*: only
    the built-ins).

    Tools, kubeconfig contexts, the allow-list or a profile are checked by the target's
    factory here, when it is built, so a missing piece fails the run before anything is
    created or broken.

    Raises:
        pytest.UsageError: the factory refused (its message), no implementation answered
            the name, or the answer is not a target.
    """
    assert state.topology is not None
    name, s = state.settings.target, state.settings
    try:
        if config is None:
            target = builtin_target(name, state.topology, s, workdir)
        else:
            target = config.hook.pytest_gameday_make_target(config=config, name=name, topology=state.topology,
                                                            settings=s, workdir=workdir)
    except GamedayError as exc:
        raise pytest.UsageError(f"gameday: --gameday-target={name}: {exc}") from exc
    if target is None:
        known = target_names(config) if config is not None else registry.names()
        raise pytest.UsageError(f"gameday: --gameday-target={name}: unknown target; expected one of "
                                f"{', '.join(known)}, or {TARGET_HELP}")
    if not isinstance(target, Target):
        missing = [m for m in _TARGET_MEMBERS if not hasattr(target, m)]
        raise pytest.UsageError(f"gameday: --gameday-target={name}: the pytest_gameday_make_target hook returned "
                                f"{type(target).__qualname__}, which is not a gameday Target (missing: "
                                f"{', '.join(missing)}; see gameday.interfaces.Target)")
    return target


# What the protocol declares (its methods and attributes), named when an answer lacks some.
_TARGET_MEMBERS = (*Target.__annotations__, *(n for n in vars(Target) if not n.startswith("_")))


def console(config: pytest.Config, line: str) -> None:
    """Write *line* on the terminal now, even while a test's output is captured."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if tr is None:
        state = config.stash.get(STATE_KEY, None)
        (state.interrupts if state is not None else INTERRUPTS).say(line)
        return
    with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
        tr.write_line(line)


def check_ledger(config: pytest.Config, state: SessionState) -> None:
    """Before the federation starts: a ledger that cannot be read, or that holds entries no
    target of this run can revert, is said on the console, and refused unless
    ``--gameday-ignore-ledger-problems`` (then an unreadable one is moved aside, as
    ``gameday restore`` does, and unrevertable entries are kept).

    Raises:
        DrillRefused: either problem, without the option; nothing was started or injected.
    """
    ledger = state.ledger
    go_on = state.settings.ignore_ledger_problems
    fix = (f"run `gameday restore --reports {state.settings.reports.absolute()}` (it reverts what it can, reports "
           "the rest and moves an unreadable ledger aside), or --gameday-ignore-ledger-problems to drill anyway")
    try:
        entries = ledger.pending()
    except CorruptFile as exc:
        what = (f"gameday: the fault ledger {exc.path} is unreadable ({exc.problem}): faults a killed run "
                "recorded there may still be in effect")
        if not go_on:
            console(config, f"{what}; refusing to drill: {fix}")
            raise DrillRefused(f"{what}; nothing was started or injected: {fix}") from None  # all said
        console(config, f"{what}; moved aside to {ledger.quarantine()}; going on (--gameday-ignore-ledger-problems)")
        return
    known = set(target_names(config))
    lost = [e for e in entries if e.attach is None and e.target not in known]
    if not lost:
        return
    names = "; ".join(f"{e.what} on target {e.target!r} (entry {e.id}, pid {e.runner_pid})" for e in lost)
    what = (f"gameday: the fault ledger {ledger.path} holds {len(lost)} entr{'y' if len(lost) == 1 else 'ies'} "
            f"no target of this run can revert: {names}; the target {'is' if len(lost) == 1 else 'are'} not "
            f"registered here (known: {', '.join(sorted(known))}) and no attach function was recorded")
    if not go_on:
        console(config, f"{what}; refusing to drill: {fix} (a plugin's target: `gameday restore -p MODULE`; "
                "gone for good: `gameday restore --forget ID`)")
        raise DrillRefused(f"{what}; nothing was started or injected: {fix}")
    console(config, f"{what}; kept for `gameday restore`; going on (--gameday-ignore-ledger-problems)")


@contextmanager
def federation(config: pytest.Config, state: SessionState) -> Iterator[Target]:
    check_ledger(config, state)
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    workdir = state.settings.reports / ".gameday" / "federations" / f"{worker}-{run_token()}"
    target = make_target(state, workdir, config)
    try:
        target.up()
        target.deploy()
        if isinstance(target, HasSoftware):
            state.software = dict(target.software())
        state.interrupts.checkpoint(f"the {target.name} federation is up")
        yield target
    finally:
        with state.interrupts.shielded(f"stopping the {target.name} federation"):
            try:
                revert_own_leftovers(state, target)
            finally:
                target.down()


def revert_own_leftovers(state: SessionState, target: Target) -> None:
    """Revert what this process left in the ledger for *target* (a drill interrupted
    while injecting never reached its revert), before the target is torn down."""
    ref = target.ref()
    for entry in state.ledger.pending():
        if entry.runner_pid != os.getpid() or entry.target_ref != ref:
            continue
        what = f"{entry.kind} {entry.region or ''}".strip()
        try:
            # On a shared federation, in turn with the other runs' drills (as the fault was).
            with federation_turn(target, timeout=state.settings.drill_lock_timeout,
                                 what=f"revert of {what} left by its drill"):
                target.revert(entry.kind, entry.region, dict(entry.params))
                target.check_health(timeout=30)
        except GamedayError as exc:
            # Not raised: the target must still be torn down; the entry stays for `gameday restore`.
            log.warning("could not revert %s left by its drill: %s; run `gameday restore`", what, exc)
            continue
        state.ledger.remove(entry.id)
        state.swept.append(what)


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
        unknown = sorted(set(m.kwargs) - {"rate", "users"})
        if unknown:
            raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.gameday: unknown argument(s) {unknown} "
                                    "(valid: rate, users)")
        # The same bounds as --gameday-rate / --gameday-users: a marker is no way around them.
        checked: dict[str, Any] = {}
        specs = {o.name: o for o in OPTIONS}
        for name, value in m.kwargs.items():
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.gameday({name}={value!r}): expected "
                                        f"{specs[name].kind.expected}")
            try:
                checked[name] = specs[name].kind(str(value))
            except ValueError as exc:
                raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.gameday({name}={value!r}): {exc}") from None
        return cls(**checked)


def builtin_load(state: SessionState, endpoints: Endpoints, *, users: int, rate: float, workdir: Path) -> LoadRunner:
    """gameday's own load generator, locust, with the run's ``--gameday-*`` load settings."""
    s = state.settings.load
    return LoadRunner(endpoints, users=users, rate=rate, workdir=workdir, locustfile=s.locustfile, workers=s.workers,
                      registry=state.procs, expect_workers=s.expect_workers, master_bind=s.master_bind,
                      workers_wait=s.workers_wait)


@contextmanager
def load(config: pytest.Config, state: SessionState, target: Target, node: pytest.Item) -> Iterator[LoadGenerator]:
    """The test's load generator (``pytest_gameday_make_load``: a conftest's, else locust),
    started, and stopped on every way out."""
    assert state.topology is not None
    s = state.settings.load
    marker = GamedayMarker.of(node)
    workdir = state.run_dir / "load" / safe_nodeid(node.nodeid)
    workdir.mkdir(parents=True, exist_ok=True)
    runner = config.hook.pytest_gameday_make_load(
        config=config, endpoints=target.endpoints(), users=marker.users or s.users or state.topology.load.users,
        rate=marker.rate or s.rate or state.topology.load.rate, workdir=workdir)
    if not isinstance(runner, LoadGenerator):
        raise LoadError(f"pytest_gameday_make_load returned {type(runner).__name__}, not a LoadGenerator "
                        f"(gameday.load.generator; subclass RecordedLoad)")
    try:
        runner.start()  # inside the try: a signal while locust starts must still stop it
        state.interrupts.checkpoint("the load started")
        yield runner
    finally:
        with state.interrupts.shielded("stopping the load generator"):
            runner.stop()


def safe_nodeid(nodeid: str) -> str:
    """A test's node id as a directory name (its drills' files, its load generator's)."""
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
          runner: LoadGenerator | None, round_index: int) -> Iterator[Drill]:
    assert state.topology is not None
    # The timeline plot's matplotlib import, while the drill waits for its steady state and
    # its fault (~0.5 s of CPU less on the way from the last verdict to the test's end).
    plots.prewarm()
    summaries: list[dict[str, Any]] = []
    node.stash[DRILLS_KEY] = summaries
    results: list[DrillResult] = []
    node.stash[RESULTS_KEY] = results

    def on_result(res: DrillResult) -> None:
        # Called as each fault's block ends, still inside the test, so that Allure
        # attaches the figures to the test itself rather than to a fixture teardown.
        try:
            w = res.fault
            state.faults.append(FaultRecord(f"{w.kind} {w.region or ''}".strip(), w.t_fault, w.t_revert,
                                            time.monotonic()))
            results.append(res)
            summaries.append(_record_result(config, state, node, res, runner=runner, index=len(summaries)))
        finally:
            state.interrupts.release("revert")  # the fault block is done: a deferred signal may stop us now

    def on_block_end(window: FaultWindow) -> None:
        # From the end of the fault's block a signal waits: the revert, the steady-state wait
        # after it and the result's record are finished first (released in on_result).
        state.interrupts.hold("revert", f"reverting {window.kind} {window.region or ''}".strip())

    steps: Steps = allure_attach.AllureSteps(config) if allure_attach.allure_active(config) else NoSteps()
    d = Drill(
        target, state.settings, seed_key=node.nodeid.split("[")[0], ledger=state.ledger,
        offered=runner.rate if runner else (state.settings.load.rate or state.topology.load.rate),
        margin=state.topology.load.margin, load=runner, progress=_progress_writer(config),
        round_index=round_index, dns_ttl=clients_ttl(target, state.topology),
        on_result=on_result, on_block_end=on_block_end, steps=steps, interrupts=state.interrupts,
        skip_unavailable_faults=node.get_closest_marker("conformance") is not None,
    )
    yield d


def _record_result(config: pytest.Config, state: SessionState, node: pytest.Item, res: DrillResult, *,
                   runner: LoadGenerator | None, index: int) -> dict[str, Any]:
    out_dir = state.run_dir / "drills" / safe_nodeid(node.nodeid)
    summary = res.summary()
    summary["test"] = node.nodeid
    state.recorded.append(summary)
    if runner is not None and res.fault.t_revert is not None:
        runner.poll()
        achieved = runner.achieved_rate(res.fault.t_fault, res.fault.t_revert)
        summary["load"] = {"target_rps": runner.rate, "achieved_rps": round(achieved, 2),
                           "dropped": runner.dropped_between(res.fault.t_fault, res.fault.t_revert)}
    base = node.nodeid.split("[")[0]
    switchover = summary.get("switchover")
    value = switchover.get("value_s") if isinstance(switchover, dict) else None
    if state.history is None:
        state.history = load_history(history_path(state.settings))
    if res.removes_region and res.switchover_observed and config.pluginmanager.has_plugin(HISTORY_PLUGIN):
        check = check_regression(state.history, value, test=base, fault=res.fault.kind, aborted=res.fault.aborted)
        summary["regression"] = {"status": check.status, "message": check.message, "flag": check.flag}
        fail = check.status == "regression" and state.settings.fail_on_regression
        if allure_attach.allure_active(config):
            allure_attach.step_note(config, f"vs history: {check.message}",
                                    {"median_s": "-" if check.median_s is None else f"{check.median_s:.2f}",
                                     "previous runs": str(check.previous)},
                                    failed=check.message if check.status == "regression" else None)
        if check.status == "regression":
            node.stash[REGRESSION_KEY] = (check.message, fail)
            allure_attach.tag_regression(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"figures-{index}.json").write_text(json.dumps(summary, indent=2, default=str))
    if value is not None:
        state.round_switchovers.setdefault(base, []).append(float(value))
    # The plots, raw data and attachments are written when the test's call ends
    # (gameday.plugin.reporting.write_drill_reports): not here, on the way out of the fault
    # block, where drawing would delay the drill's own error (a casualty must fail the drill
    # at once).
    node.stash.setdefault(PENDING_KEY, []).append((res, summary, index, runner))
    return summary


HEADLINE_FAULT = "gateway_down"
"""The fault the run header predicts (the headline drill's); each drill prints and records its own."""


def prediction_header(state: SessionState) -> list[str]:
    """The run header's prediction of the headline fault from the federation's stated timing
    (DESIGN.md §8); a profile's TTL is checked against the DNS server's answers before each drill."""
    fault = FAULTS[HEADLINE_FAULT]
    if state.profile is not None:
        from gameday.targets.external import profile_timing  # noqa: PLC0415  (only with a profile)

        timing = profile_timing(state.profile)
        note = " (TTL checked against the DNS server's answers before each drill)"
    elif state.topology is not None:
        timing = timing_from_topology(state.topology, f"topology {state.topology.name!r}")
        note = ""
    else:
        return []
    p = predict(timing, fault.name, fault.gateway_check_fails, entry_nodes_route=True)
    return [f"gameday: prediction for {fault.name}, from {timing.source}{note}: {p.summary()}"]


def history_path(settings: Settings) -> Path:
    """The run history every run appends to: ``<reports>/history.jsonl``."""
    return settings.reports / "history.jsonl"
