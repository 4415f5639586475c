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
    # Its store node is frozen with it: a quorum of the others keeps every acknowledged write.
    result.assert_verdict("data_loss")
    result.assert_verdict("write_recovery")
    # where the frozen region's store node led the data: the Raft election (sync) or promotion (async)
    result.assert_verdict("write_recovery_vs_prediction")
    result.assert_verdict("stale_reads")  # a client moved to another region still finds its own writes
    # Its workers froze holding tasks: the queue gives them to another region after the ack wait,
    # and the frozen workers' late records on resuming are claims already made (idempotent).
    result.assert_verdict("duplicates")
