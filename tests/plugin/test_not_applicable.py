"""A real drill on the local target whose sources lack the control plane and the alarms:
those verdicts are not applicable with their reasons (table, run.json, JUnit), the rest are
judged, and a test whose every verdict was not applicable is skipped, never passed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

pytestmark = pytest.mark.slow

CONFTEST = """
import dataclasses

import pytest

from gameday.targets.local import LocalTarget


class WithoutControlPlaneOrAlarms(LocalTarget):
    '''The reference app described without its control plane's version and its proxies'
    logs, as a federation exposing neither would be.'''

    def sources(self):
        return dataclasses.replace(super().sources(), control_plane=None, alarms=())


@pytest.fixture(scope="session")
def federation(federation):
    # The same running federation, observed through fewer sources.
    return WithoutControlPlaneOrAlarms(federation.topology, federation.workdir, federation.fed)
"""

TESTS = """
import pytest

@pytest.mark.gameday
def test_outage_without_cp_or_alarms(drill, load):
    region = drill.pick_region()
    with drill.fault("gateway_down", region) as fault:
        result = drill.observe_switchover(fault)
    f = result.assert_switchover_under(10)
    assert f.definition == "entry-node versions"
    result.assert_dns_converged(10)
    result.assert_headroom()
    assert not result.assert_versions_incremented().applicable
    result.assert_no_stale_snapshot_alarms()

@pytest.mark.gameday
def test_only_verdicts_without_input(drill, load):
    with drill.fault("gateway_down", "a") as fault:
        result = drill.observe(fault, 1.0)
    result.assert_versions_monotonic()
    result.assert_no_stale_snapshot_alarms()
"""


def test_verdicts_without_input_are_not_applicable_and_never_pass(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_na=TESTS)
    result = pytester.runpytest_subprocess("--gameday-seed=5", "--gameday-recovery-window=3", "-ra",
                                           "--junitxml=junit.xml", timeout=300)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*gameday drill verdicts*",
        "*test_outage_without_cp_or_alarms*gateway_down*n/a: no control-plane version source*"
        "n/a: no alarm source*",
        "SKIPPED*test_na.py:*every verdict this test asserted was not applicable: versions n/a: no control-plane "
        "version source; stale_alarms n/a: no alarm source",
    ])
    (run,) = (pytester.path / "reports" / "runs").glob("*/run.json")
    drills = {d["test"].split("::")[-1]: d for d in json.loads(run.read_text())["drills"]}
    outage = drills["test_outage_without_cp_or_alarms"]
    assert outage["not_applicable"] == {"versions": "no control-plane version source",
                                        "stale_alarms": "no alarm source",
                                        # the default topology's sync store: its acks name no epoch
                                        "fencing": "no acknowledgement named the primary's epoch (a quorum "
                                                   "store has none to fence)"}
    assert {v["name"]: v["outcome"] for v in outage["verdicts"]} == {
        "switchover": "pass", "dns_convergence": "pass", "headroom": "pass", "versions": "n/a",
        "stale_alarms": "n/a"}
    assert "control_plane" not in outage["poll_rates"]
    assert outage["poll_rates"]["dns"]["achieved_hz"] > 5
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    props = {(p.get("name"), p.get("value")) for p in cases["test_outage_without_cp_or_alarms"].iter("property")}
    assert ("gameday_na", "versions: n/a: no control-plane version source") in props
    assert ("gameday_na", "stale_alarms: n/a: no alarm source") in props
    assert cases["test_only_verdicts_without_input"].find("skipped") is not None
