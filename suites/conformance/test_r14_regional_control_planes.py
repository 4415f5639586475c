"""R14: at large scale (more than 10 regions) one control plane per region: regional events
stay regional, and the proxies prefer the regional snapshot.

Below that size the rule does not apply and the check is skipped with the reason. Above
it the target must expose a control plane per region
(``Endpoints.extra["regional_control_planes"]``: region -> ``/status`` URL), each
answering with a version, and every entry node must say it follows its regional snapshot
(``/status`` field ``snapshot_scope`` = ``"regional"``).
"""

from __future__ import annotations

import pytest

THRESHOLD = 10


@pytest.mark.conformance("R14", "more than 10 regions: one control plane per region, proxies prefer it")
def test_r14_regional_control_planes_above_ten_regions(federation, view):
    regions = federation.regions()
    if len(regions) <= THRESHOLD:
        pytest.skip(f"topology has {len(regions)} regions; R14 applies above {THRESHOLD}")
    regional = federation.endpoints().extra.get("regional_control_planes") or {}
    missing = [r.name for r in regions if r.name not in regional]
    assert not missing, (f"expected a control plane per region with {len(regions)} regions (R14); the target "
                         f"exposes none for {missing} (Endpoints.extra['regional_control_planes'] has "
                         f"{sorted(regional)})")
    silent = {r: u for r, u in regional.items() if not isinstance((view.try_json(u) or {}).get("version"), int)}
    assert not silent, (f"expected every regional control plane to answer /status with a version; these did not: "
                        f"{silent}")
    global_scope = {n: (s or {}).get("snapshot_scope") for n, s in view.nodes().items()
                    if (s or {}).get("snapshot_scope") != "regional"}
    assert not global_scope, (f"expected every entry node to follow its regional snapshot (snapshot_scope = "
                              f"'regional'); these do not: {global_scope}")
