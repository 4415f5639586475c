"""Flapping health: a gateway whose readiness blips for fewer probes than the fall threshold
must move nothing - no DNS oscillation, no route change, no new version (R2)."""

from __future__ import annotations

import pytest


@pytest.mark.gameday
def test_flapping_gateway_moves_nothing(drill, load, topology):
    t = topology.timing
    region = drill.pick_region()
    # Down for 1.5 probe intervals out of every 5: at most 2 failed probes in a row (< fall = 3).
    down, period = 1.5 * t.probe_interval, 5 * t.probe_interval
    with drill.fault("probe_flap", region, period=period, down=down) as fault:
        result = drill.observe(fault, seconds=max(5.0, 10 * period))
    result.assert_no_route_changes()
    result.assert_error_ratio_under()
    result.assert_no_stale_snapshot_alarms()
