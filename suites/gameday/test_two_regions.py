"""Two regions out, one after the other: allowed only where N-2 capacity holds; otherwise
refused up front with the capacity arithmetic (see tests/ for the refusal)."""

from __future__ import annotations

import pytest


@pytest.mark.gameday(rate=40)  # one region (80 req/s) carries the rest with margin
def test_two_regions_out_one_after_the_other(drill, load):
    first = drill.pick_region()
    second = drill.pick_region(exclude=[first])
    drill.check_capacity(first, second)  # refused here, before anything breaks, if N-2 does not hold
    with drill.fault("gateway_down", first) as f1:
        r1 = drill.observe_switchover(f1)
        with drill.fault("gateway_down", second) as f2:
            r2 = drill.observe_switchover(f2)
    for r in (r1, r2):
        r.assert_switchover_under()
        r.assert_versions_incremented()
        r.assert_headroom()
        r.assert_no_stale_snapshot_alarms()
    r2.assert_client_recovered()
