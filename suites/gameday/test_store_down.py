"""The state layer's fourth-layer drill (DESIGN.md section 9): the store's primary is lost under load.

The region whose store node leads the data (a Raft stream's leader) loses that node (``kill -9``)
while the drill's writer writes; after the restore every acknowledged write must still be there
(``sync`` replication: a quorum held each one) and writes must be accepted again.
"""

from __future__ import annotations

import pytest

from gameday.interfaces import HasStatePrimary


@pytest.mark.gameday
def test_store_primary_lost(drill, load):
    if not isinstance(drill.target, HasStatePrimary):
        pytest.skip(f"target {drill.target.name} cannot say which region leads the data (HasStatePrimary)")
    region = drill.target.state_primary()
    # 2 s of steady state under the writer (5 writes/s): about 10 writes acknowledged before the
    # kill, so a store that loses them shows it (none acknowledged: e^-10 = 5e-5).
    # 3 s observed after the restore: an old primary back from the dead must not take writes
    # (fencing); at 5 writes/s, about half through its region, none there in 3 s is e^-7.5 likely.
    with drill.fault("store_down", region, baseline=2.0, observe_after=3.0) as fault:
        # Long enough for most of a Raft election among the surviving nodes (nats-server: 4-9 s from
        # the last heartbeat; 30 drills took writes again after 4.5-9.0 s) or an async promotion
        # (1.2-3.6 s), and writes after it; write recovery is measured past the revert too.
        result = drill.observe(fault, seconds=8)
    result.assert_verdict("fencing")  # async: no write taken at the old epoch once promoted (sync: n/a)
    result.assert_verdict("write_recovery")
    # async: within the stated failover (detection, lease, promotion); sync: the store's Raft election
    # (3.0-10.8 s: nats-server's election timeout from the last heartbeat, a second vote round, a write)
    result.assert_verdict("write_recovery_vs_prediction")
    result.assert_verdict("data_loss")  # an acknowledged write is a quorum's: none lost
    result.assert_verdict("data_loss_vs_prediction")
    result.assert_verdict("stale_reads")  # the new leader serves every acknowledged write at once
    result.assert_verdict("duplicates")  # the queue's leader moved too: no task processed twice or lost
