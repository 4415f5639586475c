"""The headline game day (article 000): disable a randomly chosen region's gateway under load."""

from __future__ import annotations

import pytest


@pytest.mark.gameday
def test_random_gateway_outage(drill, load):
    region = drill.pick_region()  # seeded, recorded
    with drill.fault("gateway_down", region) as fault:
        result = drill.observe_switchover(fault)
    result.assert_switchover_under()  # 180 s unless configured
    result.assert_dns_converged()
    result.assert_headroom()  # capacity first: too little of it is why clients would not recover
    result.assert_client_recovered()
    result.assert_versions_incremented()
    result.assert_no_stale_snapshot_alarms()
    # As fast as the federation is configured to fail over, no faster: the windows its own
    # timing predicts (the prediction is printed in the header and the dry run).
    result.assert_as_predicted()
