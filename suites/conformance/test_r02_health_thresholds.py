"""R2: removal needs 3 consecutive failures; a blip of 1 or 2 failed probes moves nothing.

A probe blip is the region gateway's ``/readyz`` failing for a moment. Probing runs at a
fixed delay (a probe starts at least one ``probe_interval`` after the previous one ended),
so a blip shorter than ``k`` intervals meets at most ``k`` probes of each prober; the
region agent's probe-failure counter shows how many it really met.
"""

from __future__ import annotations

import time

import pytest

RULE_FALL = 3
"""R2's own threshold: a region is removed after 3 consecutive failed probes, not fewer. The
removal is judged against it, not against the federation's stated ``fall``: a federation
configured to remove a region on 1 failed probe breaks R2 however honestly it says so."""

RULE_RISE = 2
"""R2's re-admission: "consecutive successes", plural: at least 2."""

ATTEMPTS = 4
"""Blips tried until one meets exactly the intended number of probes (a shorter blip can
fall between two probes; it still must move nothing)."""


def _gateway_change(view, region):
    """(healthy, consecutive results that made the agent's last change) of region's gateway."""
    target = (view.get_json(view.agent_url(region)).get("targets") or {}).get("gateway") or {}
    assert "changed_after" in target, (f"agent of region {region} reports no targets.gateway.changed_after in "
                                       "/status; R2 cannot tell how many probes made a change without it")
    return target.get("healthy"), target["changed_after"]


def _gateway_probe_failures(view, region):
    m = view.metrics(view.agent_url(region))
    v = m.value("gameday_agent_probe_failures_total", region=region, target="gateway")
    assert v is not None, (f"agent of region {region} exposes no gameday_agent_probe_failures_total"
                           f"{{target=\"gateway\"}} in /metrics; R2 cannot be judged without it")
    return int(v)


@pytest.mark.conformance("R2", "a 1-2 probe blip moves no traffic and no version")
@pytest.mark.parametrize("probes", [1, 2], ids=["1-probe", "2-probe"])
def test_r2_probe_blip_moves_nothing(probes, drill, view, timing, settled):
    region = drill.pick_region()
    blip = (probes - 0.05) * timing.probe_interval  # meets at most `probes` probes of each prober
    # Long enough after the blip that a removal (fall probes, an event, a broadcast) would show.
    settle = blip + (timing.fall + 1) * (timing.probe_interval + timing.probe_timeout) + 1.0
    gw_node = f"gateway-{region}"
    seen_counts = []
    for _ in range(ATTEMPTS):
        v_before = view.cp_version()
        failures_before = _gateway_probe_failures(view, region)
        with drill.fault("gateway_blip", region, baseline=0.5, seconds=blip) as fault:
            drill.observe(fault, settle)
            t_fault = fault.window.t_fault
            gslb = view.gslb()["regions"][region]
            t_gslb = time.monotonic()
        met = _gateway_probe_failures(view, region) - failures_before
        seen_counts.append(met)
        tl = fault.result.timeline.copy()
        v_before = max((c.version for c in tl.cp if c.source == "poll" and c.version is not None
                        and c.t <= fault.window.t_call), default=v_before)
        # No version: the control plane never moved while the blip and its aftermath lasted.
        moved = [c for c in tl.cp if c.source == "poll" and c.version is not None and c.t >= t_fault
                 and c.version != v_before and c.t <= t_fault + settle]
        assert not moved, (f"expected no new control-plane version after a {met}-probe blip of {gw_node} "
                           f"({blip:.2f} s, fall = {timing.fall}); v{v_before} became v{moved[0].version} at "
                           f"t+{moved[0].t - t_fault:.2f} s")
        # No traffic: no entry node ever stopped routing to the region ...
        dropped = [o for o in tl.nodes if o.ok and t_fault <= o.t <= t_fault + settle and region not in o.routable]
        assert not dropped, (f"expected every entry node to keep routing to {region} through a {met}-probe blip; "
                             f"{dropped[0].node} excluded it at t+{dropped[0].t - t_fault:.2f} s "
                             f"(v{dropped[0].version}, routes {list(dropped[0].routable)})")
        # ... and the GSLB never changed the region's health (its last change is older than the blip).
        kept = gslb["healthy"] and gslb["since_change_s"] > t_gslb - t_fault
        assert kept, (
            f"expected the GSLB to keep region {region} healthy through a {met}-probe blip; at "
            f"t+{t_gslb - t_fault:.2f} s it reports healthy={gslb['healthy']}, last change "
            f"{gslb['since_change_s']:.2f} s ago (consecutive failures {gslb.get('consecutive_fail')})")
        assert met <= probes, (f"a blip of {blip:.2f} s (< {probes} probe intervals of {timing.probe_interval:g} s) "
                               f"met {met} probes of the agent of region {region}: probing is not paced at a "
                               "fixed delay (bursts make blips look longer than they are)")
        if met == probes:
            return
    pytest.fail(f"no blip of {blip:.2f} s met exactly {probes} probe(s) of agent {region} in {ATTEMPTS} attempts "
                f"(met {seen_counts}); the blip check ran but did not exercise a {probes}-probe blip")


@pytest.mark.conformance("R2", "3 consecutive failed probes remove the region, not fewer")
def test_r2_consecutive_failures_remove_the_region(drill, view, timing, settled):
    region = drill.pick_region()
    failures_before = _gateway_probe_failures(view, region)
    with drill.fault("gateway_unready", region) as fault:
        result = drill.observe_switchover(fault)
        met = _gateway_probe_failures(view, region) - failures_before
        removed = _gateway_change(view, region)
    # the block has reverted the fault and waited for the steady state: the region is back
    readmitted = _gateway_change(view, region)
    result.assert_switchover_under()
    result.assert_dns_converged()
    result.assert_versions_incremented()
    tl = result.timeline.copy()
    w = result.fault
    v_before = max((c.version for c in tl.cp if c.version is not None and c.t <= w.t_call), default=None)
    assert v_before is not None, "no control-plane version observed before the fault"
    bump = next((c for c in sorted(tl.cp, key=lambda c: c.t)
                 if c.version is not None and c.t > w.t_call and c.version > v_before), None)
    assert bump is not None, f"the control plane published no version after {w.kind} {region}"
    # The 3rd failed probe comes at least 2 intervals after the first (probes at a fixed delay).
    earliest = (RULE_FALL - 1) * timing.probe_interval
    assert bump.t - w.t_call >= earliest, (
        f"expected the region to be removed no sooner than R2's {RULE_FALL} consecutive failed probes allow "
        f"({earliest:.2f} s after the fault; the federation states fall = {timing.fall}); v{bump.version} was "
        f"seen {bump.t - w.t_call:.2f} s after it")
    assert met >= RULE_FALL, (f"expected the agent of {region} to have met at least R2's {RULE_FALL} failed "
                              f"gateway probes by the removal (the federation states fall = {timing.fall}); it "
                              f"counted {met}")
    assert removed[0] is False and removed[1] >= RULE_FALL, (
        f"expected the agent of {region} to remove its gateway after at least R2's {RULE_FALL} consecutive failed "
        f"probes (the federation states fall = {timing.fall}); its /status says healthy={removed[0]} after "
        f"{removed[1]} consecutive failure(s)")
    assert readmitted[0] is True and readmitted[1] >= RULE_RISE, (
        f"expected the agent of {region} to re-admit its gateway after at least {RULE_RISE} consecutive successful "
        f"probes (R2: consecutive successes; the federation states rise = {timing.rise}); its /status says "
        f"healthy={readmitted[0]} after {readmitted[1]} consecutive success(es)")
