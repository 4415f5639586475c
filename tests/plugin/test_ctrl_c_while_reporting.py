"""A Ctrl-C while a drill's plots are drawn (issue 19, item 7: "an allure-pytest teardown
warning appears when stopping at 20 s").

About 20 s into `gameday drill` the headline drill has ended and its timeline is being drawn
(seconds of CPU on a busy machine). That used to happen inside ``pytest_runtest_makereport``,
so the KeyboardInterrupt went up through allure-pytest's old-style makereport wrapper, which
pluggy reports as ``PluggyTeardownRaisedWarning ... Plugin: allure_listener``. The drawing now
runs after the test body (``pytest_runtest_call``), where a Ctrl-C is one like any other.

The signal is a real SIGINT to the pytest process, sent by a conftest the moment the timeline
plot starts, so it lands in the drawing every time.
"""

from __future__ import annotations

import pytest

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"

CONFTEST = '''
import os
import signal

from gameday.reports import plots

_draw = plots.timeline_png


def _interrupted_draw(series):
    print("DRAWING", flush=True)
    os.kill(os.getpid(), signal.SIGINT)  # as a Ctrl-C on the terminal at this instant
    return _draw(series)


plots.timeline_png = _interrupted_draw
'''

DRILL = '''
import pytest


@pytest.mark.gameday
def test_drill(drill, load):
    with drill.fault("gateway_down", "b") as fault:
        result = drill.observe_switchover(fault, timeout=60)
    result.assert_switchover_under()
'''


@pytest.mark.slow
def test_a_ctrl_c_while_the_plots_are_drawn_stops_the_run_without_a_plugin_warning(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_drill=DRILL)
    result = pytester.runpytest_subprocess("-s", "--gameday-seed=3", f"--alluredir={pytester.path / 'allure'}",
                                           timeout=300)
    out = result.stdout.str() + result.stderr.str()
    assert "DRAWING" in out, out[-3000:]
    assert result.ret == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "Ctrl-C (SIGINT) received" in out, out[-3000:]
    assert "PluggyTeardownRaisedWarning" not in out and "allure_listener" not in out, out[-3000:]
    assert "warnings summary" not in out, out[-3000:]
