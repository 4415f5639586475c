"""Real drills on the local target, run through pytest the way users run them.

Each test starts its own federation (free ports), puts it under real locust load,
and checks what a user relies on: verdicts and reports for a healthy federation,
faults reverted on Ctrl-C and SIGTERM, nothing left running after ``kill -9`` (and
``gameday restore`` clearing the ledger), and stop conditions that abort quickly.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from gameday.runtime.procs import find_processes, pid_alive
from gameday.targets.local.federation import LocalFederation

pytestmark = pytest.mark.slow

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"

HANG_IN_FAULT = """
import time
import uuid
from pathlib import Path
import pytest

@pytest.mark.gameday
def test_hang(drill, load):
    with drill.fault("gateway_down", "b"):
        Path("injected").write_text("yes")
        time.sleep(120)
"""


def _pending(reports: Path) -> list[dict[str, object]]:
    ledger = reports / ".gameday" / "ledger.json"
    if not ledger.exists():
        return []
    pending: list[dict[str, object]] = json.loads(ledger.read_text())["pending"]
    return pending


def _federation_dirs(reports: Path) -> list[Path]:
    return sorted(p.parent for p in (reports / ".gameday" / "federations").glob("*/state.json"))


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"pytest exited early with {proc.returncode}"
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout} s"
        time.sleep(0.2)


def _gameday(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gameday.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


REPORTER = """
import json
from pathlib import Path


def pytest_gameday_drill_recorded(item, result, summary, files):
    summary["verdicts"].clear()  # a copy: what gameday keeps does not change
    with open("reporter.jsonl", "a") as f:
        f.write(json.dumps({"hook": "drill", "test": item.nodeid, "fault": result.fault.kind,
                            "switchover": result.summary()["switchover"]["value_s"],
                            "files": sorted(files), "figures_exist": Path(files["figures"]).exists()}) + "\\n")


def pytest_gameday_run_recorded(config, drills, conformance, run_dir):
    with open("reporter.jsonl", "a") as f:
        f.write(json.dumps({"hook": "run", "drills": [[d["test"], d["region"], [v["name"] for v in d["verdicts"]]]
                                                      for d in drills],
                            "conformance": conformance, "run_dir": str(run_dir)}) + "\\n")
    raise RuntimeError("the dashboard is down")
"""


def test_a_healthy_federation_passes_and_reports(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makeconftest(REPORTER)  # a reporter through the result hooks (one that fails at the end)
    pytester.makepyfile(test_drill="""
        import pytest

        @pytest.mark.gameday
        def test_random_gateway_outage(drill, load):
            region = drill.pick_region()
            with drill.fault("gateway_down", region) as fault:
                result = drill.observe_switchover(fault)
            result.assert_switchover_under(10)
            result.assert_dns_converged(10)
            result.assert_client_recovered(30)
            result.assert_versions_incremented()
            result.assert_headroom()
            result.assert_no_stale_snapshot_alarms()
    """)
    result = pytester.runpytest_subprocess("--gameday-seed=3", "--gameday-recovery-window=3",
                                           "--junitxml=junit.xml", "--alluredir=allure-results", timeout=240)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*gameday drill verdicts*",
        "test_random_gateway_outage*gateway_down*s*ok*0*",
    ])
    figures = list((pytester.path / "reports" / "runs").glob("*/drills/*/figures-0.json"))
    assert len(figures) == 1
    data = json.loads(figures[0].read_text())
    assert data["seed"] == 3 and data["region"] in ("a", "b", "c")
    assert 0 < data["switchover"]["value_s"] < 10
    assert data["load"]["achieved_rps"] > 0
    assert figures[0].with_name("timeline-0.png").read_bytes().startswith(b"\x89PNG")
    assert (pytester.path / "junit.xml").read_text().count("<testcase") == 1
    results = [json.loads(p.read_text()) for p in (pytester.path / "allure-results").glob("*-result.json")]
    names = [a["name"] for r in results for a in r.get("attachments", [])]
    assert any(n.startswith("timeline:") for n in names), names
    assert any(n.startswith("verdicts:") for n in names), names
    assert _pending(pytester.path / "reports") == []
    # The reporter got the drill once, when the test's call ended (its files written), then the
    # run; the one that raised is said under the tables, and the verdicts stand (1 passed).
    drill_line, run_line = (json.loads(x) for x in (pytester.path / "reporter.jsonl").read_text().splitlines())
    assert drill_line == {"hook": "drill", "test": "test_drill.py::test_random_gateway_outage",
                          "fault": "gateway_down", "switchover": data["switchover"]["value_s"],
                          "files": ["figures", "locust_stats", "settings", "timeline_csv", "timeline_json",
                                    "timeline_png"], "figures_exist": True}
    assert run_line["drills"] == [["test_drill.py::test_random_gateway_outage", data["region"],
                                   [v["name"] for v in data["verdicts"]]]]
    assert "switchover" in run_line["drills"][0][2] and run_line["conformance"] == []
    assert (pytester.path / run_line["run_dir"]).resolve() == figures[0].parents[2].resolve()
    result.stdout.fnmatch_lines(["*gameday: 1 report error(s) (the verdicts stand)*",
                                 "pytest_gameday_run_recorded (conftest.py): RuntimeError: the dashboard is down"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_mid_drill_restores_and_stops_everything(pytester: pytest.Pytester, sig: int) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_hang=HANG_IN_FAULT)
    tag = f"gd-test-{uuid.uuid4().hex}"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-s"], cwd=pytester.path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "GD_TAG": tag})
    try:
        _wait_for(pytester.path / "injected", proc, 90)
        assert len(_pending(pytester.path / "reports")) == 1  # written before the injection
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.decode()
    assert proc.returncode != 0
    assert _pending(pytester.path / "reports") == [], text[-2000:]
    for d in _federation_dirs(pytester.path / "reports"):
        assert not LocalFederation.attach(d).any_running(), f"processes left behind in {d}"
    assert find_processes(tag) == []
    # Ctrl-C and SIGTERM end the same way: the summary says what was reverted.
    name = "Ctrl-C (SIGINT)" if sig == signal.SIGINT else "SIGTERM"
    assert f"{name} received" in text, text[-2000:]
    assert "reverted: gateway_down b (" in text, text[-2000:]
    assert "ledger: nothing pending from this run" in text, text[-2000:]


def test_kill_9_takes_the_whole_run_with_it_and_restore_clears_the_ledger(pytester: pytest.Pytester) -> None:
    """``kill -9`` of the runner mid-fault: every process of the run dies with it (the
    federation, so the fault too, and locust), and ``gameday restore`` clears the entry."""
    pytester.makeini(INI)
    pytester.makepyfile(test_hang=HANG_IN_FAULT)
    reports = pytester.path / "reports"
    tag = f"gd-test-{uuid.uuid4().hex}"  # every process of the run inherits it
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-s"], cwd=pytester.path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "GD_TAG": tag})
    try:
        _wait_for(pytester.path / "injected", proc, 90)
        (fed_dir,) = _federation_dirs(reports)
        state = json.loads((fed_dir / "state.json").read_text())
        recorded = [(c["pid"], c["starttime"]) for c in state["components"].values() if c["pid"]]
        recorded.append((state["launcher_pid"], state["launcher_starttime"]))
        assert len(recorded) > 10 and find_processes(tag)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while find_processes(tag) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert find_processes(tag) == [], "processes outlived their runner"
        assert not [p for p, start in recorded if pid_alive(p, start)]
        assert not LocalFederation.attach(fed_dir).any_running()
        assert len(_pending(reports)) == 1  # the entry outlived its runner; what it broke did not

        restored = _gameday("restore", "--reports", str(reports), cwd=pytester.path)
        assert restored.returncode == 0, restored.stdout + restored.stderr
        assert "CLEAR gateway_down b" in restored.stdout, restored.stdout
        assert "has no process left" in restored.stdout, restored.stdout
        assert _pending(reports) == []
        assert find_processes(tag) == []
        again = _gameday("restore", "--reports", str(reports), cwd=pytester.path)
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        if proc.poll() is None:
            proc.kill()
        _gameday("down", "--force", "--reports", str(reports), cwd=pytester.path)


def test_a_stop_condition_reverts_within_a_second_and_aborts(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_abort="""
        import pytest
        from gameday.errors import DrillAborted
        from gameday.observers.watch import LoadBounds

        TICK_S = 0.1  # the stop condition is evaluated once an observer tick
        REVERT_S = 1.0  # the revert: the launcher forks the stopped gateway again and it listens (~0.2 s idle)
        LOADED_SLACK_S = 2.0  # a loaded 2-core CI machine (load ~11) can delay a step by ~1-2 s

        @pytest.mark.gameday
        def test_abort(drill, load):
            with pytest.raises(DrillAborted, match="client error ratio"):
                with drill.fault("gateway_down", "a") as fault:  # refused at once: ~50 % errors until TTL
                    drill.observe_switchover(fault, timeout=60)
            res = drill.results[0]
            marks = {m.label: m.t for m in res.timeline.marks}
            done = [(r.t + r.latency, r.failed) for r in res.timeline.requests]

            def ratio(t):  # client error ratio of the requests completed in the second before t
                last = [f for c, f in done if t - 1.0 <= c <= t]
                return sum(last) / len(last) if last else 0.0

            # The breach, recomputed from the records: the ratio above 0.1 (--gameday-stop-error-ratio)
            # without a break for 1 s (--gameday-stop-after), sampled every 50 ms, from the injection
            # call's start: the gateway refuses during the call (which took seconds on a loaded CI
            # machine), and the watch counts those errors too
            t, above_since, breach = marks.get("inject_call", res.fault.t_fault), None, None
            while t < marks["revert"] and breach is None:
                above_since = (above_since or t) if ratio(t) > 0.1 else None
                if above_since is not None and t - above_since >= 1.0:
                    breach = t
                t += 0.05
            assert breach is not None, "the records show no breach, yet the drill aborted"
            print(f"ABORT-DELAY {marks['revert'] - breach:.3f}")
            assert res.fault.aborted
            # At once, not at the block's end (after the 5 s DNS TTL and the 10 s recovery window):
            # the records reach the harness LoadBounds.lag late, the next tick sees the breach, the revert.
            assert marks["revert"] - marks["stop_condition"] < REVERT_S + LOADED_SLACK_S
            assert marks["revert"] - breach < LoadBounds().lag + TICK_S + REVERT_S + LOADED_SLACK_S
    """)
    result = pytester.runpytest_subprocess("-s", "--gameday-stop-error-ratio=0.1", "--gameday-stop-after=1",
                                           timeout=240)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*ABORT-DELAY *"])
    assert _pending(pytester.path / "reports") == []


def test_rounds_repeat_a_drill_with_seeded_picks_and_summarise(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_rounds="""
        import pytest

        @pytest.mark.gameday
        def test_outage(drill):
            region = drill.pick_region()
            print("PICK", drill.round, region)
            with drill.fault("gateway_down", region) as fault:
                result = drill.observe_switchover(fault, timeout=20)
            result.assert_switchover_under(10)
    """)
    first = pytester.runpytest_subprocess("-s", "--gameday-seed=11", "--gameday-rounds=3", timeout=240)
    first.assert_outcomes(passed=3)
    first.stdout.fnmatch_lines(["*test_outage?round1?*", "*across rounds:*", "test_outage*3*switchover*s*s*s*"])
    picks = re.findall(r"PICK (\d) ([a-c])", first.stdout.str())
    assert [p[0] for p in picks] == ["0", "1", "2"]
    # The same seed gives the same picks: a run can be reproduced. (Replayed as a dry run: it
    # picks as a real run does, then injects nothing, so the replay costs no drills.)
    again = pytester.runpytest_subprocess("-s", "--gameday-seed=11", "--gameday-rounds=3", "--gameday-dry-run",
                                          timeout=240)
    again.assert_outcomes(skipped=3)
    assert re.findall(r"PICK (\d) ([a-c])", again.stdout.str()) == picks
