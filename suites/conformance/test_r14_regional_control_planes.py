"""R14: at large scale (more than 10 regions) one control plane per region: regional events
stay regional, global events go everywhere, and the proxies prefer the regional snapshot.

Below that size the rule does not apply and the check is skipped with the reason. Above
it the target must expose a control plane per region
(``ReferenceEndpoints.extra["regional_control_planes"]``: region -> ``/status`` URL), each
answering with a version, and every entry node must say it follows its regional snapshot
(``/status``: ``snapshot_scope`` = ``"regional"``, ``versions.regional``). Then, with
the faults every drill uses:

1. a regional event (the instances of one region fail ``/readyz``) moves that region's
   regional version (for the fault and for the restore: the drill's version verdict of
   an instance outage reads it), no other region's, and no entry node's regional version outside
   the region; no instance entry ever reaches the global snapshot (the global tier hears
   only that the region stopped serving, which is global routing);
2. a global event (a gateway fails ``/readyz``) reaches every entry node of every region
   at the global version, and moves no regional version;
3. with the global tier down, the region's proxy still follows a regional event: it stops
   routing to the failed instances by a newer regional version while its global version
   stays where it was (R1 at the regional level).
"""

from __future__ import annotations

import pytest

from gameday.conformance.wait import wait_until

THRESHOLD = 10


def _regional_versions(view, urls):
    out = {}
    for region, url in urls.items():
        status = view.try_json(url) or {}
        out[region] = status.get("version")
    return out


def _node_regional(view):
    return {n: ((s or {}).get("versions") or {}).get("regional") for n, s in view.nodes().items()}


def _recorded(fault, region):
    """The versions of *region*'s regional control plane the drill's observer recorded since the fault."""
    return [o.version for o in fault.result.timeline.copy().regional_cp
            if o.region == region and o.t > fault.window.t_fault and o.version is not None]


def _direct_targets(status):
    return sorted(t["instance"] for t in status.get("routing_table", []) if t.get("via") == "direct")


@pytest.mark.conformance("R14", "more than 10 regions: one control plane per region, regional events stay local")
def test_r14_regional_control_planes_above_ten_regions(federation, drill, view, converge_s, settled):
    regions = federation.regions()
    if len(regions) <= THRESHOLD:
        pytest.skip(f"topology has {len(regions)} regions; R14 applies above {THRESHOLD}")
    names = [r.name for r in regions]
    regional = view.ep.extra.get("regional_control_planes") or {}
    missing = [r for r in names if r not in regional]
    assert not missing, (f"expected a control plane per region with {len(regions)} regions (R14); the target "
                         f"exposes none for {missing} (ReferenceEndpoints.extra['regional_control_planes'] has "
                         f"{sorted(regional)})")
    assert len(set(regional.values())) == len(names), (
        f"expected {len(names)} distinct regional control planes; their /status URLs are {regional}")
    silent = {r: u for r, u in regional.items() if not isinstance((view.try_json(u) or {}).get("version"), int)}
    assert not silent, (f"expected every regional control plane to answer /status with a version; these did not: "
                        f"{silent}")
    global_scope = {n: (s or {}).get("snapshot_scope") for n, s in view.nodes().items()
                    if (s or {}).get("snapshot_scope") != "regional"}
    assert not global_scope, (f"expected every entry node to follow its regional snapshot (snapshot_scope = "
                              f"'regional'); these do not: {global_scope}")

    # 1. A regional event stays in its region.
    region = drill.pick_region()
    proxy = f"proxy-{region}"
    before, nodes_before = _regional_versions(view, regional), _node_regional(view)
    # The drill's observer reads regional control planes at its utilisation rate (2 Hz): keep
    # observing after the restore until it has recorded the restore's version too (a fixed 2 s
    # once ended at t+3.5 s on a loaded machine with the restore's version not yet seen).
    peak: list[int] = []

    def restore_recorded() -> bool:
        return bool(peak) and any(v > peak[0] for v in _recorded(outage, region))

    with drill.fault("instances_unready", region, observe_until=restore_recorded) as outage:
        def moved():
            st = view.try_json(view.ep.entry_nodes[proxy]) or {}
            return (_regional_versions(view, {region: regional[region]})[region] != before[region]
                    and not _direct_targets(st)), st.get("versions")
        wait_until(moved, converge_s, f"{proxy} to drop its failed instances by a new regional version")

        def observed():
            # The verdict below is judged from what the drill's observer recorded, not from our
            # own reads: hold the fault until the observer has polled the new version as well.
            seen = _recorded(outage, region)
            return any(v > before[region] for v in seen), seen[-3:]
        wait_until(observed, converge_s, f"the drill's observer to record {region}'s new regional version")
        peak.append(max(_recorded(outage, region)))
        after, nodes_after = _regional_versions(view, regional), _node_regional(view)
        entries = view.snapshot().get("entries", {})
    crossed = {r: f"v{before[r]} -> v{after[r]}" for r in names if r != region and after[r] != before[r]}
    assert not crossed, (f"expected a regional event of {region} (its instances unready) to change no other "
                         f"region's snapshot; these regional versions moved: {crossed}")
    outside = {n: f"v{nodes_before[n]} -> v{v}" for n, v in nodes_after.items()
               if view.ep.node_region(n) != region and v != nodes_before[n]}
    assert not outside, (f"expected no entry node outside {region} to see a regional event of {region}; "
                         f"their regional versions moved: {outside}")
    versions = outage.result.versions()  # an instance outage: judged by the region's regional version
    assert versions.passed and "regional version" in versions.detail, (
        f"expected {region}'s regional version to rise for its instances' outage and again for the restore, "
        f"and never to fall: {versions.detail}")
    leaked = sorted(k for k in entries if "/instance/" in k)
    assert not leaked, (f"expected instance health to stay in the regional snapshots; the global snapshot holds "
                        f"{len(leaked)} instance entries, e.g. {leaked[:3]}")
    view.wait_converged(converge_s)

    # 2. A global event reaches every entry node, and no regional snapshot.
    other = drill.pick_region(exclude=[region])
    g0, nodes_before = view.cp_version(), _node_regional(view)
    before = _regional_versions(view, regional)
    with drill.fault("gateway_unready", other):
        g1 = view.wait_converged(converge_s, regions=[r for r in names if r != other])
        after, nodes_after = _regional_versions(view, regional), _node_regional(view)
    assert g1 > g0, f"expected the global version to move for {other}'s gateway going unready: v{g0} -> v{g1}"
    moved_regional = {r: f"v{before[r]} -> v{after[r]}" for r in names if after[r] != before[r]}
    assert not moved_regional, (f"expected a gateway's health (a global event) to change no regional snapshot; "
                                f"these moved: {moved_regional}")
    view.wait_converged(converge_s)

    # 3. With the global tier down, the proxy routes by its regional snapshot. The regional
    # event is injected through the target directly: a drill's nested fault first observes
    # a steady state, which includes the control plane answering. It is reverted in the
    # finally clause, before the enclosing (ledger-recorded) control-plane fault.
    with drill.fault("control_plane_down"):
        st0 = view.get_json(view.ep.entry_nodes[proxy])
        g_before, r_before = st0["versions"]["global"], st0["versions"]["regional"]
        federation.inject("instances_unready", region, {})
        try:
            def regional_only():
                st = view.try_json(view.ep.entry_nodes[proxy]) or {}
                v = st.get("versions") or {}
                return (v.get("regional") != r_before and not _direct_targets(st)), (v, _direct_targets(st))
            seen = wait_until(regional_only, converge_s,
                              f"{proxy} to drop its failed instances by its regional snapshot with the global "
                              f"control plane down (regional v{r_before})")
        finally:
            federation.revert("instances_unready", region, {})
        assert seen[0]["global"] == g_before, (
            f"expected {proxy}'s global version to hold at v{g_before} with the global control plane down; "
            f"it reports {seen[0]}")
    view.wait_converged(converge_s)
