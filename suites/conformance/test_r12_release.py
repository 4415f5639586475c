"""R12: release region by region - a standby (lowest-weight) region first, the primary last,
each region verified before the next is touched.

The plan is the target's own (``federation.release_plan()``: the kind/kube targets' real
rollout order; the local target's :func:`gameday.model.release.plan_release`) and is judged by
:func:`gameday.model.release.check_release_order`. It is then carried out with
``federation.rollout_region`` (local: a rolling restart of the region's app instances,
one at a time), and between steps the region is verified: every entry node converged and
routing to every region, and requests through the region's gateway served by the region.
"""

from __future__ import annotations

import itertools

import pytest

from gameday.conformance.capabilities import require
from gameday.interfaces import Releasable
from gameday.model.release import check_release_order, run_release

PROBE_REQUESTS = 5


@pytest.mark.conformance("R12", "the release plan goes standby first, primary last")
def test_r12_release_plan_is_standby_first_primary_last(federation, topology):
    plan = require(federation, Releasable, "R12 judges the target's own release order").release_plan()
    problems = check_release_order(plan, federation.regions(), topology.primary_region)
    weights = {r.name: r.weight for r in federation.regions()}
    assert not problems, (f"expected a release plan with the lowest-weight regions first and the primary "
                          f"{topology.primary_region} last; the target's plan {plan} (weights {weights}): "
                          + "; ".join(problems))


@pytest.mark.conformance("R12", "a rolling release goes region by region, verified between steps")
def test_r12_rolling_release_region_by_region(federation, view, converge_s, settled):
    releasable = require(federation, Releasable, "R12 rolls the release out region by region")
    plan = releasable.release_plan()
    counts = {}

    def requests_total(region):
        return {u: view.get_json(u).get("requests_total") for u in view.instances(region)}

    for region in plan:  # every instance serves a few requests so a restart shows as a reset counter
        for u in view.instances(region):
            for _ in range(PROBE_REQUESTS):
                view.request(view.ep.sibling(u, "/work"))
        counts[region] = requests_total(region)

    def verify(region):
        now = requests_total(region)
        kept = [u for u, n in now.items() if n is None or n >= counts[region][u]]
        assert not kept, (f"expected every app instance of {region} to have been replaced by the rollout; "
                          f"these kept their request counters {[(u, counts[region][u], now[u]) for u in kept]}")
        view.wait_converged(converge_s)
        replies = [view.request(view.gateway_work_url(region)) for _ in range(PROBE_REQUESTS)]
        bad = [r for r in replies if r.status != 200 or r.region != region]
        assert not bad, (f"expected {region}'s gateway to serve from {region} after its release step; "
                         f"{len(bad)} of {len(replies)} did not, first: {bad[0]}")

    steps = run_release(plan, releasable.rollout_region, verify)
    assert [s.region for s in steps] == list(plan), f"expected the release to follow {plan}; it did {steps}"
    overlaps = [(a.region, b.region) for a, b in itertools.pairwise(steps) if b.started < a.verified]
    assert not overlaps, f"expected each region verified before the next started; overlapping steps {overlaps}"
