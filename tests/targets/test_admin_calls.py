"""The reference app's admin calls are defined once (gameday.fedapp.wire) and both fault-action
tables make the same ones: for every fault, the local actions' calls equal the admin ops of the
kind/kube plans (role, path, body; inject and revert), and a drifted table is caught."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gameday.faults.catalogue import FAULTS
from gameday.faults.model import FaultCall
from gameday.fedapp.wire import FAULT_PATH, RECONCILE_PATH, SLOW_PATH, AdminCall, drop_broadcasts, readyz_fault
from gameday.model.topology import Topology
from gameday.targets.k8s import objects as o
from gameday.targets.k8s.plan import K8S_ACTIONS, Hook, K8sAction, NotDeployed, Observed
from gameday.targets.local import faults as local

PARAMS: dict[str, dict[str, Any]] = {
    "sync_delay": {"seconds": 2.5},
    "gateway_blip": {"seconds": 1.5},
    "region_labels": {"labels": {"tier": "gold"}},
}
"""Parameters a fault needs (the others use their defaults)."""
RECORDED: dict[str, dict[str, Any]] = {
    "sync_delay": {"previous": 0.5},
    "region_labels": {"previous": {"tier": "silver"}},
}
"""What an injection records for its revert, the same on both sides."""

Calls = list[tuple[str, AdminCall]]


def _call(name: str, recorded: bool = False) -> FaultCall:
    fault = FAULTS[name]
    params = {**PARAMS.get(name, {}), **(RECORDED.get(name, {}) if recorded else {})}
    return FaultCall(fault, "a" if fault.needs_region else None, params)


def _local_calls(table: Mapping[str, Any], name: str, *, revert: bool) -> Calls | None:
    action = table[name]
    if not hasattr(action, "admin_calls"):
        return None
    calls: Calls = action.admin_calls(_call(name, recorded=revert), revert=revert)
    return calls


def _k8s_calls(table: Mapping[str, K8sAction], topology: Topology, name: str, *, revert: bool) -> Calls | None:
    action = table[name]
    if isinstance(action, NotDeployed):  # refused on kind/kube (the part is not deployed): no calls
        return None
    call = _call(name, recorded=revert)
    ops = action.revert(topology, call) if revert else action.inject(topology, call, Observed.desired(topology))
    admin = [op for op in ops if op.verb == "admin"]
    if not admin:
        return None
    out: Calls = []
    for op in admin:
        labels = dict(pair.split("=", 1) for pair in str(op.selector).split(","))
        item = (labels[o.LABEL_COMPONENT], AdminCall(str(op.path), dict(op.body or {})))
        if item not in out:  # the app hook is one op per instance: the same call each time
            out.append(item)
    return out


def mismatches(local_table: Mapping[str, Any], k8s_table: Mapping[str, K8sAction], topology: Topology) -> list[str]:
    """Every fault (and phase) where the two tables' admin calls differ, in words."""
    out = []
    for name in sorted(FAULTS):
        for revert in (False, True):
            mine = _local_calls(local_table, name, revert=revert)
            theirs = _k8s_calls(k8s_table, topology, name, revert=revert)
            if mine != theirs:
                out.append(f"{name} {'revert' if revert else 'inject'}: local {mine} != kube {theirs}")
    return out


def test_both_tables_make_the_same_admin_calls_for_every_fault(topology: Topology) -> None:
    assert mismatches(local.LOCAL_ACTIONS, K8S_ACTIONS, topology) == []
    admin_faults = {n for n in FAULTS if _local_calls(local.LOCAL_ACTIONS, n, revert=False) is not None}
    # the comparison is not vacuous: these faults are admin calls on both targets
    assert admin_faults == {"sync_delay", "probe_flap", "gateway_blip", "gateway_unready", "instances_unready",
                            "proxy_cut_off", "region_labels"}
    assert _local_calls(local.LOCAL_ACTIONS, "region_labels", revert=True) == [
        ("agent", AdminCall(SLOW_PATH, {"labels": {"tier": "silver"}})), ("controlplane", AdminCall(RECONCILE_PATH)),
    ]
    assert _local_calls(local.LOCAL_ACTIONS, "probe_flap", revert=False) == [
        ("gateway", AdminCall(FAULT_PATH, {"readyz": "flap", "period": 1.0, "down": 0.3})),
    ]


@pytest.mark.parametrize("side", ["local", "kube"])
def test_a_table_that_drifted_is_caught(topology: Topology, side: str) -> None:
    """Negative control: one table writes a body by hand (a typo) or reverts with the wrong call."""
    local_table: dict[str, Any] = dict(local.LOCAL_ACTIONS)
    k8s_table: dict[str, K8sAction] = dict(K8S_ACTIONS)
    if side == "kube":
        k8s_table["proxy_cut_off"] = Hook("proxy", lambda call: AdminCall(FAULT_PATH, {"drop_broadcast": True}),
                                          drop_broadcasts(False))
    else:
        local_table["proxy_cut_off"] = local.Hook(local.region_proxy, drop_broadcasts(True), readyz_fault("ok"),
                                                  ("drop", "hear"))
    found = mismatches(local_table, k8s_table, topology)
    assert len(found) == 1 and found[0].startswith(f"proxy_cut_off {'inject' if side == 'kube' else 'revert'}")
