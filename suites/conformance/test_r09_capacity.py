"""R9: N-1 capacity. With any one region gone, the others absorb its traffic.

Static: for every region r, the other regions' declared capacity covers the offered load
with the topology's margin, and - because the GSLB hands r's share out by weight - each
survivor's own share stays under the utilisation limit. Measured: under real load, with
the region whose loss is worst by that arithmetic taken out, no surviving region goes
above the utilisation limit and overload answers stay within the SLO.
"""

from __future__ import annotations

import pytest

from gameday.verdicts.capacity import static_headroom

SURVIVORS_ONLY = 4.0
"""Seconds observed after the clients' DNS caches expired (8 utilisation samples)."""


def _survivor_loads(regions, offered, lost):
    rest = [r for r in regions if r.name != lost]
    total = sum(r.weight for r in rest)
    return {r.name: (offered * r.weight / total, r.capacity) for r in rest}


def _offered(gameday_settings, topology):
    return gameday_settings.load.rate or topology.load.rate


def _declared(regions):
    """Skip (not pass) when a region's capacity is unknown (a profile without capacity_rps)."""
    unknown = [r.name for r in regions if r.capacity is None]
    if unknown:
        pytest.skip(f"not applicable: no declared capacity for region(s) {', '.join(unknown)}")


@pytest.mark.conformance("R9", "N-1: without any one region the others carry the offered load (arithmetic)")
def test_r9_static_n_minus_1_capacity(federation, topology, gameday_settings, slo):
    regions = federation.regions()
    _declared(regions)
    offered = _offered(gameday_settings, topology)
    check = static_headroom({r.name: r.capacity for r in regions}, offered, topology.load.margin)
    assert check.passed, f"expected N-1 headroom for {offered:g} req/s offered: {check.detail}"
    over = []
    for lost in (r.name for r in regions):
        for name, (load, cap) in _survivor_loads(regions, offered, lost).items():
            if load > cap * slo.utilisation_limit:
                over.append(f"without {lost}, {name} gets {load:.1f} req/s by weight for {cap:g} req/s capacity "
                            f"({load / cap:.0%} > limit {slo.utilisation_limit:.0%})")
    assert not over, "expected every survivor under the utilisation limit after redistribution: " + "; ".join(over)


@pytest.mark.conformance("R9", "N-1 measured: with the worst region out under load, utilisation stays under the limit")
def test_r9_measured_utilisation_with_the_worst_region_out(drill, load, federation, topology, gameday_settings,
                                                           timing, settled):
    regions = federation.regions()
    _declared(regions)
    offered = _offered(gameday_settings, topology)
    worst = max((r.name for r in regions),
                key=lambda lost: max(load_ / cap for load_, cap in _survivor_loads(regions, offered, lost).values()))
    # The region's gateway stops passing health checks (it still serves the clients whose
    # DNS answers have not expired, so the drill measures capacity, not connection errors).
    with drill.fault("gateway_unready", worst) as fault:
        # Clients move within one TTL; then the survivors carry the whole load for a while.
        result = drill.observe(fault, timing.dns_ttl + SURVIVORS_ONLY)
    result.assert_headroom()
