"""Article 000's "pulling the cable": a whole region stops answering, nothing in or out."""

from __future__ import annotations

import pytest


@pytest.mark.gameday
def test_region_blackhole(drill, load):
    region = drill.pick_region()
    with drill.fault("region_blackhole", region) as fault:
        result = drill.observe_switchover(fault)
    result.assert_switchover_under()
    result.assert_dns_converged()
    result.assert_client_recovered()
    result.assert_versions_incremented()
    result.assert_headroom()
    result.assert_no_stale_snapshot_alarms()  # the cut-off region's own proxy is stale for real; not counted
