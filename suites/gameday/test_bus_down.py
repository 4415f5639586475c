"""The bus (NATS) goes down and comes back: traffic keeps flowing, the control plane
reconciles on reconnect, and versions continue from where they were."""

from __future__ import annotations

import httpx
import pytest

from gameday.observers.reference import ReferenceEndpoints, reference_endpoints_of


def reference_app(federation) -> ReferenceEndpoints:
    ref = reference_endpoints_of(federation)
    if ref is None or ref.control_plane is None:
        pytest.skip(f"target {federation.name} does not run the reference app: no control-plane /status to read")
    return ref


def _reconcile_passes(url: str) -> int:
    return int(httpx.get(url, timeout=2).json()["reconcile"]["passes"])


@pytest.mark.gameday
def test_bus_down_then_back(drill, load, federation):
    cp = reference_app(federation).control_plane
    passes_before = _reconcile_passes(cp)
    with drill.fault("bus_down") as fault:
        result = drill.observe(fault, seconds=3)
    result.assert_error_ratio_under()  # R1: no request waited for the bus
    result.assert_versions_monotonic()  # JetStream kept the snapshot: versions continue
    result.assert_no_stale_snapshot_alarms()  # 3 s is well inside stale_after
    passes_after = _reconcile_passes(cp)
    assert passes_after > passes_before, (
        f"the control plane ran no full reconciliation after the bus came back "
        f"(passes {passes_before} -> {passes_after})")
