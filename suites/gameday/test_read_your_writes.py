"""Read-your-writes while replication is held back (DESIGN.md section 9: stale reads).

Replication stalls (``replication_lag``: an async store's replicator is held, a sync store's
follower frozen) while the drill's writer writes and every writer client reads its own
acknowledged writes back at once through the global entry, wherever its DNS answer sends it. A
store that serves reads from where the data is current (the primary, a Raft stream's leader)
shows each client what it was told is stored: no stale read, nothing lost. One that serves a
region's reads from that region's lagging copy does not (the ``reads_from_local_replica``
control in tests/negative/test_state_controls.py).
"""

from __future__ import annotations

import pytest

STALL_S = 3.0


@pytest.mark.gameday
def test_reads_see_own_writes_while_replication_lags(drill, load):
    # 2 s of baseline and 3 s of stall at 5 writes/s: about 15 writes acknowledged while nothing is
    # copied, each read back by its own client (about two in three through a region that is not
    # the primary, where a lagging copy would show).
    with drill.fault("replication_lag", baseline=2.0) as stall:
        result = drill.observe(stall, seconds=STALL_S)
    result.assert_verdict("data_loss")  # the stall loses nothing: the primary kept every write
    result.assert_verdict("stale_reads")
