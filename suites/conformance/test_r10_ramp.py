"""R10: recovery is gradual. A region coming back is re-admitted on a weight ramp: its DNS
share starts well below its full share and grows over ``ramp_seconds``, not at once.

The heaviest region is taken out and brought back (the strongest signal), and the GSLB
is asked continuously while it returns. Answers are grouped by time since the GSLB
re-admitted the region (its ``since_change_s``): the first third of the ramp, the middle
third, and after the ramp. Shares are compared with Hoeffding bounds (false-failure
probability < 1e-6 over all comparisons): early share significantly below the full
share, middle share significantly above the early one and above zero, and after the ramp
the full weight share.
"""

from __future__ import annotations

import time

import pytest

from gameday.conformance.stats import FALSE_FAILURE, hoeffding_epsilon
from gameday.conformance.wait import wait_until

BATCH = 200
"""Queries per GSLB sampling call while the ramp runs."""
TAIL = 2.0
"""Seconds sampled after the ramp's end (full weight)."""
CHECKS = 4
NOMINAL_RAMP = 6.0
"""Seconds judged as "the ramp" when the topology configures none (ramp_seconds 0)."""


@pytest.mark.conformance("R10", "a returning region is re-admitted on a weight ramp, not at once")
def test_r10_returning_region_ramps_its_dns_share(drill, view, federation, timing, converge_s, full_weight):
    # With no ramp configured the same measurement runs over a nominal window: a region
    # back at its full share from the first answer fails it like any GSLB without a ramp.
    ramp = timing.ramp_seconds or NOMINAL_RAMP
    view.gslb()  # the GSLB's status is this check's input: without it, skip before anything is injected
    regions = federation.regions()
    region = max(regions, key=lambda r: (r.weight, r.name)).name
    total = sum(r.weight for r in regions)
    full = next(r.weight for r in regions if r.name == region) / total
    with drill.fault("gateway_unready", region):
        view.wait_dns_settled(converge_s, regions=[r.name for r in regions if r.name != region])

    def readmitted():
        st = view.gslb()["regions"][region]
        return bool(st.get("healthy")), (time.monotonic() - float(st["since_change_s"]), st)

    start, _ = wait_until(readmitted, converge_s, f"the GSLB to re-admit region {region} after the revert")
    answers = []
    deadline = start + ramp + TAIL
    for _ in range(int((ramp + TAIL) * 100) + 10):  # bounded in count too: a batch of 200 takes over 10 ms
        if time.monotonic() >= deadline:
            break
        answers += view.dns(BATCH)

    def share(lo, hi):
        sel = [a for a in answers if lo <= (a.t - start) / ramp < hi]
        n = len(sel)
        hits = sum(1 for a in sel if a.addresses and view.region_of(a.addresses[0]) == region)
        return (hits / n if n else float("nan")), n

    early, n_early = share(0.0, 1 / 3)
    middle, n_mid = share(1 / 3, 2 / 3)
    after, n_after = share(1.0 + 0.05, 10.0)
    counts = {"early": n_early, "middle": n_mid, "after": n_after}
    thin = {k: n for k, n in counts.items() if n < 100}
    assert not thin, (f"too few answers to judge the ramp of {region} ({counts}); sampling started "
                      f"{answers[0].t - start if answers else float('nan'):.1f} s after re-admission")
    e_early, e_mid, e_after = (hoeffding_epsilon(n, FALSE_FAILURE, CHECKS) for n in (n_early, n_mid, n_after))
    seen = (f"{region} share (ramp_seconds {timing.ramp_seconds:g}): first third of {ramp:g} s {early:.1%} "
            f"(n={n_early}), middle third {middle:.1%} (n={n_mid}), after {after:.1%} (n={n_after}); "
            f"full weight share {full:.1%}")
    assert early + e_early < full, (f"expected {region} to return well below its full share (not at once); {seen}; "
                                    f"tolerance ±{e_early:.1%}")
    assert middle - e_mid > max(0.0, early + e_early), (
        f"expected {region}'s share to grow during the ramp (middle third above the first, and above 0); {seen}; "
        f"tolerances ±{e_early:.1%} / ±{e_mid:.1%}")
    assert abs(after - full) <= e_after, (f"expected {region} back at its full share after the ramp; {seen}; "
                                          f"tolerance ±{e_after:.1%}")
