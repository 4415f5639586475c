"""Recovery and failback: the region returns on a weight ramp (R10), not at once, and the
control-plane version increments for the failure and again for the return."""

from __future__ import annotations

import pytest


@pytest.mark.gameday
def test_recovery_and_failback_on_a_ramp(drill, load, topology):
    region = drill.pick_region()
    with drill.fault("gateway_down", region, observe_after=topology.timing.ramp_seconds + 1) as fault:
        result = drill.observe_switchover(fault)
    result.assert_switchover_under()
    result.assert_versions_incremented()
    result.assert_gradual_readmission()
    result.assert_no_stale_snapshot_alarms()
