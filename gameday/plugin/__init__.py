"""gameday's pytest plugin: options, markers and fixtures. The logic lives below it.

Fixtures: ``gameday_settings``, ``slo``, ``federation`` (session), ``load``, ``drill``.
Markers: ``gameday`` (a destructive drill), ``conformance(rule)`` (a non-destructive
check of one DESIGN.md rule).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from gameday.errors import ConfigError, HarnessStarved
from gameday.plugin import interrupted as ginterrupted
from gameday.plugin import reporters as greporters
from gameday.plugin import reporting as greporting
from gameday.plugin import session as gsession
from gameday.runtime.interrupts import give_every_frame_a_line
from gameday.runtime.settings import OPTIONS, SLO, ExistingFile, OptionSpec, Settings, WritableDirectory, resolve
from gameday.verdicts.harness import EXIT_INCONCLUSIVE

# The conformance fixtures (view, timing, converge_s, settled, full_weight) are part of the
# plugin, so shipped rule checks can be selected into a team's own test modules.
pytest_plugins = ["gameday.conformance.fixtures"]

SETTINGS_KEY = pytest.StashKey[Settings]()

MARKERS = (
    "gameday(*, rate=None, users=None): a destructive drill - breaks the federation on purpose and "
    "restores it (needs the `drill` fixture; never runs concurrently with another drill on the same "
    "federation); rate/users override the load for this test",
    "conformance(rule, title=''): a non-destructive (or self-restoring) check of one DESIGN.md rule, "
    "e.g. conformance('R2', 'a 1-2 probe blip moves no traffic'); summarised at the end of the run",
)
"""The markers the plugin registers, as ``pytest --markers`` lists them (and docs/reference/api.md)."""
STATE_KEY = gsession.STATE_KEY


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from gameday.plugin import hooks  # noqa: PLC0415  (pytest's way: specs are added as the plugin registers)

    pluginmanager.add_hookspecs(hooks)


@pytest.hookimpl(trylast=True)
def pytest_gameday_make_target(config: pytest.Config, name: str, topology: Any, settings: Settings,
                               workdir: Any) -> Any:
    """The built-in targets, when no conftest or plugin answered *name* first."""
    return gsession.builtin_target(name, topology, settings, workdir)


def pytest_gameday_target_names(config: pytest.Config) -> list[str]:
    return gsession.builtin_target_names()


@pytest.hookimpl(trylast=True)
def pytest_gameday_make_load(config: pytest.Config, endpoints: Any, users: int, rate: float, workdir: Any) -> Any:
    """gameday's own load, locust, when no conftest or plugin answered first."""
    return gsession.builtin_load(config.stash[STATE_KEY], endpoints, users=users, rate=rate, workdir=workdir)


def argparse_help(text: str) -> str:
    """*text* as an argparse help string that renders as written (each ``%`` doubled)."""
    return text.replace("%", "%%")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gameday", "gameday: failover game days and conformance checks")
    for opt in OPTIONS:
        flag = f"--gameday-{opt.name}"
        ini = opt.dest
        # argparse expands a help string with ``%`` (``%(default)s``): a bare ``%`` ("50 %") would
        # render the whole action's attributes. The ini help is shown as written.
        cli_help = f"{argparse_help(opt.help)} [ini: {ini}, env: {opt.env}]"
        if opt.flag:
            group.addoption(flag, action="store_true", default=None, dest=opt.dest,
                            help=cli_help)
            # a string, not type="bool": our validator names the key when the value is bad
            parser.addini(ini, f"{opt.help} (true/false)", default=None)
        elif opt.name == "allow-context":
            group.addoption(flag, action="append", default=None, dest=opt.dest, metavar="GLOB",
                            help=cli_help)
            parser.addini(ini, opt.help, type="linelist", default=[])
        else:
            # choices are checked by settings.resolve, so the error names the source (CLI, ini, env)
            metavar = "{" + ",".join(opt.choices) + "}" if opt.choices else opt.name.split("-")[-1].upper()
            group.addoption(flag, action="store", default=None, dest=opt.dest, metavar=metavar,
                            help=cli_help)
            parser.addini(ini, opt.help, default=None)


def _raw_option(config: pytest.Config, opt: OptionSpec) -> tuple[Any, str]:
    """CLI beats ini beats environment. An empty value is returned as set (an error in
    :func:`settings.resolve`): ``--gameday-seed=`` must not quietly mean "random"."""
    v = config.getoption(opt.dest)
    if v is not None:
        return v, "command line"
    ini = config.getini(opt.dest)
    # An unset ini is None (our default) or [] (line lists); a key present but empty is "".
    if ini is not None and ini != []:
        if isinstance(opt.kind, ExistingFile | WritableDirectory) and isinstance(ini, str) and ini \
                and config.inipath is not None and not Path(ini).is_absolute():
            # A path in the ini file means the same from any directory pytest runs in:
            # relative to the ini file, as pytest's own `paths` ini values are.
            return str(config.inipath.parent / ini), f"ini {opt.dest}"
        return ini, f"ini {opt.dest}"
    env = os.environ.get(opt.env)
    if env is not None:
        return env, f"environment {opt.env}"
    return None, "default"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, int | pytest.ExitCode, int | pytest.ExitCode]:
    """Outermost around the whole session: an exception escaping it after a signal (the
    interrupt surfacing in pytest's end-of-run report or its unconfigure) ends the run
    INTERRUPTED, not with a traceback and status 1 (:mod:`gameday.plugin.interrupted`)."""
    try:
        status = yield
    except BaseException as exc:
        if ginterrupted.escaped(config, exc):
            return pytest.ExitCode.INTERRUPTED
        raise
    return ginterrupted.final_status(config, status)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> Generator[None, None, None]:
    # Before pytest's capture starts (in this same hook): keep a copy of stderr so that
    # "still reverting" reaches the user while a test's output is being captured.
    gsession.keep_stderr()
    return (yield)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ginterrupted.InterruptReport(config), "gameday-interrupt-report")
    greporters.register(config)
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    try:
        settings = resolve(lambda opt: _raw_option(config, opt), targets=gsession.target_names(config))
    except ConfigError as exc:
        raise pytest.UsageError(f"gameday: {exc}") from exc
    if settings.fail_on_regression and not config.pluginmanager.has_plugin(gsession.HISTORY_PLUGIN):
        raise pytest.UsageError(f"gameday: --gameday-fail-on-regression judges each drill against the run history, "
                                f"which -p no:{gsession.HISTORY_PLUGIN} switched off")
    # Workers of pytest-xdist must share the controller's seed so picks are reproducible.
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None and "gameday_seed" in worker_input:
        settings = gsession.with_seed(settings, int(worker_input["gameday_seed"]))
    config.stash[SETTINGS_KEY] = settings
    state = gsession.SessionState(settings)
    gsession.prepare(config, state)
    config.stash[STATE_KEY] = state
    gsession.install_signal_handlers(config, state)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # pytest-xdist hook (only called when xdist is active)
    node.workerinput["gameday_seed"] = node.config.stash[SETTINGS_KEY].seed
    node.workerinput["gameday_run_dir"] = str(node.config.stash[STATE_KEY].run_dir)
    node.workerinput["gameday_session_pid"] = node.config.stash[STATE_KEY].session_pid


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        gsession.uninstall_signal_handlers(state)


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = config.stash[SETTINGS_KEY]
    # A profile describes the federation wherever one is given (external, kube or kind with a
    # profile); else the topology, the built-in one when none is given.
    where = f"profile={s.profile}" if s.profile else f"topology={s.topology or 'clusters/local.yaml (default)'}"
    how = "given" if s.seed_was_given else "random; reproduce with"
    state = config.stash.get(STATE_KEY, None)
    return [f"gameday: target={s.target} {where} seed={s.seed} ({how} --gameday-seed={s.seed}) "
            f"rounds={s.rounds}" + (f" round-jitter=0-{s.round_jitter:g}s" if s.round_jitter else ""),
            *(gsession.prediction_header(state) if state is not None else [])]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    rounds = metafunc.config.stash[SETTINGS_KEY].rounds
    if rounds > 1 and "drill" in metafunc.fixturenames:
        metafunc.parametrize("gameday_round", range(rounds), indirect=True,
                             ids=[f"round{i + 1}" for i in range(rounds)])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check every ``@pytest.mark.gameday(...)`` when the tests are collected: a bad marker is
    a usage error before any federation starts, not an error in the middle of a session."""
    for item in items:
        gsession.GamedayMarker.of(item)
    greporting.label_items(config, items)  # Allure labels (epic/feature/story, severity, history id)


def _then_write_reports(item: pytest.Item) -> Generator[None, object, object]:
    try:
        result = yield
    except KeyboardInterrupt:  # stopping: no seconds of drawing first
        raise
    except BaseException as exc:  # a failed test (or a skip/fail outcome): its drills are reported too
        ginterrupted.raise_if_the_interrupt(item.config, exc)  # after a signal: it stops the run
        greporting.after_phase(item)
        raise
    greporting.after_phase(item)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """After the test body: its drills' plots and attachments (see :func:`gameday.plugin.reporting.after_phase`)."""
    return (yield from _then_write_reports(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """After the fixtures' teardown: the drills a fixture's teardown ran."""
    return (yield from _then_write_reports(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    greporting.annotate_report(item, report)
    if report.failed and call.excinfo is not None and call.excinfo.errisinstance(HarnessStarved):
        greporting.mark_inconclusive(item, report, str(call.excinfo.value))
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, Any] | None:
    # A starved harness is neither a pass nor a fail of the federation: its own word and letter
    # (the report stays failed: the run does not pass, and exits 6 when nothing else failed).
    if report.failed and greporting.is_inconclusive(report):
        return "inconclusive", "I", ("INCONCLUSIVE", {"yellow": True})
    return None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> Generator[None, object, object]:
    # pytest's own unraisable-exception hook is installed by now (its pytest_configure runs
    # after ours): chain in front of it, so a swallowed Ctrl-C is noticed during the tests.
    state = session.config.stash.get(STATE_KEY, None)
    if state is not None:
        state.interrupts.watch_unraisable()
    return (yield from _the_interrupt_stops(session.config))


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    # Before the terminal reporter renders the interrupt: a frame the signal caught between
    # lines would make that rendering fail (see give_every_frame_a_line).
    give_every_frame_a_line(excinfo.value)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    # Before each test's fixtures: a signal whose exception was swallowed stops the run here.
    state = item.config.stash.get(STATE_KEY, None)
    if state is not None:
        state.interrupts.checkpoint(f"before {item.nodeid}")
    return (yield from _the_interrupt_stops(item.config))


def _the_interrupt_stops(config: pytest.Config) -> Generator[None, object, object]:
    """Once a signal has arrived, an error coming up is the interrupt in disguise (a
    SystemError out of ast.parse, CPython 3.11): raised as the signal's KeyboardInterrupt,
    it stops the run the way Ctrl-C does (:mod:`gameday.plugin.interrupted`)."""
    try:
        return (yield)
    except BaseException as exc:
        ginterrupted.raise_if_the_interrupt(config, exc)
        raise


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    return (yield from _the_interrupt_stops(session.config))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    # Around every test and pytest's handling of it (its reports, their tracebacks).
    return (yield from _the_interrupt_stops(session.config))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Generator[None, None, None]:
    # Outermost: the terminal summary (inside the terminal reporter's sessionfinish) has
    # found the regressions by now; the run's exit status is read after this hook.
    state = session.config.stash.get(STATE_KEY, None)
    result = None
    try:
        result = yield
    except BaseException as exc:
        if not ginterrupted.finish(session, state, exc):  # the interrupt cut the report short: said
            raise
    if state is not None and state.regressed and state.settings.fail_on_regression \
            and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    # A signal arrived (its exception may have been swallowed, or come up as another error):
    # the run ends interrupted, with the interruption summary.
    ginterrupted.finish(session, state, None)
    stats = getattr(session.config.pluginmanager.get_plugin("terminalreporter"), "stats", {})
    if session.exitstatus == pytest.ExitCode.TESTS_FAILED and stats.get("inconclusive") \
            and not stats.get("failed") and not stats.get("error") and not (state is not None and state.regressed):
        # Every failure was a starved harness: say so in the exit status (not a failed federation).
        session.exitstatus = EXIT_INCONCLUSIVE
    return result


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    greporting.terminal_summary(terminalreporter, config.stash[STATE_KEY])


# -- fixtures ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def gameday_settings(pytestconfig: pytest.Config) -> Settings:
    """The resolved ``--gameday-*`` settings (CLI > ini > environment > defaults)."""
    return pytestconfig.stash[SETTINGS_KEY]


@pytest.fixture
def slo(gameday_settings: Settings) -> SLO:
    """The service-level objectives drills are judged by (switchover limit, error ratio, ...)."""
    return gameday_settings.slo


@pytest.fixture(scope="session")
def federation(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The target federation, up and deployed for the whole session, torn down at the end.

    One per pytest-xdist worker (local: each on its own free ports). Where the workers
    share one (kind's clusters, a staging context, a profile's federation: a
    :class:`gameday.interfaces.SharedFederation`), their drills take turns on the
    drill lock (:mod:`gameday.runtime.drill_lock`). Yields a :class:`gameday.interfaces.Target`.
    """
    state = pytestconfig.stash[STATE_KEY]
    with gsession.federation(pytestconfig, state) as target:
        yield target


@pytest.fixture(scope="session")
def topology(pytestconfig: pytest.Config) -> Any:
    """The validated :class:`gameday.model.topology.Topology` the session runs on."""
    return pytestconfig.stash[STATE_KEY].topology


@pytest.fixture
def gameday_round(request: pytest.FixtureRequest) -> int:
    """Index of the current round (``--gameday-rounds N`` repeats each drill N times)."""
    return int(getattr(request, "param", 0))


@pytest.fixture
def load(federation: Any, pytestconfig: pytest.Config, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Real load against the GSLB service name for the duration of the test: locust, or what a
    conftest's ``pytest_gameday_make_load`` returns.

    Yields a :class:`gameday.load.generator.LoadGenerator` (gameday's own is a
    :class:`gameday.load.runner.LoadRunner`; its ``records`` are the requests).
    """
    with gsession.load(pytestconfig, pytestconfig.stash[STATE_KEY], federation, request.node) as runner:
        yield runner


@pytest.fixture
def drill(federation: Any, pytestconfig: pytest.Config, request: pytest.FixtureRequest,
          gameday_round: int) -> Iterator[Any]:
    """A drill on the session federation: seeded region picks, faults that always restore,
    observers at 10 Hz, and results whose ``assert_*`` methods judge the SLOs.

    Uses the ``load`` fixture's runner when the test also requests ``load``.
    """
    runner = request.getfixturevalue("load") if "load" in request.fixturenames else None
    with gsession.drill(pytestconfig, pytestconfig.stash[STATE_KEY], federation, request.node,
                        runner=runner, round_index=gameday_round) as d:
        yield d

