"""A drill stopped by Ctrl-C mid-observation is in the history, marked aborted (issue 19, item 7).

pytest records no result for a test a KeyboardInterrupt stopped, so the drill's summary used
to vanish, or, recorded another way, count as a complete drill. Now it is shown in the verdict
table as ABORTED and appended with ``"aborted": "interrupted by Ctrl-C (SIGINT)"``; the
regression verdict and the trend leave it out. A real SIGINT to the pytest process, 1 s into
the observation.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gameday.reports.history import check_regression, load_history

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"

DRILL = '''
import os
import signal
import time

import pytest


@pytest.mark.gameday
def test_interrupted(drill, load):
    with drill.fault("gateway_down", "b") as fault:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            drill.observe(fault, 0.1)
        os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C, 1 s into the observation
        drill.observe_switchover(fault, timeout=60)
    raise AssertionError("the drill went on after the Ctrl-C")
'''


@pytest.mark.slow
def test_a_drill_stopped_by_ctrl_c_is_appended_aborted_and_left_out_of_the_regression(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_int=DRILL)
    result = pytester.runpytest_subprocess("-s", "--gameday-seed=3", timeout=300)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out[-3000:]
    # After a signal any error ends the run INTERRUPTED (gameday.plugin.interrupted), the
    # AssertionError below included: its message shows whether the drill went on.
    assert "the drill went on after the Ctrl-C" not in out, out[-3000:]
    assert "gateway_down (ABORTED)" in out, out[-3000:]
    (row,) = load_history(pytester.path / "reports" / "history.jsonl")
    assert row.aborted == "interrupted by Ctrl-C (SIGINT)" and not row.passed
    # Three complete runs at 1.0 s and this aborted one: the median is of the complete ones.
    rows = [row, *(replace(row, run=f"r{i}", aborted=None, passed=True, switchover_s=1.0) for i in range(3))]
    assert check_regression(rows, 1.0, test=row.test, fault=row.fault).previous == 3

