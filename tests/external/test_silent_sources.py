"""A source that never answered is not a healthy source (issue 28): the alarm verdicts of a drill
whose alarm log files are not there are "not applicable" with the reason, never "0 alarms"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gameday.targets.local.federation import LocalFederation
from tests.external.conftest import reference_profile, write_profile

pytestmark = pytest.mark.slow

TEST = """
import json
from pathlib import Path


def test_alarms_of_a_silent_source(drill):
    with drill.fault("mark_window", baseline=0.5, observe_after=0) as fault:
        fault.result  # nothing to wait for: the window is the block
    result = fault.result
    result.assert_no_stale_snapshot_alarms()
    Path("verdicts.json").write_text(json.dumps([v.as_dict() for v in result.verdicts]))
"""


def test_an_alarm_log_that_is_not_there_makes_the_alarm_verdict_not_applicable(
        pytester_ini: pytest.Pytester, reference_federation: LocalFederation, tmp_path: Path) -> None:
    data = reference_profile(reference_federation, faults={"mark_window": {
        "inject": {"argv": ["true"], "timeout": 5}, "revert": {"argv": ["true"], "timeout": 5}}})
    for alarm in data["alarms"]:  # every proxy's log "moved" where nothing is
        alarm["log"]["path"] = str(tmp_path / "nowhere" / Path(alarm["log"]["path"]).name)
    profile = write_profile(tmp_path / "profile.yaml", data)
    pytester_ini.makepyfile(test_silent=TEST)
    result = pytester_ini.runpytest_subprocess("--gameday-target=external", f"--gameday-profile={profile}",
                                               "--gameday-seed=5", timeout=240)
    result.assert_outcomes(skipped=1)  # its one verdict was not applicable: skipped, saying why
    (verdict,) = json.loads((pytester_ini.path / "verdicts.json").read_text())
    assert verdict["name"] == "stale_alarms" and verdict["outcome"] == "n/a", verdict
    assert "never answered" in verdict["detail"] and "does not exist" in verdict["detail"], verdict
    assert "/nowhere/proxy-" in verdict["detail"], verdict
