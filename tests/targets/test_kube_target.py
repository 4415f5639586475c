"""KubeTarget without a cluster: allow-list refusal, dry-run records everything and calls
nothing, ledger references, and the wiring into make_target / gameday restore.

No cluster is faked: the client factory handed to the target is a tripwire that fails the
test if the target ever tries to open an API client.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from gameday.errors import ConfigError, FaultUnavailable, TargetError
from gameday.faults.catalogue import CATALOGUE
from gameday.interfaces import Target
from gameday.model.topology import Topology, parse_topology
from gameday.restore import attach_target
from gameday.targets.k8s import objects as o
from gameday.targets.k8s import plan
from gameday.targets.k8s.client import pick_node_address
from gameday.targets.k8s.kind import KindTarget
from gameday.targets.k8s.kube import KubeTarget

from .test_plans import CASES, NOT_DEPLOYED, PARAMS


def _no_client(context: str) -> Any:
    raise AssertionError(f"the target tried to open an API client for {context!r}")


def _target(topology: Topology, tmp_path: Path, **kw: Any) -> KubeTarget:
    kw.setdefault("allow", ["kind-gd-*"])
    kw.setdefault("client_factory", _no_client)
    return KubeTarget(topology, tmp_path, **kw)


def test_it_is_a_target(topology: Topology, tmp_path: Path) -> None:
    assert isinstance(_target(topology, tmp_path, dry_run=True), Target)


@pytest.mark.parametrize("allow", [[], ["staging-*"], ["kind-gd-a", "kind-gd-b", "kind-gd-c"]])
def test_contexts_outside_the_allow_list_are_refused(topology: Topology, tmp_path: Path, allow: list[str]) -> None:
    with pytest.raises(TargetError) as err:
        _target(topology, tmp_path, allow=allow)
    msg = str(err.value)
    assert "--gameday-allow-context" in msg
    assert "is not allow-listed" in msg
    assert "Nothing was changed" in msg
    assert "kind-gd-" in msg  # names the refused context


def test_refused_in_dry_run_too(topology: Topology, tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="not allow-listed"):
        _target(topology, tmp_path, allow=["other"], dry_run=True)


def test_a_topology_without_contexts_is_refused(topology: Topology, tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="needs `contexts:` in the topology"):
        _target(topology.with_overrides(contexts=None), tmp_path)


def test_dry_run_lifecycle_records_every_call_and_makes_none(topology: Topology, tmp_path: Path) -> None:
    out = io.StringIO()
    t = _target(topology, tmp_path, dry_run=True, out=out)
    t.up()
    t.deploy()
    t.check_health(timeout=1)
    params = {"seconds": 2.0}
    t.inject("sync_delay", None, params)
    t.revert("sync_delay", None, params)
    assert t.reconcile() == {"dry_run": True}
    t.rollout_region("b")
    assert list(t.alarm_lines()) == []
    t.down()
    verbs = [op.verb for op in t.recorded]
    assert verbs.count("connect") == 4
    assert verbs[-4:] == ["delete"] * 4
    printed = out.getvalue().splitlines()
    assert len(printed) == len(t.recorded)
    assert all(line.startswith("gameday dry-run: ") for line in printed)
    record = [json.loads(line) for line in (tmp_path / "dry-run.jsonl").read_text().splitlines()]
    assert [r["verb"] for r in record] == verbs
    assert params["previous"] == topology.control_plane.broadcast_delay  # declared state, nothing read


@pytest.mark.parametrize(("kind", "region"), CASES)
def test_dry_run_fault_records_exactly_its_plan(
    topology: Topology, tmp_path: Path, kind: str, region: str | None
) -> None:
    t = _target(topology, tmp_path, dry_run=True, out=io.StringIO())
    params = dict(PARAMS.get(kind, {}))
    t.inject(kind, region, params)
    expected = plan.plan_inject(topology, kind, region, dict(PARAMS.get(kind, {})), plan.Observed.desired(topology))
    assert t.recorded == expected
    t.recorded.clear()
    t.revert(kind, region, params)
    assert t.recorded == plan.plan_revert(topology, kind, region, params)


def test_endpoints_use_node_addresses_and_node_ports(topology: Topology, tmp_path: Path) -> None:
    addresses = {"global": "10.0.0.1", "a": "10.0.1.1", "b": "10.0.2.1", "c": "10.0.3.1"}
    t = _target(topology, tmp_path, dry_run=True, addresses=addresses, out=io.StringIO())
    t.up()
    assert t.endpoints().dns_server == ("10.0.0.1", o.GSLB_DNS_PORT)
    ep = t.reference_endpoints()
    assert ep.entry_nodes["gateway-b"] == f"http://10.0.2.1:{o.GATEWAY_PORT}/status"
    assert ep.entry_nodes["proxy-c"] == f"http://10.0.3.1:{o.PROXY_PORT}/status"
    assert ep.control_plane == f"http://10.0.0.1:{o.CONTROL_PLANE_PORT}/status"
    assert ep.utilisation["a"] == [f"http://10.0.1.1:{o.APP_PORT_BASE + k}/status" for k in (1, 2)]
    assert set(ep.entry_nodes) == {f"{n}-{r.name}" for r in topology.regions for n in ("gateway", "proxy")}
    assert [r.gateway_address for r in t.regions()] == ["10.0.1.1", "10.0.2.1", "10.0.3.1"]
    assert t.release_plan() == ["c", "b", "a"]


def test_ref_round_trip_keeps_allow_list_and_dry_run(topology: Topology, tmp_path: Path) -> None:
    t = _target(
        topology,
        tmp_path,
        dry_run=True,
        addresses={"global": "10.0.0.1", "a": "10.0.1.1", "b": "10.0.2.1", "c": "10.0.3.1"},
    )
    ref = json.loads(json.dumps(t.ref()))  # the ledger stores JSON
    again = KubeTarget.attach(ref)
    assert (again.dry_run, again.allow, again.contexts) == (True, t.allow, t.contexts)
    assert again.endpoints() == t.endpoints()
    assert again.reference_endpoints() == t.reference_endpoints()


def test_restore_reattaches_kube_and_kind(topology: Topology, tmp_path: Path) -> None:
    kube = _target(topology, tmp_path, dry_run=True)
    assert isinstance(attach_target("kube", kube.ref()), KubeTarget)
    kind = KindTarget(topology, tmp_path, dry_run=True, out=io.StringIO())
    assert isinstance(attach_target("kind", json.loads(json.dumps(kind.ref()))), KindTarget)


def test_node_address_prefers_a_ready_worker() -> None:
    nodes = [
        {"name": "cp", "control_plane": True, "ready": True, "internal_ip": "172.18.0.2"},
        {"name": "w2", "control_plane": False, "ready": True, "internal_ip": "172.18.0.4"},
        {"name": "w1", "control_plane": False, "ready": False, "internal_ip": "172.18.0.3"},
    ]
    assert pick_node_address("a", nodes) == "172.18.0.4"
    assert pick_node_address("a", nodes[:1]) == "172.18.0.2"
    with pytest.raises(TargetError, match="no Ready node"):
        pick_node_address("a", nodes[2:])


def test_every_catalogue_kind_is_known_to_the_kube_target(topology: Topology, tmp_path: Path) -> None:
    t = _target(topology, tmp_path, dry_run=True, out=io.StringIO())
    for kind in CATALOGUE:
        region = "a" if CATALOGUE[kind].needs_region else None
        if kind in NOT_DEPLOYED:  # refused, saying why, before anything runs
            with pytest.raises(FaultUnavailable, match="deploy no"):
                t.inject(kind, region, dict(PARAMS.get(kind, {})))
            continue
        t.inject(kind, region, dict(PARAMS.get(kind, {})))


@pytest.mark.parametrize(
    ("contexts", "message"),
    [
        ({"a": "x"}, "contexts: no context for ['b', 'c', 'global']"),
        ({"a": "x", "b": "y", "c": "z", "global": "g", "d": "q"}, "contexts: unknown key(s) ['d']"),
        ({"a": "x", "b": "y", "c": "z", "global": " "}, "contexts.global: got ' ', expected a kubeconfig context"),
    ],
)
def test_topology_contexts_are_validated(topology: Topology, contexts: dict[str, str], message: str) -> None:
    data = topology.model_dump()
    data["contexts"] = contexts
    with pytest.raises(ConfigError) as err:
        parse_topology(data, "staging.yaml")
    assert str(err.value).startswith(f"staging.yaml: {message}")


def test_a_revert_inside_another_deny_fault_leaves_its_pods_cut_off(topology: Topology, tmp_path: Path) -> None:
    """The target knows what it injected: reverting a gateway hung inside a region blackhole
    does not re-admit the gateway; reverting the blackhole after it does."""
    t = _target(topology, tmp_path, dry_run=True, out=io.StringIO())
    t.inject("region_blackhole", "a", {})
    t.inject("gateway_hung", "a", {})
    t.recorded.clear()
    t.revert("gateway_hung", "a", {})
    assert [(op.verb, op.name) for op in t.recorded] == [("delete", "gameday-fault-gateway-hung")]
    t.recorded.clear()
    t.revert("region_blackhole", "a", {})
    applied = {op.name for op in t.recorded if op.verb == "apply"}
    assert "allow-public-gateway" in applied and "allow-public-proxy" in applied


def test_the_kube_target_asks_for_every_permission_a_fault_and_its_inverse_need(topology: Topology,
                                                                               tmp_path: Path) -> None:
    # gateway_down scales the region's gateway down and back (the scale subresource);
    # gateway_hung applies a deny NetworkPolicy and deletes allow policies, and its inverse
    # applies them back and deletes the deny policy. Without delete on networkpolicies the
    # fault could be injected and never reverted: refused up front.
    from kubernetes import client as k8s

    from .apiserver import ApiServer

    with ApiServer() as api:
        def factory(context: str) -> Any:
            cfg = k8s.Configuration()
            cfg.host = api.url
            return k8s.ApiClient(cfg)

        t = _target(topology, tmp_path, client_factory=factory)
        assert t.missing_permissions("gateway_down", "a", {}) == []
        asked = {(r["verb"], r["resource"], r.get("subresource")) for r in api.reviews}
        assert asked == {("get", "deployments", "scale"), ("patch", "deployments", "scale")}, asked
        api.denied.add(("delete", "networking.k8s.io", "networkpolicies", ""))
        lacking = t.missing_permissions("gateway_hung", "b", {})
        assert lacking == ["b (context kind-gd-b): delete networkpolicies (networking.k8s.io) in namespace "
                           f"{o.NAMESPACE}: RBAC: not granted"], lacking
        assert not api.unknown, api.unknown


def test_gameday_rbac_for_the_kind_topology_grants_every_fault_and_inverse_and_validates() -> None:
    import subprocess
    import sys

    import kubernetes_validate
    import yaml

    from gameday.targets.k8s import files as k8s_files

    out = subprocess.run([sys.executable, "-m", "gameday.cli", "rbac", "--topology", str(k8s_files.KIND_TOPOLOGY),
                          "--service-account", "ci/gameday"], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    for d in docs:
        kubernetes_validate.validate(d, o.SCHEMA_VERSION, strict=True)
    roles = {d["metadata"]["annotations"]["gameday.dev/cluster"].split()[1]: d for d in docs if d["kind"] == "Role"}
    assert set(roles) == {"a", "b", "c", "global"}, sorted(roles)
    region = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in roles["a"]["rules"]}
    assert region[("apps", "deployments/scale")] == ["get", "patch"]  # gateway_down and back
    assert region[("networking.k8s.io", "networkpolicies")] == ["create", "delete", "patch"]  # gateway_hung
    assert region[("", "pods/portforward")] == ["create", "get"]  # the readiness hooks' admin calls
    assert ("apps", "statefulsets/scale") in {(r["apiGroups"][0], r["resources"][0]) for r in roles["global"]["rules"]}
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    assert all(b["subjects"] == [{"kind": "ServiceAccount", "name": "gameday", "namespace": "ci"}] for b in bindings)
