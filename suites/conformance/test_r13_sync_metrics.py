"""R13: the sync pipeline is observable. The control plane exposes, in Prometheus text, its
event processing latency as a histogram and its consumer backlog; at rest the backlog is
0, and for the events of a real change the processing latency P99 is below 1 s."""

from __future__ import annotations

import pytest

from gameday.conformance import promtext
from gameday.conformance.wait import wait_until

LATENCY = "gameday_cp_processing_latency_seconds"
BACKLOG = "gameday_cp_backlog"
P99_LIMIT = 1.0


@pytest.mark.conformance("R13", "sync metrics (P99 processing latency, backlog) are exposed and sane")
def test_r13_sync_metrics_exposed_and_sane(drill, view, converge_s, settled):
    cp = view.cp_url()
    m0 = view.metrics(cp)
    exposed = m0.types.get(LATENCY) == "histogram" and bool(m0.histogram(LATENCY))
    assert exposed, (
        f"expected the control plane's /metrics to expose {LATENCY} as a histogram; TYPE is "
        f"{m0.types.get(LATENCY)!r}, buckets {m0.histogram(LATENCY)}")
    exposed = m0.types.get(BACKLOG) == "gauge" and m0.value(BACKLOG) is not None
    assert exposed, (
        f"expected the control plane's /metrics to expose {BACKLOG} as a gauge; TYPE {m0.types.get(BACKLOG)!r}")
    region = drill.pick_region()
    before = view.metrics(cp).histogram(LATENCY)
    with drill.fault("gateway_unready", region):
        view.wait_converged(converge_s, regions=[r for r in view.names if r != region])
    view.wait_converged(converge_s)
    after = view.metrics(cp)
    delta = promtext.bucket_delta(after.histogram(LATENCY), before)
    n = delta[-1][1]
    assert n >= 2, (f"expected the change and its revert to be processed as events (>= 2 observations of {LATENCY}); "
                    f"the histogram grew by {n:g}")
    p99 = promtext.quantile_upper_bound(delta, 0.99)
    assert p99 <= P99_LIMIT, (
        f"expected P99 event processing latency <= {P99_LIMIT:g} s for the {n:g} events of {region}'s change; "
        f"the histogram puts it at <= {p99:g} s (buckets {delta})")
    wait_until(lambda: ((b := view.metrics(cp).value(BACKLOG)) == 0, b), converge_s,
               f"{BACKLOG} back to 0 at rest after the change")
