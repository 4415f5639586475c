"""R8: global routing by static weights, with TTLs; a failed region's weight goes to the
healthy regions in proportion to their weights.

Each GSLB answer names one region, picked at random by weight, so the checks are
statistical: over N answers each region's share must lie within a Hoeffding bound of its
weight share, chosen so that a GSLB answering exactly by weight fails the check with
probability below 1e-6 (see :mod:`gameday.conformance.stats`). With N = 2,000 and three
regions the tolerance is about 6 points: a GSLB ignoring 50/30/20 weights (33 % each) is
17 points off.
"""

from __future__ import annotations

import pytest

from gameday.conformance.stats import FALSE_FAILURE, hoeffding_epsilon

QUERIES = 2000


def _check_shares(view, answers, weights, what):
    counts = dict.fromkeys(weights, 0)
    other = []
    for a in answers:
        r = view.region_of(a.addresses[0]) if a.addresses else "(empty)"
        if r in counts:
            counts[r] += 1
        else:
            other.append(r)
    n = len(answers)
    eps = hoeffding_epsilon(n, FALSE_FAILURE, checks=len(weights))
    total = sum(weights.values())
    lines = [f"{r}: {counts[r] / n:.1%} (weight share {w / total:.1%})" for r, w in weights.items()]
    assert not other, (f"expected {what} to name only {sorted(weights)}; {len(other)} of {n} answers named "
                       f"{sorted(set(other))}")
    off = [r for r, w in weights.items() if abs(counts[r] / n - w / total) > eps]
    assert not off, (f"expected {what}'s answer shares within ±{eps:.1%} of the weight shares (Hoeffding bound, "
                     f"false-failure probability < {FALSE_FAILURE:g}, {n} answers); regions {off} are outside: "
                     + ", ".join(lines))


def _check_ttl(answers, ttl, what):
    bad = [a for a in answers if a.rcode != "NOERROR" or len(a.addresses) != 1 or a.ttl != ttl
           or not a.authoritative]
    assert not bad, (f"expected every answer of {what} to be NOERROR, authoritative, one A record with TTL {ttl} s "
                     f"(the topology's dns_ttl); {len(bad)} of {len(answers)} were not, e.g. rcode {bad[0].rcode}, "
                     f"addresses {bad[0].addresses}, TTL {bad[0].ttl}, AA {bad[0].authoritative}")


@pytest.mark.conformance("R8", "DNS answers follow the static weights (2,000 queries) and carry the TTL")
def test_r8_dns_answers_follow_static_weights(view, federation, timing, converge_s, full_weight):
    answers = view.dns(QUERIES)
    # A region re-admitted during the sample would ramp and skew it: check none did.
    view.wait_dns_settled(0.0)
    _check_ttl(answers, timing.dns_ttl, "the GSLB")
    _check_shares(view, answers, {r.name: r.weight for r in federation.regions()}, "the GSLB")


@pytest.mark.conformance("R8", "a failed region's weight is redistributed in proportion to the others' weights")
def test_r8_failed_region_weight_redistributed_proportionally(drill, view, federation, timing, converge_s,
                                                              full_weight):
    region = drill.pick_region()
    survivors = {r.name: r.weight for r in federation.regions() if r.name != region}
    with drill.fault("gateway_down", region):
        view.wait_dns_settled(converge_s, regions=sorted(survivors))
        answers = view.dns(QUERIES)
    _check_ttl(answers, timing.dns_ttl, f"the GSLB with region {region} down")
    _check_shares(view, answers, survivors, f"the GSLB with region {region} down")
