"""End to end on real kind clusters: only on CI runners with kind and docker.

Marked ``e2e_kind``; skipped unless ``--gameday-target=kind`` (see conftest.py). Needs the
app image built locally first (``docker build -t ghcr.io/gameday/fedapp:<gameday.__version__> -f
clusters/kind/Dockerfile .``). These are the checks the offline tests cannot make: the
clusters come up, the manifests are accepted by a real API server and become available,
and each scale/NetworkPolicy/hook fault is reverted to a healthy federation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gameday.model.topology import load_topology
from gameday.targets.k8s import files as k8s_files
from gameday.targets.k8s.kind import KindTarget

pytestmark = pytest.mark.e2e_kind


@pytest.fixture(scope="module")
def kind_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KindTarget]:
    t = KindTarget(load_topology(k8s_files.KIND_TOPOLOGY), tmp_path_factory.mktemp("kind"))
    try:
        t.up()
        t.deploy()
        t.check_health(timeout=300)
        yield t
    finally:
        t.down()


def test_entry_nodes_answer_on_their_node_ports(kind_target: KindTarget) -> None:
    for node, url in kind_target.reference_endpoints().entry_nodes.items():
        assert httpx.get(url, timeout=5).status_code == 200, node


@pytest.mark.parametrize(
    ("kind", "region", "params"),
    [
        ("gateway_down", "b", {}),
        ("gateway_hung", "b", {}),
        ("region_blackhole", "c", {}),
        ("control_plane_down", None, {}),
        ("bus_down", None, {}),
        ("sync_delay", None, {"seconds": 2.0}),
        ("probe_flap", "a", {"period": 1.0, "down": 0.3}),
        ("instances_unready", "b", {}),
        ("proxy_cut_off", "c", {}),
        ("region_labels", "b", {"labels": {"tier": "bronze"}}),
    ],
)
def test_fault_then_revert_leaves_a_healthy_federation(
    kind_target: KindTarget, kind: str, region: str | None, params: dict[str, Any]
) -> None:
    # the drills measure what happens in between; here only the round trip counts
    kind_target.inject(kind, region, params)
    kind_target.revert(kind, region, params)
    kind_target.check_health(timeout=180)


def test_rollout_region_restarts_instances_one_at_a_time(kind_target: KindTarget) -> None:
    for region in kind_target.release_plan():
        kind_target.rollout_region(region)
    kind_target.check_health(timeout=120)
