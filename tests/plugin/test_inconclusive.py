"""How a run shows a starved harness: INCONCLUSIVE (not FAILED), exit status 6 when nothing else
failed, a JUnit property, the inconclusive log, and a rerun of only that (pytest-rerunfailures)."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"
TESTS = """
import os
from pathlib import Path
from gameday.errors import HarnessStarved

def test_fine():
    pass

def test_starved():
    raise HarnessStarved("switchover inconclusive: harness starved over the 9.0 s window: dns was read "
                         "4.9 times/s of 10 asked (longest gap 1.07 s, limit 1.00 s)")

def test_starved_once():
    marker = Path(os.environ["ONCE_MARKER"])
    if not marker.exists():
        marker.write_text("x")
        raise HarnessStarved("dns_convergence inconclusive: harness starved")

def test_slow_federation():
    if os.environ.get("WITH_FAILURE"):
        raise AssertionError("switchover took 4.00 s, limit 3 s")
"""


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    pytester.makeini(INI)
    pytester.makepyfile(test_starving=TESTS)
    log = pytester.path / "inconclusive.jsonl"
    monkeypatch.setenv("GAMEDAY_INCONCLUSIVE_LOG", str(log))
    monkeypatch.setenv("ONCE_MARKER", str(pytester.path / "once"))

    def go(*args: str) -> tuple[pytest.RunResult, Path]:
        return pytester.runpytest_subprocess("-v", "--junitxml=junit.xml", *args, timeout=120), log

    return go


def test_a_starved_harness_is_inconclusive_and_the_run_exits_6(run) -> None:  # type: ignore[no-untyped-def]
    result, log = run("-k", "starved and not once")
    assert result.ret == 6, result.stdout.str()
    result.stdout.fnmatch_lines(["*test_starving.py::test_starved INCONCLUSIVE*",
                                 "*gameday: inconclusive (harness starved: neither pass nor fail of the federation)*",
                                 "INCONCLUSIVE test_starving.py::test_starved - gameday.errors.HarnessStarved: "
                                 "switchover inconclusive: *dns was read 4.9 times/s of 10 asked (longest gap 1.07 s, "
                                 "limit 1.00 s)",
                                 "*1 inconclusive*"])
    assert "FAILED test_starving.py::test_starved" not in result.stdout.str()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["nodeid"] for e in entries] == ["test_starving.py::test_starved"]
    assert entries[0]["reason"].startswith("switchover inconclusive: harness starved")
    props = {p.get("name"): p.get("value") for p in ET.parse("junit.xml").iter("property")}
    assert props["gameday_inconclusive"].startswith("switchover inconclusive")


def test_a_real_failure_beside_it_makes_the_run_fail(run, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("WITH_FAILURE", "1")
    result, _ = run("-k", "not once")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*1 failed, 1 passed, * 1 inconclusive*"])


def test_only_an_inconclusive_test_is_rerun_once(run, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("WITH_FAILURE", "1")
    result, _ = run("--reruns", "1", "--only-rerun", "HarnessStarved")
    # starved_once passes when rerun; starved stays inconclusive after its one rerun; the real
    # failure is not rerun at all.
    result.stdout.fnmatch_lines(["*1 failed, 2 passed, 2 rerun, 1 inconclusive*"])
    assert result.ret == 1
    assert "RERUN" not in "".join(line for line in result.stdout.lines if "test_slow_federation" in line)


def test_gameday_inconclusive_lists_what_to_run_again_and_pytest_reruns_just_that(
        run, pytester: pytest.Pytester) -> None:  # type: ignore[no-untyped-def]
    """make test's second chance: the parallel pass exits 6, ``gameday inconclusive`` reads the
    node ids back from its JUnit report, and ``pytest @file`` runs only those again."""
    result, _ = run("-k", "starved and not once")
    assert result.ret == 6
    listed = pytester.run(sys.executable, "-m", "gameday.cli", "inconclusive", "--reasons", "junit.xml", timeout=60)
    assert listed.ret == 0, listed.stderr.str()
    assert listed.stdout.lines == ["test_starving.py::test_starved"]
    assert "switchover inconclusive: harness starved" in listed.stderr.str()
    (pytester.path / "again.txt").write_text("\n".join(listed.stdout.lines) + "\n")
    again = pytester.runpytest_subprocess("-v", "@again.txt", timeout=120)
    assert again.ret == 6
    again.stdout.fnmatch_lines(["*test_starving.py::test_starved INCONCLUSIVE*", "*1 inconclusive in*"])
    assert "test_fine" not in again.stdout.str()


def test_gameday_inconclusive_exits_1_when_nothing_was_and_2_on_a_bad_report(
        run, pytester: pytest.Pytester) -> None:  # type: ignore[no-untyped-def]
    result, _ = run("-k", "fine")
    assert result.ret == 0
    none = pytester.run(sys.executable, "-m", "gameday.cli", "inconclusive", "junit.xml", timeout=60)
    assert (none.ret, none.stdout.lines) == (1, [])
    (pytester.path / "broken.xml").write_text("<testsuites><testcase")
    for name, says in (("missing.xml", "missing.xml: no such JUnit report"),
                       ("broken.xml", "broken.xml: not a readable JUnit XML report")):
        bad = pytester.run(sys.executable, "-m", "gameday.cli", "inconclusive", name, timeout=60)
        assert bad.ret == 2
        assert f"gameday: error: {says}" in bad.stderr.str()
