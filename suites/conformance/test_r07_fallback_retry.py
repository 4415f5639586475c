"""R7: the gateway does not wait for the sync chain. With no ready local replica it forwards
to the configured fallback region; when an upstream fails it retries once in another
region; either way the whole request stays within 500 ms."""

from __future__ import annotations

import time

import pytest

from gameday.conformance.wait import wait_until

LIMIT = 0.5
"""R7's bound on a whole request, retry included, seconds."""
REQUESTS = 20


@pytest.mark.conformance("R7", "no ready local replica: the gateway falls back to its fallback region within 500 ms")
def test_r7_local_fallback_within_500ms(drill, view, topology, timing, converge_s, settled):
    region = drill.pick_region()
    fallback = topology.region(region).fallback
    gw = f"gateway-{region}"
    status_url = view.entry_node(gw)
    url = view.gateway_work_url(region)
    with drill.fault("instances_unready", region) as fault:
        # The gateway's own probes notice (fall probes); nothing waits for the control plane.
        wait_until(lambda: (not (s := view.get_json(status_url)).get("local_ready"), s.get("local")),
                   converge_s, f"{gw} to see no ready local instance after every instance of {region} failed /readyz")
        t_seen = time.monotonic()
        before = view.get_json(status_url).get("fallbacks_total", 0)
        replies = [view.request(url) for _ in range(REQUESTS)]
        after = view.get_json(status_url).get("fallbacks_total", 0)
    where = f"{gw} at t+{t_seen - fault.window.t_fault:.1f} s after every instance of {region} became unready"
    failed = [r for r in replies if r.status != 200]
    assert not failed, (f"expected {where} to serve every request from another region; {len(failed)} of "
                        f"{len(replies)} failed, first: {failed[0]}")
    wrong = [r for r in replies if r.region == region or (fallback and r.region != fallback)]
    assert not wrong, (f"expected {where} to forward to its fallback region {fallback or '(any other)'}; "
                       f"{len(wrong)} of {len(replies)} were served by {sorted({r.served_by for r in wrong})}")
    slow = [r for r in replies if r.elapsed > LIMIT]
    assert not slow, (f"expected each fallback request through {gw} within {LIMIT * 1000:.0f} ms; {len(slow)} of "
                      f"{len(replies)} took longer, slowest {max(slow, key=lambda r: r.elapsed)}")
    assert after - before >= len(replies), (f"expected {gw} to count {len(replies)} fallbacks for them "
                                            f"(fallbacks_total {before} -> {after}): were they served locally?")


@pytest.mark.conformance("R7", "a failed upstream is retried once in another region, all within 500 ms")
def test_r7_cross_region_retry_within_500ms(drill, view, timing, settled):
    region = drill.pick_region()
    gw = f"gateway-{region}"
    status_url = view.entry_node(gw)
    url = view.gateway_work_url(region)
    retries_before = view.get_json(status_url).get("retries_total", 0)
    # The gateway still believes its instances ready until fall probes time out: every
    # request in that window meets a hung upstream first and must be retried elsewhere.
    window = timing.fall * (timing.probe_interval + timing.probe_timeout)
    with drill.fault("instances_hung", region) as fault:
        replies = []
        end = fault.window.t_fault + window
        while time.monotonic() < end and len(replies) < REQUESTS:
            replies.append(view.request(url))
        retries_after = view.get_json(status_url).get("retries_total", 0)
    assert replies, f"no request was sent through {gw} in the {window:.2f} s before its probes could notice"
    failed = [r for r in replies if r.status != 200]
    assert not failed, (f"expected every request through {gw} to be served despite {region}'s hung instances; "
                        f"{len(failed)} of {len(replies)} failed, first: {failed[0]}")
    local = [r for r in replies if r.region == region]
    assert not local, (f"expected hung {region} instances to serve nothing; {len(local)} replies came from them, "
                       f"first: {local[0]}")
    slow = [r for r in replies if r.elapsed > LIMIT]
    assert not slow, (f"expected each request through {gw}, retry included, within {LIMIT * 1000:.0f} ms; "
                      f"{len(slow)} of {len(replies)} took longer, slowest {max(slow, key=lambda r: r.elapsed)}")
    assert retries_after > retries_before, (
        f"expected {gw} to retry in another region after its first attempt at a hung instance timed out; "
        f"retries_total stayed {retries_before} over {len(replies)} requests in the first {window:.2f} s")
