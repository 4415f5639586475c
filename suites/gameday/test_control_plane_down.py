"""The control plane goes down: the data plane keeps serving from its snapshots (R1), and the
proxies' stale-snapshot alarm - which must stay silent in every other drill - fires for real."""

from __future__ import annotations

import pytest


@pytest.mark.gameday
def test_control_plane_down_traffic_keeps_flowing_and_stale_alarm_fires(drill, load, topology):
    with drill.fault("control_plane_down") as fault:
        # Long enough for "no broadcast heard for stale_after" to become true.
        result = drill.observe(fault, seconds=topology.timing.stale_after + 3)
    result.assert_error_ratio_under()  # R1: traffic never waited for the control plane
    result.assert_stale_snapshot_alarm_fired()  # R6: the detector fires when staleness is real
    result.assert_versions_monotonic()  # the durable snapshot survives the restart
