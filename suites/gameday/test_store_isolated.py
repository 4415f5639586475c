"""The store's primary is cut off alive, then comes back as it was (DESIGN.md section 9: fencing).

Unlike ``store_down`` (the node killed and started again), ``store_isolated`` freezes the node
that leads the data: it keeps everything it held and its clients' connections, answers nothing,
and the rest of the store promotes a standby (``async``) or elects a new leader (``sync``)
behind its back. The revert resumes it exactly as it was, believing itself the primary: the
moment split brain happens if nothing fences it. Every acknowledged write must still be there,
no write may be acknowledged at the old epoch after the promotion, writes must be taken again,
and every client must still find its own writes.
"""

from __future__ import annotations

import pytest

from gameday.interfaces import HasStatePrimary


@pytest.mark.gameday
def test_store_primary_isolated_and_back(drill, load):
    if not isinstance(drill.target, HasStatePrimary):
        pytest.skip(f"target {drill.target.name} cannot say which region leads the data (HasStatePrimary)")
    region = drill.target.state_primary()
    # 2 s of baseline (about 10 writes acknowledged by the primary before it is cut off); 3 s
    # observed after it is back: at 5 writes/s, about a third through its region, an unfenced old
    # primary taking none of them in 3 s is e^-5 likely.
    with drill.fault("store_isolated", region, baseline=2.0, observe_after=3.0) as fault:
        result = drill.observe(fault, seconds=8)  # the promotion or election behind its back
    result.assert_verdict("fencing")  # async: nothing taken at the old epoch (sync: n/a)
    result.assert_verdict("write_recovery")
    result.assert_verdict("write_recovery_vs_prediction")  # async: the stated failover; sync: the election
    result.assert_verdict("data_loss")
    result.assert_verdict("stale_reads")
