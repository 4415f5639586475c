"""A proxy broken on purpose never to refresh is ready while it routes, whatever its version.

The ``proxy_never_refresh`` defect (the stale-snapshot verdict's negative control) is applied
once the federation is ready. On a loaded machine the control plane moved on after that
(v14 to v18 as the last instances reported in), the broken proxy stayed at v14 as it must, and
the target's readiness check, which asks every entry node to be at the control plane's
version, failed the negative control's set-up after 30 s instead of letting the drill find the
stale proxy. Here the control plane moves on for certain: a gateway outage and its revert.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from gameday.model.topology import load_topology
from gameday.targets.local import LocalTarget
from gameday.targets.local.readiness import _not_ready

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_a_never_refreshing_proxy_behind_the_control_plane_is_ready_while_it_routes(tmp_path: Path) -> None:
    topo = yaml.safe_load((REPO / "clusters" / "local.yaml").read_text())
    topo["defects"] = {"proxy_never_refresh": ["b"]}
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(topo))
    target = LocalTarget(load_topology(path), tmp_path / "fed")
    target.up()
    try:
        fed = target.fed
        assert fed.never_refreshing == {"proxy-b"}
        before = int(fed.get_json("proxy-b")["version"])
        target.inject("gateway_down", "c", {})
        deadline = time.monotonic() + 20
        while int(fed.get_json("controlplane")["version"]) <= before:  # c taken out: a new version
            assert time.monotonic() < deadline, "the control plane never moved on"
            time.sleep(0.05)
        target.revert("gateway_down", "c", {})
        fed.wait_ready(20, versions=False)  # every node routes to every region again
        cp = int(fed.get_json("controlplane")["version"])
        assert int(fed.get_json("proxy-b")["version"]) == before < cp  # it really is behind
        target.deploy()  # readiness at the control plane's version: the broken proxy is exempt
        # the control: the same check without the exemption is what failed the set-up
        fed.never_refreshing = set()
        assert any(r.startswith("proxy-b: v") for r in _not_ready(fed, True, set())), "proxy-b not named"
    finally:
        target.down()
