"""A real drill on the local target whose load comes from a worker "on another machine":
``python -m gameday.load.worker`` in its own process with none of the harness's settings and
its CLOCK_MONOTONIC 100000 s ahead (a time namespace), connecting over loopback. The drill
passes only if that worker's records land on the harness's clock (client recovery is
measured from them), and the figure's resolution carries the measured clock uncertainty."""

from __future__ import annotations

import json
import subprocess

import pytest

from gameday.runtime.ports import free_port
from tests.load.test_remote_workers import _reap, _shifted_clock_prefix, _start_worker

pytestmark = pytest.mark.slow

DRILL = """
import pytest

@pytest.mark.gameday
def test_random_gateway_outage(drill, load):
    region = drill.pick_region()
    with drill.fault("gateway_down", region) as fault:
        result = drill.observe_switchover(fault)
    result.assert_switchover_under(10)
    result.assert_client_recovered(30)
"""


def test_a_drill_under_load_from_a_remote_worker(pytester: pytest.Pytester) -> None:
    prefix = _shifted_clock_prefix()
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")
    pytester.makepyfile(test_drill=DRILL)
    port = free_port()
    worker: list[subprocess.Popen[bytes]] = [_start_worker(port, pytester.path / "worker.log", prefix)]
    try:
        result = pytester.runpytest_subprocess(
            "--gameday-seed=5", "--gameday-recovery-window=3", "--gameday-load-expect-workers=1",
            f"--gameday-load-master-bind=127.0.0.1:{port}", "--gameday-load-workers-wait=60", timeout=240)
    finally:
        codes = _reap(worker, grace=15)
    result.assert_outcomes(passed=1)
    figures = list((pytester.path / "reports" / "runs").glob("*/drills/*/figures-0.json"))
    assert len(figures) == 1
    data = json.loads(figures[0].read_text())
    rec = data["client_recovery"]
    assert rec["value_s"] is not None and rec["resolution_s"] > 0.1, rec  # the step plus the clock's uncertainty
    assert "remote load workers' clock offsets" in rec["detail"], rec
    assert data["load"]["achieved_rps"] > 0
    records = list((pytester.path / "reports" / "runs").glob("*/load/*/records/requests-w-*.jsonl"))
    assert len(records) == 1, records  # every request came from the remote worker, through the master
    assert codes == [0], f"the worker did not quit with the drill: {(pytester.path / 'worker.log').read_text()[-1500:]}"
