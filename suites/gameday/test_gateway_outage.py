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
    # The fourth layer (DESIGN.md §9): the writes made during the drill, read back after it.
    result.assert_verdict("data_loss")  # no acknowledged write lost
    result.assert_verdict("data_loss_vs_prediction")  # what the stated replication allows (sync: 0)
    result.assert_verdict("write_recovery")  # writes accepted again, through the surviving regions
    result.assert_verdict("write_recovery_vs_prediction")  # by the time the clients are predicted to have moved
    result.assert_verdict("stale_reads")  # every client reads back what it was told is stored
    result.assert_verdict("duplicates")  # every background task processed exactly once
