"""Article 000's second question: with the sync chain 30 s slow, how many requests reach an
instance that is already gone? North-south clients follow the GSLB's own probes; east-west
calls follow the proxies' snapshot, so they hit the dead region until the new version lands."""

from __future__ import annotations

import httpx
import pytest

from gameday.load.eastwest import EastWestLoad
from gameday.observers.reference import reference_endpoints_of

SYNC_DELAY = 30.0


def _retries(urls):
    return sum(int(httpx.get(u, timeout=2).json().get("retries_total", 0)) for u in urls)


@pytest.mark.gameday
def test_sync_delay_30s(drill, load, federation, topology, slo):
    ref = reference_endpoints_of(federation)
    if ref is None:
        pytest.skip(f"target {federation.name} does not run the reference app: it has no east-west proxies to call")
    detection = topology.timing.probe_interval * topology.timing.fall
    with drill.fault("sync_delay", seconds=SYNC_DELAY):
        region = drill.pick_region()
        proxies = [u for n, u in ref.entry_nodes.items() if n.startswith("proxy-") and ref.node_region(n) != region]
        retries_before = _retries(proxies)
        with EastWestLoad(ref.proxy_calls(skip_regions=(region,)), rate=20) as eastwest, \
                drill.fault("gateway_down", region) as fault:
            result = drill.observe_switchover(fault, timeout=SYNC_DELAY + 20)
            calls = eastwest.between(fault.window.t_fault, fault.window.t_fault + SYNC_DELAY + detection)
            misrouted = _retries(proxies) - retries_before
            failed = sum(r.failed for r in calls)
            result.notes["east_west"] = {"calls": len(calls), "misrouted_to_gone_region": misrouted,
                                         "client_visible_failures": failed}
    switchover = result.assert_switchover_under(SYNC_DELAY + detection + 2)
    assert switchover.value >= SYNC_DELAY, f"switchover {switchover} cannot beat a {SYNC_DELAY:g} s sync delay"
    assert calls, "no east-west calls were made"
    ratio = failed / len(calls)
    assert ratio <= slo.error_ratio, (
        f"{failed} of {len(calls)} east-west calls failed during the {SYNC_DELAY:g} s sync delay "
        f"({ratio:.2%}, SLO {slo.error_ratio:.2%}); {misrouted} were first sent to the gone region")
    result.assert_dns_converged(detection + 2)  # the GSLB does not wait for the sync chain
