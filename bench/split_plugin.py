"""A pytest plugin that stamps a drill's phases, for ``bench/drill_split.py``.

Loaded into the drill's own pytest (``gameday drill -p split_plugin`` with this directory on
``PYTHONPATH``); writes ``$GAMEDAY_SPLIT_OUT`` (JSON) when the session ends. Every stamp is
``time.monotonic()`` in the pytest process, the clock the drill's timeline uses, so the
timeline's marks (baseline, inject, fault, revert, restored) fall on the same axis.

Phases (seconds; together they are the whole of pytest's ``passed in`` time):

- ``startup``: from the session's start to the first gameday fixture (collection, options);
- ``bring_up``: the federation and the load generator up, the drill's health check and
  observers started: until the baseline begins;
- ``baseline``: the steady state observed before the fault (baseline mark to the injection call);
- ``fault_block``: injection call to the revert call (observing until every verdict is decided);
- ``restore``: the revert call to the end of the test's call (revert, back to steady state);
- ``report``: the call's report (verdicts folded in, timeline plot, raw data, Allure);
- ``teardown``: the load generator and the federation stopped;
- ``finish``: the terminal summary, history and run file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from typing import Any

import pytest

from gameday.plugin.session import RESULTS_KEY

_T: dict[str, float] = {}
_CPU: dict[str, float] = {}
"""CPU seconds of the pytest process (every thread) at each stamp: on a loaded machine the
wall times stretch, this much less."""
_MARKS: dict[str, float] = {}


def _stamp(name: str) -> None:
    if name not in _T:
        _T[name] = time.monotonic()
        _CPU[name] = time.process_time()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _stamp("session_start")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Generator[None]:
    if fixturedef.argname in ("federation", "load", "drill"):
        _stamp(f"{fixturedef.argname}_setup_start")
    yield
    if fixturedef.argname in ("federation", "load", "drill"):
        _stamp(f"{fixturedef.argname}_setup_end")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef[Any], request: pytest.SubRequest) -> Generator[None]:
    yield
    if fixturedef.argname in ("federation", "load", "drill"):
        _stamp(f"{fixturedef.argname}_finalized")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None]:
    _stamp("call_start")
    yield
    _stamp("call_end")
    for res in item.stash.get(RESULTS_KEY, []):
        for m in res.timeline.marks:
            _MARKS.setdefault(m.label, m.t)
        _MARKS.setdefault("t0", res.timeline.t0)
        if res.fault.t_revert_call is not None:
            _MARKS.setdefault("revert_call", res.fault.t_revert_call)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None]:
    _stamp("teardown_start")
    yield
    _stamp("teardown_end")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> Generator[None]:
    yield
    if report.when == "call":
        _stamp("call_reported")


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None]:
    _stamp("sessionfinish_start")
    yield
    _stamp("sessionfinish_end")


@pytest.hookimpl(hookwrapper=True)
def pytest_terminal_summary(terminalreporter: Any) -> Generator[None]:
    _stamp("summary_start")
    yield
    _stamp("summary_end")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    _stamp("unconfigure")
    out = os.environ.get("GAMEDAY_SPLIT_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump({"stamps": _T, "cpu": _CPU, "marks": _MARKS}, fh, indent=1)


def phases(stamps: dict[str, float], marks: dict[str, float]) -> dict[str, float]:
    """The phase durations (s) from one run's stamps and timeline marks; see the module docstring."""
    s, m = stamps, marks
    first_fixture = min(s[k] for k in ("federation_setup_start", "load_setup_start", "drill_setup_start") if k in s)
    edges = [
        ("startup", s["session_start"], first_fixture),
        ("bring_up", first_fixture, m["baseline"]),
        ("baseline", m["baseline"], m["inject_call"]),
        ("fault_block", m["inject_call"], m["revert_call"]),
        ("restore", m["revert_call"], s["call_end"]),
        ("report", s["call_end"], s["teardown_start"]),
        ("teardown", s["teardown_start"], s["teardown_end"]),
        ("finish", s["teardown_end"], s["unconfigure"]),
    ]
    out = {name: round(b - a, 3) for name, a, b in edges}
    out["total"] = round(s["unconfigure"] - s["session_start"], 3)
    # inside bring_up: the federation itself, the load generator, and the rest (health, observers)
    out["bring_up.federation"] = round(s["federation_setup_end"] - s["federation_setup_start"], 3)
    if "load_setup_end" in s:
        out["bring_up.load"] = round(s["load_setup_end"] - s["load_setup_start"], 3)
    return out
