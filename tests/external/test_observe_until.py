"""``drill.fault(observe_until=...)``: after the restore, the drill keeps observing until what a
verdict needs has been recorded (a wait on the condition, not a fixed ``observe_after``), at
most ``restore_timeout`` more seconds; a condition that never holds ends the observation there
and the test goes on to judge what was recorded.

One real run through the external target on the reference federation, with a fault that
changes nothing (``mark_window``), so that only the observation's length is under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gameday.targets.local.federation import LocalFederation
from tests.external.conftest import mark_window_profile

pytestmark = pytest.mark.slow

TICK_S = 0.1  # the drill's observer reads DNS once a tick (its interval)
LOADED_SLACK_S = 2.0  # a loaded 2-core CI machine (load ~11) can delay a step by ~1-2 s

TEST = """
import json, time
from pathlib import Path


def _observe(drill, name, done, **kw):
    calls = []

    def until():
        calls.append(time.monotonic())
        return done(calls)

    with drill.fault("mark_window", baseline=0.5, observe_after=0, observe_until=until, **kw) as fault:
        pass
    ended = time.monotonic()
    dns = [o.t for o in fault.result.timeline.copy().dns]
    Path(name).write_text(json.dumps({"calls": calls, "ended": ended, "last_dns": max(dns)}))


def test_until_it_holds(drill):
    _observe(drill, "holds.json", lambda calls: calls[-1] - calls[0] >= 4.0)


def test_never_holds(drill):
    _observe(drill, "never.json", lambda calls: False, restore_timeout=1.0)
"""


def test_observe_until_waits_for_its_condition_and_gives_up_after_the_restore_timeout(
        pytester_ini: pytest.Pytester, reference_federation: LocalFederation, tmp_path: Path) -> None:
    profile, events = mark_window_profile(reference_federation, tmp_path)
    pytester_ini.makepyfile(test_until=TEST)
    result = pytester_ini.runpytest_subprocess("--gameday-target=external", f"--gameday-profile={profile}",
                                               "--gameday-seed=5", timeout=240)
    result.assert_outcomes(passed=2)
    assert events.read_text().split() == ["inject", "revert"] * 2

    holds = json.loads((pytester_ini.path / "holds.json").read_text())
    calls = holds["calls"]
    # Asked every 0.1 s until it held (4 s after the first ask), then the block's end at once
    # (nothing configured to wait for; a wait would last restore_timeout, 60 s by default).
    assert calls[-1] - calls[0] >= 4.0 and len(calls) >= 10, calls
    assert holds["ended"] - calls[-1] < LOADED_SLACK_S, holds
    # The observer kept running all the while: DNS readings up to the end of the wait (one that
    # stopped when the wait began would have read last 4 s before its end).
    assert holds["last_dns"] > calls[-1] - (TICK_S + LOADED_SLACK_S), holds

    never = json.loads((pytester_ini.path / "never.json").read_text())
    # Never held: given up after restore_timeout (1 s), and the test went on.
    assert 1.0 <= never["calls"][-1] - never["calls"][0] + 0.1 < 3.0, never
