"""A run a signal stopped ends interrupted, however the interrupt came up (issue 28, item 8).

The first SIGINT, SIGTERM or SIGHUP raises :class:`KeyboardInterrupt` in the main thread
(:mod:`gameday.runtime.interrupts`), and pytest ends the run with exit status 2
(INTERRUPTED) and gameday's interruption summary. The interrupt does not always come up as
a KeyboardInterrupt where pytest looks for one: CPython 3.11 turns one raised inside
``ast.parse`` (pytest formats tracebacks and rewrites asserts with it) into ``SystemError: AST
constructor recursion depth mismatch``; code that caught it may raise something else; the
signal may land in pytest's own report of the run. Such a run ended with status 1 (a failed
test, or a traceback out of pytest) or 3 (INTERNALERROR), and often without the summary.

So, once a signal has arrived (and only then: without one, a SystemError is a failure like
any other):

* an error the session's start, the collection, the test loop (pytest's reports of each test
  included) or a test's setup, call or teardown raises is the interrupt: the signal's
  KeyboardInterrupt is raised in its place (the error chained and named in its message), and
  pytest stops the run as it stops on Ctrl-C;
* pytest's report of the interrupt (its "KeyboardInterrupt" line) is made again if making it
  failed, and that failure does not escape;
* the exit status is INTERRUPTED whatever pytest made of the run (0, 1, 3, 5, 6), and the
  interruption summary is written when pytest's terminal summary did not carry it;
* an exception escaping pytest itself (its end-of-run report, its unconfigure) ends the run
  with one line, the summary and INTERRUPTED, not a traceback and status 1.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any

import pytest

from gameday.plugin.reporting import interruption_summary, terminal_summary
from gameday.plugin.session import STATE_KEY, SessionState
from gameday.runtime.interrupts import INTERRUPTS, Interrupts, signal_name
from gameday.verdicts.harness import EXIT_INCONCLUSIVE

OVERRIDDEN = frozenset({pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERNAL_ERROR,
                        pytest.ExitCode.NO_TESTS_COLLECTED, EXIT_INCONCLUSIVE})
"""Exit statuses a run that received a signal does not end with: it ends INTERRUPTED. (A usage
error, 4, stays: it is said before anything runs; so does a status a plugin chose with
``pytest.exit``.)"""


def received(config: pytest.Config) -> Interrupts | None:
    """The run's signal state, if a signal has arrived; None otherwise."""
    state = config.stash.get(STATE_KEY, None)
    it = state.interrupts if state is not None else None
    return it if it is not None and it.first is not None else None


def raise_if_the_interrupt(config: pytest.Config, exc: BaseException) -> None:
    """Raise the signal's KeyboardInterrupt from *exc* if a signal has arrived and *exc* is an
    error (an ``Exception`` or a ``pytest.fail``; not a skip, an xfail, ``pytest.exit``, nor a
    KeyboardInterrupt, which is one already); else return, for the caller to re-raise *exc*."""
    if isinstance(exc, KeyboardInterrupt | pytest.exit.Exception):
        return
    if not isinstance(exc, Exception | pytest.fail.Exception):
        return
    it = received(config)
    if it is not None:
        raise it.surfaced_as(exc) from exc


def one_line(exc: BaseException) -> str:
    text = next(iter(str(exc).splitlines()), "").strip()
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


class InterruptReport:
    """Registered per session (it needs the config, which ``pytest_keyboard_interrupt`` is
    not given): pytest's report of the interrupt, made again when making it failed."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
        try:
            return (yield)
        except Exception as exc:
            # The terminal reporter renders the interrupt's traceback here (ast.parse): the
            # signal's own KeyboardInterrupt, turned into a SystemError, or a plugin's failure.
            # Escaping, it would end pytest with a traceback and status 1.
            it = received(self.config)
            if it is None:
                raise
            name = signal_name(it.first or signal.SIGINT)
            it.say(f"gameday: pytest's report of the {name} failed ({one_line(exc)}); the run is interrupted "
                   "all the same")
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            if tr is not None:
                with contextlib.suppress(Exception):  # its "KeyboardInterrupt" line at the end of the run
                    tr.pytest_keyboard_interrupt(excinfo=excinfo)
            return None


def finish(session: pytest.Session, state: SessionState | None, failure: BaseException | None) -> bool:
    """At the end of ``pytest_sessionfinish`` (gameday's wrapper, outermost): once a signal has
    arrived, the exit status is INTERRUPTED and the interruption summary is written.

    *failure*: what the inner implementations raised (the terminal summary, say), or None.
    Returns whether *failure* is the interrupt's doing and is not to be raised further.
    """
    it = state.interrupts if state is not None else None
    if state is None or it is None or it.first is None:
        return False
    if failure is not None and (isinstance(failure, pytest.exit.Exception)
                                or not isinstance(failure, Exception | KeyboardInterrupt)):
        return False
    name = signal_name(it.first)
    if failure is not None:
        it.say(f"gameday: the end of the run was cut short by the {name} ({one_line(failure)}); "
               "exit status 2 (interrupted)")
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    elif session.exitstatus in OVERRIDDEN:
        status = int(session.exitstatus)
        if status in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERNAL_ERROR):
            # Said: a failure the interrupt caused looks like any other.
            it.say(f"gameday: exit status 2 (interrupted), not pytest's {status}: the {name} arrived at "
                   f"{it.since()}, and what it stopped may have failed with another error (see above)")
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    summarise(session.config, state, tr=session.config.pluginmanager.get_plugin("terminalreporter"))
    return failure is not None


def summarise(config: pytest.Config, state: SessionState, *, tr: Any) -> None:
    """Write what pytest's terminal summary did not: gameday's whole summary (drills, history,
    run.json) when it did not run (pytest runs it for some exit statuses only), the
    interruption summary when that is missing. On the terminal (*tr*) or, without one, on
    stderr. The controller's only: an xdist worker has no summary."""
    if getattr(config, "workerinput", None) is not None or state.interrupts.first is None:
        return
    if not state.summarised and tr is not None:
        with contextlib.suppress(Exception):
            terminal_summary(tr, state)
    if state.interruption_said:
        return
    state.interruption_said = True
    try:
        lines = interruption_summary(state)
    except Exception as exc:  # noqa: BLE001  (the last words of a run: say what failed instead)
        lines = [f"{signal_name(state.interrupts.first)} received; the summary failed: {one_line(exc)}"]
    written = False
    if tr is not None:
        with contextlib.suppress(Exception):
            tr.write_sep("=", "gameday: interrupted")
            for line in lines:
                tr.write_line(line)
            written = True
    if not written:
        state.interrupts.say("gameday: interrupted: " + "\n".join(lines))


def final_status(config: pytest.Config, status: int | pytest.ExitCode) -> int | pytest.ExitCode:
    """The run's exit status, as ``pytest_cmdline_main`` returns it: INTERRUPTED once a signal
    has arrived, with the interruption summary on stderr if none was written (pytest has no
    ``pytest_sessionfinish`` for a session whose start failed)."""
    state = config.stash.get(STATE_KEY, None)
    if state is None or state.interrupts.first is None:
        return status
    with contextlib.suppress(Exception):
        summarise(config, state, tr=None)
    return pytest.ExitCode.INTERRUPTED if status in OVERRIDDEN else status


def escaped(config: pytest.Config, exc: BaseException) -> bool:
    """An exception escaping pytest's session (``pytest_cmdline_main``): whether it is the
    interrupt's doing (said on stderr, with the summary if none was written), so the run
    ends INTERRUPTED instead of with a traceback and status 1. A KeyboardInterrupt always is
    (one after gameday's handlers are gone is Python's own Ctrl-C)."""
    if isinstance(exc, pytest.exit.Exception) or not isinstance(exc, Exception | KeyboardInterrupt):
        return False
    state = config.stash.get(STATE_KEY, None)
    it = state.interrupts if state is not None else INTERRUPTS
    if it.first is None and not isinstance(exc, KeyboardInterrupt):
        return False
    name = signal_name(it.first) if it.first is not None else "interrupt"
    it.say(f"gameday: the {name} stopped pytest while it was finishing ({one_line(exc)}); "
           "exit status 2 (interrupted)")
    if state is not None:
        with contextlib.suppress(Exception):
            summarise(config, state, tr=None)
    return True
