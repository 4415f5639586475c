"""The negative control of issue 22: a drill whose harness is really starved (its pytest process
stopped with SIGSTOP for 1.5 s right after the fault took effect, while the federation and the
load run on) comes out inconclusive: never a pass, never "the federation was too slow".

The other way round, a federation slow by a configured amount with a healthy harness, still fails:
tests/negative/test_prediction_controls.py (probe interval 3x the stated one, among others).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.negative.conftest import INI, REPO, merge_changes

pytestmark = pytest.mark.slow

# The headline drill, which says when its fault is in effect (the pytest process's pid).
HEADLINE = """
import os
from pathlib import Path
import pytest

@pytest.mark.gameday
def test_random_gateway_outage(drill, load):
    region = drill.pick_region()
    with drill.fault("gateway_down", region) as fault:
        Path("injected").write_text(str(os.getpid()))
        result = drill.observe_switchover(fault)
    result.assert_switchover_under()
    result.assert_dns_converged()
    result.assert_headroom()
    result.assert_client_recovered()
    result.assert_versions_incremented()
    result.assert_no_stale_snapshot_alarms()
    result.assert_as_predicted()
"""
PAUSE_S = 1.5
"""How long the harness is stopped: over the 1 s gap limit, and past the 0.4-0.7 s the default
federation takes to switch over, so that the observer misses the switch."""


def _starved_drill(path: Path, changes: dict[str, object], *args: str) -> tuple[int, str, Path]:
    """Run the drill in *path* against the default topology with *changes*; stop its pytest for
    :data:`PAUSE_S` as soon as the fault is in effect. Returns the exit status, the output and
    the reports directory."""
    (path / "pytest.ini").write_text(INI)
    (path / "test_headline.py").write_text(HEADLINE)
    topo = yaml.safe_load((REPO / "clusters" / "local.yaml").read_text())
    merge_changes(topo, changes)
    (path / "topology.yaml").write_text(yaml.safe_dump(topo))
    log = path / "drill.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "test_headline.py", "-v", "--gameday-topology",
                                 "topology.yaml", "--junitxml=junit.xml", *args],
                                cwd=path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            marker, deadline = path / "injected", time.monotonic() + 120
            while not marker.exists():
                assert proc.poll() is None, f"the drill ended before its fault:\n{log.read_text()}"
                assert time.monotonic() < deadline, f"no fault within 120 s:\n{log.read_text()}"
                time.sleep(0.01)
            pid = int(marker.read_text() or proc.pid)
            os.kill(pid, signal.SIGSTOP)  # the whole harness process: observer, drill, watcher
            try:
                time.sleep(PAUSE_S)
            finally:
                os.kill(pid, signal.SIGCONT)
            rc = proc.wait(180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return rc, log.read_text(), path / "reports"


def _verdicts(reports: Path) -> dict[str, str]:
    (figures,) = reports.glob("runs/*/drills/*/figures-0.json")
    summary = json.loads(figures.read_text())
    assert summary["harness"]["starved"] is True
    assert summary["harness"]["sources"]["observer"]["max_gap_s"] >= PAUSE_S - 0.1
    return {v["name"]: v["outcome"] for v in summary["verdicts"]}


def _no_fault_left(reports: Path) -> None:
    ledger = reports / ".gameday" / "ledger.json"
    assert not ledger.exists() or json.loads(ledger.read_text())["pending"] == []


def test_a_healthy_federation_observed_by_a_stopped_harness_is_inconclusive_not_passed(tmp_path: Path) -> None:
    rc, out, reports = _starved_drill(tmp_path, {})
    assert rc == 6, out
    assert "test_headline.py::test_random_gateway_outage INCONCLUSIVE" in out
    assert "the observer's loop ran" in out and "harness starved over the" in out
    assert " passed" not in out.splitlines()[-1] and " failed" not in out.splitlines()[-1]
    verdicts = _verdicts(reports)
    # Against 180 s the switchover passes at any resolution; against its 0.4-0.7 s prediction it
    # passed only because the pause widened the resolution: inconclusive, not a pass.
    assert verdicts["switchover"] == "pass"
    assert "inconclusive" in {verdicts["switchover_vs_prediction"], verdicts["dns_convergence_vs_prediction"]}
    assert "fail" not in verdicts.values()
    _no_fault_left(reports)


def test_a_slow_federation_observed_by_a_stopped_harness_is_inconclusive_not_failed(tmp_path: Path) -> None:
    # Probes 3x slower than stated: with a healthy harness this fails its prediction
    # (test_prediction_controls); with the harness stopped the figures say nothing either way.
    rc, out, reports = _starved_drill(tmp_path, {"timing": {"dns_ttl": 1},
                                                 "defects": {"probe_interval_factor": 3.0}},
                                      "--gameday-recovery-window=3")
    assert rc == 6, out
    assert "INCONCLUSIVE" in out and "AssertionError" not in out
    verdicts = _verdicts(reports)
    assert "inconclusive" in verdicts.values() and "fail" not in verdicts.values()
    _no_fault_left(reports)
