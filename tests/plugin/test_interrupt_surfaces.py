"""A Ctrl-C ends the run interrupted wherever it lands (issue 28, item 8: "Exit codes hold under interrupts").

Seen in CI: test_aborted_history's Ctrl-C drill, and once another Ctrl-C test, ended with
status 1, not 2: the SIGINT landed while pytest was formatting a traceback, and CPython 3.11
turned the KeyboardInterrupt raised inside ``ast.parse`` into ``SystemError: AST constructor
recursion depth mismatch``. Once a signal has arrived, gameday now ends the run INTERRUPTED,
with the interruption summary, however the interrupt came up (:mod:`gameday.plugin.interrupted`).

Real pytest processes and real signals, no federation (under a second of CPU each; the runs
of a test go in parallel). Landing a signal inside ``ast.parse`` is luck, so a conftest sends
a real SIGINT to its own process, lets gameday's handler raise, and raises the SystemError in
its place; and raises it again at each later place such an interrupt can come up: a test's
body, pytest's making of a test's report, the session's start, pytest's report of the
interrupt, the terminal summary, pytest's unconfigure. Then real SIGINTs from outside, at a
few moments of a run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gameday.cli.main import _Supervisor

# Only gameday among the installed plugins: a process costs about 0.8 s of CPU instead of 1.2.
INI = ("[pytest]\naddopts = -p no:locust -p no:cacheprovider -p no:hypothesispytest -p no:allure_pytest "
       "-p no:xdist -p no:xdist.looponfail -p no:rerunfailures -p no:anyio -p no:platformdirs\n")

SYSTEM_ERROR = "AST constructor recursion depth mismatch (before=1, after=0)"

CONFTEST = f'''
import os
import signal
import time

import pytest

from gameday.runtime.interrupts import INTERRUPTS

AT = set(os.environ["SURFACE_AT"].split(","))
SIGNAL = os.environ["SURFACE_SIGNAL"] == "1"


def ctrl_c():
    """A real Ctrl-C: SIGINT to this process; gameday's handler raises KeyboardInterrupt."""
    os.kill(os.getpid(), signal.SIGINT)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pass
    raise AssertionError("no KeyboardInterrupt within 5 s of the SIGINT")


def surface(where):
    """At *where*, one of SURFACE_AT: the interrupt comes up as the SystemError CPython 3.11
    makes of a KeyboardInterrupt raised inside ast.parse (after a real Ctrl-C, the first
    time, unless SURFACE_SIGNAL=0)."""
    if where not in AT:
        return
    if SIGNAL and INTERRUPTS.first is None:
        stopped = False
        try:
            ctrl_c()
        except KeyboardInterrupt:
            stopped = True
        if not (stopped and INTERRUPTS.first == signal.SIGINT):
            raise AssertionError("gameday did not record the SIGINT")
    raise SystemError("{SYSTEM_ERROR}")


def pytest_sessionstart(session):
    surface("sessionstart")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call":
        surface("makereport")
    return report


def pytest_keyboard_interrupt(excinfo):
    surface("keyboard-interrupt")  # as the terminal reporter's rendering of it would


def pytest_terminal_summary(terminalreporter):
    surface("summary")


def pytest_unconfigure(config):
    surface("unconfigure")
'''

TEST = '''
from conftest import surface


def test_interrupted():
    surface("test")
'''


def _start(path: Path, files: dict[str, str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    path.mkdir(parents=True)
    for name, text in {"pytest.ini": INI, **files}.items():
        (path / name).write_text(text)
    out = (path / "out.txt").open("wb")
    return subprocess.Popen([sys.executable, "-m", "pytest"], cwd=path, stdout=out,
                            stderr=subprocess.STDOUT, env={**os.environ, **env})


def _finish(proc: subprocess.Popen[bytes], path: Path, timeout: float = 60) -> tuple[int, str]:
    try:
        rc = proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return rc, (path / "out.txt").read_text(errors="replace")


def test_an_interrupt_that_comes_up_as_a_system_error_still_ends_the_run_interrupted(tmp_path: Path) -> None:
    # Before this fix such a run exited 1 (a failed test; a traceback out of pytest for the
    # later places) or 3 (INTERNALERROR: a test's report, the session's start).
    runs = {
        # the test's SystemError stops the run as a Ctrl-C; then pytest's report of that
        # interrupt, its terminal summary and its unconfigure each fail the same way
        "test,keyboard-interrupt,summary,unconfigure": "1",
        "makereport": "1",
        "sessionstart": "1",
        "test": "0",  # the control: no signal
    }
    procs = {at: _start(tmp_path / at, {"conftest.py": CONFTEST, "test_it.py": TEST},
                        {"SURFACE_AT": at, "SURFACE_SIGNAL": sig}) for at, sig in runs.items()}
    results = {at: _finish(proc, tmp_path / at) for at, proc in procs.items()}

    rc, out = results["test"]  # without a signal, the SystemError is a failure like any other
    assert rc == pytest.ExitCode.TESTS_FAILED, f"without a signal: {rc}\n{out}"
    assert f"FAILED test_it.py::test_interrupted - SystemError: {SYSTEM_ERROR[:20]}" in out, out
    assert "gameday: interrupted" not in out and "Ctrl-C (SIGINT) received" not in out, out

    for at, (rc, out) in results.items():
        if runs[at] == "0":
            continue
        assert rc == pytest.ExitCode.INTERRUPTED, f"{at}: exit status {rc}\n{out}"
        assert out.count("Ctrl-C (SIGINT) received; 1 signal(s) in all") == 1, f"{at}: the summary?\n{out}"
        assert "ledger: nothing pending from this run" in out, f"{at}\n{out}"
        assert "Traceback" not in out and "INTERNALERROR" not in out, f"{at}\n{out}"
        assert "FAILED test_it.py" not in out and "1 failed" not in out, f"{at}: a failed test\n{out}"
    out = results["test,keyboard-interrupt,summary,unconfigure"][1]
    for said in (f"gameday: pytest's report of the Ctrl-C (SIGINT) failed (SystemError: {SYSTEM_ERROR})",
                 f"gameday: the end of the run was cut short by the Ctrl-C (SIGINT) (SystemError: {SYSTEM_ERROR})",
                 f"gameday: the Ctrl-C (SIGINT) stopped pytest while it was finishing (SystemError: {SYSTEM_ERROR})"):
        assert said in out, f"not said: {said}\n{out}"
    out = results["makereport"][1]
    assert "KeyboardInterrupt: Ctrl-C (SIGINT) (arrived at t+" in out, out
    assert f"it surfaced as SystemError: {SYSTEM_ERROR})" in out, out


# -- real SIGINTs from outside, at several moments of one cheap run ------------------------------------
MOMENTS_CONFTEST = '''
import time

from gameday.runtime.interrupts import INTERRUPTS


def pytest_unconfigure(config):
    # The run does not end before the signal: a late one lands here (gameday's handlers are
    # still in: this conftest's hook runs before the plugin's).
    deadline = time.monotonic() + 20
    while INTERRUPTS.first is None and time.monotonic() < deadline:
        time.sleep(0.002)
'''

# Collection rewrites this module's asserts (ast.parse); each failure's report formats a
# traceback (ast.parse again); the summary lists them.
MOMENTS_TEST = '''
import pytest


@pytest.mark.parametrize("n", range(20))
def test_moment(n):
    assert {"n": n, "odd": n % 2} == {"n": n, "odd": 0}, f"test {n}"
'''

DELAYS = [0.0, 0.04, 0.1, 0.2, 0.5]
"""Seconds after gameday installed its handlers (its ``ready`` line)."""


def test_a_ctrl_c_at_any_moment_of_a_run_ends_it_interrupted_with_the_summary(tmp_path: Path) -> None:
    runs = []
    for i in range(len(DELAYS)):
        path = tmp_path / f"run-{i}"
        ack = tmp_path / f"signals-{i}.log"
        runs.append((path, ack, _start(path, {"conftest.py": MOMENTS_CONFTEST, "test_moments.py": MOMENTS_TEST},
                                       {"GAMEDAY_SIGNAL_ACK": str(ack)})))
    deadline = time.monotonic() + 60
    sent = [False] * len(runs)
    ready_at: list[float | None] = [None] * len(runs)
    while not all(sent):
        assert time.monotonic() < deadline, "a run never got ready"
        for i, (path, ack, proc) in enumerate(runs):
            if sent[i]:
                continue
            assert proc.poll() is None, f"run {i} ended before its signal\n{(path / 'out.txt').read_text()}"
            if ready_at[i] is None and ack.exists() and ack.read_text().startswith("ready"):
                ready_at[i] = time.monotonic()
            at = ready_at[i]
            if at is not None and time.monotonic() >= at + DELAYS[i]:
                os.kill(proc.pid, signal.SIGINT)
                sent[i] = True
        time.sleep(0.002)
    for i, (path, _ack, proc) in enumerate(runs):
        rc, out = _finish(proc, path)
        where = f"SIGINT {DELAYS[i]} s after ready"
        assert rc == pytest.ExitCode.INTERRUPTED, f"{where}: exit status {rc}\n{out}"
        assert "Ctrl-C (SIGINT) received; 1 signal(s) in all" in out, f"{where}: no interruption summary\n{out}"
        assert "Traceback" not in out and "INTERNALERROR" not in out, f"{where}\n{out}"


# -- `gameday drill`: 128 + the signal, whatever pytest's own status ---------------------------------
@pytest.mark.parametrize("rc", [0, 1, 2, 3, -signal.SIGINT])
def test_the_wrapper_exits_128_plus_the_signal_whatever_pytest_made_of_it(tmp_path: Path, rc: int) -> None:
    ack = tmp_path / "signals.log"
    ack.write_text(f"ready 1.0\n{int(signal.SIGINT)} 2.0\n")  # pytest was ready and received a SIGINT
    supervisor = _Supervisor([], {}, tmp_path / "ledger.json", ack)
    assert supervisor._report_exit(rc) == 128 + signal.SIGINT


@pytest.mark.parametrize("rc", [1, 3])
def test_the_wrapper_keeps_pytest_s_status_without_a_signal(tmp_path: Path, rc: int) -> None:
    ack = tmp_path / "signals.log"
    ack.write_text("ready 1.0\n")
    assert _Supervisor([], {}, tmp_path / "ledger.json", ack)._report_exit(rc) == rc
