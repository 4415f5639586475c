"""R1: traffic and state are decoupled.

With the control plane or the bus down, the data plane keeps serving from its last
snapshot: every gateway and every local proxy still answers, by the version it had, within
the request budget, and the GSLB keeps answering with every region.
"""

from __future__ import annotations

import pytest

DNS_QUERIES = 300
"""Enough that a region of weight 20 % is missing from the answers with probability 0.8^300."""


@pytest.mark.conformance("R1", "the data plane serves from its last snapshot with the control plane or bus down")
@pytest.mark.parametrize("kind", ["control_plane_down", "bus_down"])
def test_r1_data_plane_serves_without_the_sync_chain(kind, drill, view, timing, settled):
    # Longer than a region takes to be declared dead, so anything that waited on the
    # control plane (or the bus) would have shown it.
    hold = max(2.0, timing.region_timeout + timing.heartbeat_interval)
    urls = view.entry_urls()
    with drill.fault(kind) as fault:
        replies = view.requests_for(urls, hold)
        answers = view.dns(DNS_QUERIES)
        t_fault = fault.window.t_fault
    before = {o.node: o.version for o in sorted(fault.result.timeline.copy().nodes, key=lambda o: o.t)
              if o.ok and o.t < fault.window.t_call}
    assert replies, "no entry node to send requests through"
    for node, rs in replies.items():
        bad = [r for r in rs if r.status != 200]
        assert not bad, (f"expected every request through {node} to be served with {kind} in effect; "
                         f"{len(bad)} of {len(rs)} failed, first: {bad[0]}")
        slow = [r for r in rs if r.elapsed > timing.request_budget]
        assert not slow, (f"expected requests through {node} within the request budget "
                          f"{timing.request_budget:g} s with {kind} in effect (state sync must not sit on the "
                          f"request path); {len(slow)} of {len(rs)} took longer, slowest: "
                          f"{max(slow, key=lambda r: r.elapsed)}")
        # One version for the whole outage (nothing can change it), and not older than the
        # one seen before it (a broadcast may still have landed while the fault went in).
        versions = sorted({r.route_version or 0 for r in rs})
        last = before.get(node) or 0
        assert len(versions) == 1, (f"expected {node} to route by one snapshot (its last) while {kind}; its replies "
                                    f"carried versions {versions}")
        assert versions[0] >= last, (f"expected {node} to keep its last snapshot while {kind}; it routed by "
                                     f"v{versions[0]}, older than the v{last} it had before")
    regions = sorted({view.region_of(a) for ans in answers for a in ans.addresses})
    empty = [a for a in answers if len(a.addresses) != 1]
    assert not empty, (f"expected one A record per GSLB answer with {kind} in effect; {len(empty)} of "
                       f"{len(answers)} had {sorted({len(a.addresses) for a in empty})} (rcodes "
                       f"{sorted({a.rcode for a in empty})}), starting t+{empty[0].t - t_fault:.1f} s")
    assert regions == sorted(view.names), (f"expected the GSLB to keep answering with every region with {kind} "
                                           f"in effect; {len(answers)} answers named only {regions}")
