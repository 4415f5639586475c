"""Replication stalls, then the primary is lost (DESIGN.md section 9: what RPO means).

Replication is held back for a while (``replication_lag``: a stalled WAL sender, or a replica
frozen), and then the store node that leads the data is killed while still held back. With
``sync`` replication every acknowledgement was a quorum's (with one replica frozen, both others
had to hold it), so nothing acknowledged is lost: the drill passes. With ``async`` replication
what the primary acknowledged during the stall was never copied, and the promoted standby does
not have it: ``data_loss`` fails, its RPO about the stall's length, and so does the prediction
(``RPO <= max_lag``) - tests/negative/test_state_controls.py runs it so.
"""

from __future__ import annotations

import pytest

from gameday.interfaces import HasStatePrimary

STALL_S = 2.0


@pytest.mark.gameday
def test_primary_lost_while_replication_stalls(drill, load):
    if not isinstance(drill.target, HasStatePrimary):
        pytest.skip(f"target {drill.target.name} cannot say which region leads the data (HasStatePrimary)")
    region = drill.target.state_primary()
    with drill.fault("replication_lag", baseline=2.0) as stall:
        drill.observe(stall, seconds=STALL_S)  # ~10 writes acknowledged while nothing is copied
        with drill.fault("store_down", region) as down:
            result = drill.observe(down, seconds=8)  # the standby promoted, or a quorum's election
    # What the stated replication allows first (async: RPO <= max_lag), then the budget: an async
    # federation may lose what its stated lag allows, and the prediction says whether it lost more.
    result.assert_verdict("data_loss_vs_prediction")
    result.assert_verdict("data_loss")
    result.assert_verdict("write_recovery")
    result.assert_verdict("write_recovery_vs_prediction")  # async: the stated failover; sync: n/a (an election)
