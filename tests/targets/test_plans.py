"""Fault plans: every catalogue fault has an exact inverse on the modelled cluster state.

The state model (``cluster_state.py``) is a dict of the deployed objects plus the fedapp
hooks' state; each test observes it, plans the injection, applies it, plans the revert
and applies that: the state must change on injection and come back exactly on revert.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from gameday.errors import ConfigError, FaultError, FaultUnavailable, TargetError
from gameday.faults.catalogue import CATALOGUE
from gameday.model.topology import GLOBAL_CLUSTER, Topology
from gameday.targets.k8s import manifests, plan
from gameday.targets.k8s import objects as o

from .cluster_state import ClusterState
from .test_manifests import _admits

PARAMS: dict[str, dict[str, Any]] = {
    "sync_delay": {"seconds": 5.0},
    "probe_flap": {"period": 1.0, "down": 0.3},
    "gateway_blip": {"seconds": 1.5},
    "region_labels": {"labels": {"tier": "bronze"}},
}


NOT_DEPLOYED = {k for k, a in plan.K8S_ACTIONS.items() if isinstance(a, plan.NotDeployed)}
"""Faults on parts the manifests do not deploy (the state layer's store): refused, never planned."""


def _cases(topology_regions: list[str]) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for k in sorted(set(CATALOGUE) - NOT_DEPLOYED):
        if CATALOGUE[k].needs_region:
            out += [(k, r) for r in topology_regions]
        else:
            out.append((k, None))
    return out


CASES = _cases(["a", "b", "c"])


def test_every_catalogue_fault_is_planned() -> None:
    assert {k for k, _ in CASES} | NOT_DEPLOYED == set(CATALOGUE)
    assert {"store_down", "store_isolated", "replication_lag"} == NOT_DEPLOYED


def test_a_fault_on_a_part_not_deployed_is_refused_before_anything_is_read(topology: Topology) -> None:
    with pytest.raises(FaultUnavailable, match="the kind and kube targets deploy no store"):
        plan.reads("store_down", "a")
    with pytest.raises(FaultUnavailable, match="nothing was injected"):
        plan.plan_inject(topology, "store_down", "a", {}, plan.Observed.desired(topology))
    assert plan.plan_revert(topology, "store_down", "a", {}) == []


@pytest.mark.parametrize(("kind", "region"), CASES)
def test_revert_is_the_exact_inverse(
    topology: Topology, rendered: dict[str, Any], kind: str, region: str | None
) -> None:
    state = ClusterState.deployed(topology, rendered)
    before = state.snapshot()
    params = dict(PARAMS.get(kind, {}))
    for op in plan.plan_inject(topology, kind, region, params, state.observe(topology)):
        state.apply(op)
    assert state.snapshot() != before, f"{kind} {region} changed nothing"
    for op in plan.plan_revert(topology, kind, region, params):
        state.apply(op)
    assert state.snapshot() == before
    # reverting twice (restore after a revert that did go through) changes nothing more
    for op in plan.plan_revert(topology, kind, region, params):
        state.apply(op)
    assert state.snapshot() == before


@pytest.mark.parametrize(("kind", "region"), CASES)
def test_faults_touch_only_their_region(
    topology: Topology, rendered: dict[str, Any], kind: str, region: str | None
) -> None:
    ops = plan.plan_inject(topology, kind, region, dict(PARAMS.get(kind, {})), plan.Observed.desired(topology))
    assert {op.cluster for op in ops} == {region or GLOBAL_CLUSTER}


def test_scale_faults_record_and_restore_the_live_replica_count(topology: Topology, rendered: dict[str, Any]) -> None:
    state = ClusterState.deployed(topology, rendered)
    state.objects[("b", "Deployment", o.NAMESPACE, "gateway")]["spec"]["replicas"] = 5  # scaled by someone
    before = state.snapshot()
    params: dict[str, Any] = {}
    (op,) = plan.plan_inject(topology, "gateway_down", "b", params, state.observe(topology))
    assert (op.verb, op.kind, op.name, op.replicas) == ("scale", "Deployment", "gateway", 0)
    assert params == {"replicas": 5}
    state.apply(op)
    for op in plan.plan_revert(topology, "gateway_down", "b", params):
        state.apply(op)
    assert state.snapshot() == before


def test_revert_without_recorded_params_restores_the_declared_state(
    topology: Topology, rendered: dict[str, Any]
) -> None:
    """A runner killed between the injection and the ledger update: restore still converges."""
    state = ClusterState.deployed(topology, rendered)
    before = state.snapshot()
    for kind, region in CASES:
        for op in plan.plan_inject(topology, kind, region, dict(PARAMS.get(kind, {})), state.observe(topology)):
            state.apply(op)
        for op in plan.plan_revert(topology, kind, region, {}):  # params lost
            state.apply(op)
    assert state.snapshot() == before


def test_injecting_on_a_workload_already_at_zero_is_refused(topology: Topology, rendered: dict[str, Any]) -> None:
    state = ClusterState.deployed(topology, rendered)
    params: dict[str, Any] = {}
    for op in plan.plan_inject(topology, "control_plane_down", None, params, state.observe(topology)):
        state.apply(op)
    with pytest.raises(FaultError, match="already has 0 replicas"):
        plan.plan_inject(topology, "control_plane_down", None, {}, state.observe(topology))


def test_nested_faults_revert_in_any_order(topology: Topology, rendered: dict[str, Any]) -> None:
    """N-2 drills stack faults; each one's revert undoes only itself."""
    state = ClusterState.deployed(topology, rendered)
    before = state.snapshot()
    stack = [("region_blackhole", "a"), ("gateway_down", "b"), ("sync_delay", None), ("probe_flap", "c")]
    recorded = []
    for kind, region in stack:
        params = dict(PARAMS.get(kind, {}))
        for op in plan.plan_inject(topology, kind, region, params, state.observe(topology)):
            state.apply(op)
        recorded.append((kind, region, params))
    for kind, region, params in [recorded[1], recorded[3], recorded[0], recorded[2]]:
        for op in plan.plan_revert(topology, kind, region, params):
            state.apply(op)
    assert state.snapshot() == before


@pytest.mark.parametrize("kind", ["gateway_hung", "instances_hung", "region_blackhole"])
def test_network_policies_validate_and_select_what_they_should(
    topology: Topology, rendered: dict[str, Any], kind: str
) -> None:
    op, *deleted = plan.plan_inject(topology, kind, "a", {}, plan.Observed.desired(topology))
    assert op.verb == "apply" and op.body is not None
    kubernetes_validate.validate(dict(op.body), o.SCHEMA_VERSION, strict=True)
    spec = op.body["spec"]
    assert "ingress" not in spec
    assert "egress" not in spec
    selected = [
        w
        for w in rendered["a"]
        if w["kind"] == "Deployment"
        and all(
            w["spec"]["template"]["metadata"]["labels"].get(k) == v
            for k, v in spec["podSelector"].get("matchLabels", {}).items()
        )
    ]
    names = {w["metadata"]["name"] for w in selected}
    if kind == "gateway_hung":
        assert names == {"gateway"}
        assert spec["policyTypes"] == ["Ingress"]
    elif kind == "instances_hung":
        assert names == {"app-1", "app-2"}
        assert spec["policyTypes"] == ["Ingress"]
    else:
        assert names == {"gateway", "proxy", "agent", "app-1", "app-2"}
        assert spec["policyTypes"] == ["Ingress", "Egress"]
    # NetworkPolicies add up: the allow policies of exactly the selected pods go while it is in
    assert [(d.verb, d.kind) for d in deleted] == [("delete", "NetworkPolicy")] * len(deleted)
    assert {d.name for d in deleted} == {f"allow-public-{n}" for n in names}


def test_admin_hooks_never_go_to_a_public_port(topology: Topology) -> None:
    public = {p["containerPort"] for objs in manifests.render_all(topology).values() for w in objs
              for c in manifests.iter_containers(w) for p in c.get("ports", [])}
    desired = plan.Observed.desired(topology)
    ops = [op for kind, region in CASES
           for op in [*plan.plan_inject(topology, kind, region, dict(PARAMS.get(kind, {})), desired),
                      *plan.plan_revert(topology, kind, region, dict(PARAMS.get(kind, {})))]
           if op.verb == "admin"]
    assert ops, "no fault uses an admin hook"
    assert {op.port for op in ops} == {o.ADMIN_PORT} and o.ADMIN_PORT not in public


def test_deploy_plan_applies_cluster_by_cluster_and_verifies_each(topology: Topology) -> None:
    ops = plan.plan_deploy(topology, manifests.Addressing.placeholder(topology))
    order = [op.cluster for op in ops if op.verb == "wait"]
    assert order == manifests.release_order(topology)
    seen_wait: set[str] = set()
    for op in ops:
        if op.verb == "wait":
            seen_wait.add(op.cluster)
        else:
            assert op.cluster not in seen_wait, "an object applied to a cluster after it was verified"
    first = [op for op in ops if op.verb == "apply"]
    assert first[0].kind == "Namespace"  # namespace before what lives in it


def test_down_plan_deletes_only_the_namespaces(topology: Topology) -> None:
    ops = plan.plan_down(topology)
    assert {(op.verb, op.kind, op.name) for op in ops} == {("delete", "Namespace", o.NAMESPACE)}
    assert [op.cluster for op in ops] == list(reversed(manifests.release_order(topology)))
    assert [op.cluster for op in plan.plan_down(topology, only=["b"])] == ["b"]


def test_rollout_plan_restarts_instances_one_at_a_time(topology: Topology) -> None:
    ops = plan.plan_rollout(topology, "b", "2025-01-01T00:00:00Z")
    assert [(op.verb, op.name) for op in ops] == [
        ("patch", "app-1"),
        ("rollout", "app-1"),
        ("patch", "app-2"),
        ("rollout", "app-2"),
    ]
    assert ops[0].body == {
        "spec": {"template": {"metadata": {"annotations": {plan.RESTARTED_AT: "2025-01-01T00:00:00Z"}}}}
    }


@pytest.mark.parametrize(
    ("contexts", "patterns", "ok"),
    [
        ({"a": "kind-gd-a", "global": "kind-gd-global"}, ["kind-gd-*"], True),
        ({"a": "staging-eu", "global": "staging-global"}, ["staging-*"], True),
        ({"a": "staging-eu", "global": "prod-global"}, ["staging-*"], False),
        ({"a": "staging-eu"}, [], False),
        ({"a": "Staging-eu"}, ["staging-*"], False),  # case-sensitive: contexts are exact names
    ],
)
def test_allow_list(contexts: dict[str, str], patterns: list[str], ok: bool) -> None:
    if ok:
        plan.check_allowed(contexts, patterns)
    else:
        with pytest.raises(TargetError, match="--gameday-allow-context"):
            plan.check_allowed(contexts, patterns)


def test_hooks_reach_every_app_instance_on_its_admin_port(topology: Topology) -> None:
    ops = plan.plan_inject(topology, "instances_unready", "c", {}, plan.Observed.desired(topology))
    assert [(op.name, op.port) for op in ops] == [("app-1", o.ADMIN_PORT), ("app-2", o.ADMIN_PORT)]
    assert all(op.selector and f"{o.LABEL_APP_INSTANCE}=c-" in op.selector for op in ops)


def test_missing_required_params_are_refused_before_anything_runs(topology: Topology) -> None:
    with pytest.raises(ConfigError, match="'seconds'"):
        plan.plan_inject(topology, "gateway_blip", "a", {}, plan.Observed.desired(topology))
    with pytest.raises(ConfigError, match="'labels'"):
        plan.plan_inject(topology, "region_labels", "a", {}, plan.Observed.desired(topology))


def _admits_now(state: ClusterState, rendered: dict[str, Any], cluster: str, workload: str, port: int) -> bool:
    """Whether *workload*'s pods in *cluster* admit TCP *port* from outside under the
    NetworkPolicies *state* holds now (the manifests tests' evaluator)."""
    labels = next(w for w in rendered[cluster] if w["metadata"]["name"] == workload and w["kind"] == "Deployment")[
        "spec"]["template"]["metadata"]["labels"]
    policies = [obj for (c, kind, _, _), obj in state.objects.items() if c == cluster and kind == "NetworkPolicy"]
    return _admits(policies, labels, port, "TCP")


@pytest.mark.parametrize("outer_first", [False, True], ids=["inner-reverted-first", "outer-reverted-first"])
def test_nested_deny_faults_keep_their_pods_cut_off_until_the_last_revert(
    topology: Topology, rendered: dict[str, Any], outer_first: bool
) -> None:
    """A gateway hung inside a region blackhole: whichever is reverted first, the gateway stays
    cut off until the other is reverted too (NetworkPolicies add up: re-applying its allow
    policy would end the fault still in effect)."""
    state = ClusterState.deployed(topology, rendered)
    before = state.snapshot()
    assert _admits_now(state, rendered, "a", "gateway", o.GATEWAY_PORT)
    outer, inner = ("region_blackhole", "a"), ("gateway_hung", "a")
    for kind, region in (outer, inner):
        for op in plan.plan_inject(topology, kind, region, {}, state.observe(topology)):
            state.apply(op)
    assert not _admits_now(state, rendered, "a", "gateway", o.GATEWAY_PORT)
    assert not _admits_now(state, rendered, "a", "proxy", o.PROXY_PORT)
    first, last = (outer, inner) if outer_first else (inner, outer)
    # Without knowing what else is in effect, the first revert would re-admit the gateway:
    unaware = plan.plan_revert(topology, *first, {})
    assert any(op.verb == "apply" and op.name == "allow-public-gateway" for op in unaware)
    for op in plan.plan_revert(topology, *first, {}, in_effect=[last]):
        state.apply(op)
    assert not _admits_now(state, rendered, "a", "gateway", o.GATEWAY_PORT), f"{first} re-admitted the gateway"
    # The blackhole's other pods come back as soon as the blackhole is reverted.
    assert _admits_now(state, rendered, "a", "proxy", o.PROXY_PORT) == outer_first
    for op in plan.plan_revert(topology, *last, {}, in_effect=[]):
        state.apply(op)
    assert _admits_now(state, rendered, "a", "gateway", o.GATEWAY_PORT)
    assert state.snapshot() == before


def test_deny_faults_in_other_regions_do_not_hold_back_a_revert(topology: Topology) -> None:
    others: list[tuple[str, str | None]] = [("region_blackhole", "b"), ("gateway_down", "a")]
    ops = plan.plan_revert(topology, "gateway_hung", "a", {}, in_effect=others)
    assert ops == plan.plan_revert(topology, "gateway_hung", "a", {})
