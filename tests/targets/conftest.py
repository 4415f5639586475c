"""Fixtures for the kind/kube target tests, and the ``e2e_kind`` gate.

Everything here is offline: rendered manifests, plans and argv lists. Tests that need
real kind clusters are marked ``e2e_kind`` and skipped unless ``--gameday-target=kind``.
"""

from __future__ import annotations

from typing import Any

import pytest

from gameday.model.topology import Topology, load_topology
from gameday.targets.k8s import files as k8s_files
from gameday.targets.k8s import manifests

E2E_REASON = (
    "needs kind and a container engine (CI runners); this machine has neither. "
    "Run with --gameday-target=kind on a runner with kind and docker."
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("gameday_target", default=None) == "kind":
        return
    skip = pytest.mark.skip(reason=E2E_REASON)
    for item in items:
        if item.get_closest_marker("e2e_kind") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def topology() -> Topology:
    """The reference kind/kube topology (clusters/kind/topology.yaml)."""
    return load_topology(k8s_files.KIND_TOPOLOGY)


@pytest.fixture(scope="session")
def rendered(topology: Topology) -> dict[str, list[dict[str, Any]]]:
    """Every cluster's objects, rendered with the placeholder node addresses."""
    return manifests.render_all(topology)
