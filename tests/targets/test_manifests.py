"""The rendered manifests: valid against the real Kubernetes schemas, and R11 hygiene holds.

Schemas: kubernetes-validate's offline OpenAPI-derived JSON schemas in *strict* mode
(unknown fields are errors; without strict they pass silently, which the first test
shows), for the pinned node version (SCHEMA_VERSION) and the newest bundled one.
"""

from __future__ import annotations

import copy
import json
from importlib.metadata import version
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client

from gameday.errors import ConfigError
from gameday.fedapp.skeleton import ADMIN_LISTEN_ENV
from gameday.fedapp.spec import FederationSpec
from gameday.interfaces import RegionInfo
from gameday.model.release import check_release_order
from gameday.model.topology import GLOBAL_CLUSTER, Topology
from gameday.targets.fedapp_spec import app_topology
from gameday.targets.k8s import files as k8s_files
from gameday.targets.k8s import manifests
from gameday.targets.k8s import objects as o

Rendered = dict[str, list[dict[str, Any]]]
VERSIONS = [o.SCHEMA_VERSION, "1.37.0"]
WORKLOADS = ("Deployment", "StatefulSet")


def _all(rendered: Rendered) -> list[tuple[str, dict[str, Any]]]:
    return [(c, obj) for c, objs in rendered.items() for obj in objs]


def _workloads(rendered: Rendered) -> list[tuple[str, dict[str, Any]]]:
    return [(c, obj) for c, obj in _all(rendered) if obj["kind"] in WORKLOADS]


def _id(c: str, obj: dict[str, Any]) -> str:
    return f"{c}/{obj['kind']}/{obj['metadata']['name']}"


def test_strict_mode_is_what_catches_unknown_fields(rendered: Rendered) -> None:
    dep = copy.deepcopy(next(obj for _, obj in _workloads(rendered)))
    dep["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}  # misspelt
    kubernetes_validate.validate(dep, o.SCHEMA_VERSION, strict=False)  # passes silently
    with pytest.raises(kubernetes_validate.ValidationError, match="readinessprobe"):
        kubernetes_validate.validate(dep, o.SCHEMA_VERSION, strict=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_validates_strictly(rendered: Rendered, version: str) -> None:
    for c, obj in _all(rendered):
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{_id(c, obj)} is invalid for Kubernetes {version}: {exc.message}")


def test_objects_round_trip_through_the_client_models(rendered: Rendered) -> None:
    """The official client's models (what the target's API calls serialize) keep every field."""
    api = client.ApiClient()
    for c, obj in _all(rendered):
        model = getattr(client, "V1" + obj["kind"]).from_dict(obj)
        assert api.sanitize_for_serialization(model) == obj, _id(c, obj)  # type: ignore[no-untyped-call]


def test_reviewed_copies_are_up_to_date(topology: Topology) -> None:
    stale = [
        str(p)
        for p, text in k8s_files.reviewed_files(topology).items()
        if not p.exists() or p.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"run `python -m gameday.targets.k8s.files`; out of date: {stale}"


def test_one_cluster_per_region_plus_global(topology: Topology, rendered: Rendered) -> None:
    assert list(rendered) == [GLOBAL_CLUSTER, *(r.name for r in topology.regions)]
    kinds = {c: sorted({obj["kind"] for obj in objs}) for c, objs in rendered.items()}
    assert kinds[GLOBAL_CLUSTER] == [
        "ConfigMap",
        "Deployment",
        "Namespace",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Secret",
        "Service",
        "StatefulSet",
    ]
    for r in topology.regions:
        names = {(obj["kind"], obj["metadata"]["name"]) for obj in rendered[r.name]}
        expected = {("Deployment", n) for n in ("gateway", "proxy", "agent")}
        expected |= {("Deployment", f"app-{k}") for k in range(1, r.instances + 1)}
        assert expected <= names


# -- R11 hygiene ----------------------------------------------------------------------------------
def test_liveness_and_readiness_are_separate_probes(rendered: Rendered) -> None:
    for c, w in _workloads(rendered):
        for ctr in manifests.iter_containers(w):
            live, ready = ctr["livenessProbe"]["httpGet"], ctr["readinessProbe"]["httpGet"]
            assert live["path"] != ready["path"], _id(c, w)
            if ctr["image"] == o.APP_IMAGE:
                assert (live["path"], ready["path"]) == ("/livez", "/readyz"), _id(c, w)


def test_readiness_failure_threshold_is_3(rendered: Rendered) -> None:
    for c, w in _workloads(rendered):
        for ctr in manifests.iter_containers(w):
            assert ctr["readinessProbe"]["failureThreshold"] == 3, _id(c, w)
            assert ctr["readinessProbe"]["successThreshold"] >= 2, _id(c, w)  # R2: re-admit on rise


def test_every_container_has_requests_and_limits(rendered: Rendered) -> None:
    for c, w in _workloads(rendered):
        for ctr in manifests.iter_containers(w):
            res = ctr["resources"]
            assert set(res["requests"]) == {"cpu", "memory"}, _id(c, w)
            assert "memory" in res["limits"], _id(c, w)


def test_one_pinned_app_image_in_every_region(rendered: Rendered) -> None:
    images = {ctr["image"] for _, w in _workloads(rendered) for ctr in manifests.iter_containers(w)}
    assert images == {o.APP_IMAGE, o.NATS_IMAGE}
    for image in images:
        assert ":" in image.rsplit("/", 1)[-1], image  # a tag ...
        assert not image.endswith(":latest"), image  # ... that pins a version
    for r in rendered:
        if r != GLOBAL_CLUSTER:
            assert {ctr["image"] for _, w in _workloads({r: rendered[r]}) for ctr in manifests.iter_containers(w)} == {
                o.APP_IMAGE
            }


def test_app_version_is_the_package_version() -> None:
    assert f"ghcr.io/gameday/fedapp:{version('gameday')}" == o.APP_IMAGE


def test_app_has_at_least_two_instances_and_replicated_entry_nodes(topology: Topology, rendered: Rendered) -> None:
    for r in topology.regions:
        apps = [
            w for c, w in _workloads(rendered) if c == r.name and w["metadata"]["labels"][o.LABEL_COMPONENT] == "app"
        ]
        assert len(apps) == r.instances >= 2
        for name in ("gateway", "proxy"):
            dep = next(w for c, w in _workloads(rendered) if c == r.name and w["metadata"]["name"] == name)
            assert dep["spec"]["replicas"] >= 2


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_every_workload_is_covered_by_one_pdb(rendered: Rendered) -> None:
    for cluster, objs in rendered.items():
        pdbs = [x for x in objs if x["kind"] == "PodDisruptionBudget"]
        for w in (x for x in objs if x["kind"] in WORKLOADS):
            pod_labels = w["spec"]["template"]["metadata"]["labels"]
            covering = [p for p in pdbs if _matches(p["spec"]["selector"]["matchLabels"], pod_labels)]
            assert len(covering) == 1, _id(cluster, w)


def test_pdb_budgets(topology: Topology, rendered: Rendered) -> None:
    """Replicated components keep all but one pod; the app keeps all but one instance (N-1);
    singletons may be evicted (minAvailable 1 on one pod would block every node drain)."""
    for cluster, objs in rendered.items():
        for p in (x for x in objs if x["kind"] == "PodDisruptionBudget"):
            comp = p["metadata"]["labels"][o.LABEL_COMPONENT]
            if comp == "app":
                assert p["spec"] == {**p["spec"], "minAvailable": topology.region(cluster).instances - 1}
            elif o.REPLICAS[comp] > 1:
                assert p["spec"]["minAvailable"] == o.REPLICAS[comp] - 1 >= 1
            else:
                assert p["spec"]["maxUnavailable"] == 1
                assert "minAvailable" not in p["spec"]


def test_topology_spread_across_zones_and_nodes(rendered: Rendered) -> None:
    for c, w in _workloads(rendered):
        pod = w["spec"]["template"]
        spread = {s["topologyKey"]: s for s in pod["spec"]["topologySpreadConstraints"]}
        assert set(spread) == {o.ZONE_KEY, o.HOSTNAME_KEY}, _id(c, w)
        assert spread[o.HOSTNAME_KEY]["whenUnsatisfiable"] == "DoNotSchedule"
        for s in spread.values():
            assert s["maxSkew"] == 1
            # the constraint counts this workload's pods (for the app: all instances together)
            assert _matches(s["labelSelector"]["matchLabels"], pod["metadata"]["labels"]), _id(c, w)


def test_labels_and_selectors_are_consistent(rendered: Rendered) -> None:
    required = {o.LABEL_NAME, o.LABEL_INSTANCE, o.LABEL_PART_OF, o.LABEL_VERSION, o.LABEL_MANAGED_BY, o.LABEL_REGION}
    for c, obj in _all(rendered):
        labels = obj["metadata"]["labels"]
        assert required <= set(labels), _id(c, obj)
        assert labels[o.LABEL_REGION] == c
        assert labels[o.LABEL_VERSION] == o.APP_VERSION
        if obj["kind"] in WORKLOADS:
            sel = obj["spec"]["selector"]["matchLabels"]
            assert o.LABEL_VERSION not in sel  # selectors are immutable; versions change
            assert _matches(sel, obj["spec"]["template"]["metadata"]["labels"]), _id(c, obj)


def test_services_select_pods_on_unique_node_ports(rendered: Rendered) -> None:
    for cluster, objs in rendered.items():
        pods = [w["spec"]["template"] for w in objs if w["kind"] in WORKLOADS]
        seen: set[tuple[int, str]] = set()
        for svc in (x for x in objs if x["kind"] == "Service"):
            selected = [p for p in pods if _matches(svc["spec"]["selector"], p["metadata"]["labels"])]
            assert selected, f"{cluster}/Service/{svc['metadata']['name']} selects no pod"
            names = {port["name"] for p in selected for ctr in p["spec"]["containers"] for port in ctr["ports"]}
            for port in svc["spec"]["ports"]:
                assert port["targetPort"] in names
                if svc["spec"].get("type") == "NodePort":
                    assert 30000 <= port["nodePort"] <= 32767
                    assert port["nodePort"] == port["port"]
                    key = (port["nodePort"], port["protocol"])
                    assert key not in seen, f"{cluster}: NodePort {key} used twice"
                    seen.add(key)


def test_the_spec_configmap_is_one_federation_spec_everywhere(topology: Topology, rendered: Rendered) -> None:
    texts = {c: next(x for x in objs if x["kind"] == "ConfigMap")["data"]["spec.json"] for c, objs in rendered.items()}
    assert len(set(texts.values())) == 1
    spec = FederationSpec.model_validate(json.loads(texts[GLOBAL_CLUSTER]))
    assert spec.topology == app_topology(topology)  # the app's own view: no contexts, no harness fields
    assert [(r.name, r.weight, r.fallback, len(r.instances)) for r in spec.regions] == [
        (r.name, r.weight, r.fallback, r.instances) for r in topology.regions]
    # every endpoint in the spec is served by a NodePort of the right cluster
    addr = manifests.Addressing.placeholder(topology)
    for r in spec.regions:
        host = addr.host(r.name)
        ports = {p["nodePort"] for x in rendered[r.name] if x["kind"] == "Service" for p in x["spec"]["ports"]}
        for ep in (r.gateway, r.proxy, r.agent, *(i.endpoint for i in r.instances)):
            assert ep.host == host
            assert ep.port in ports
    # pods restart when the spec changes: the template carries its hash
    for _, w in _workloads(dict(rendered.items())):
        if w["metadata"]["name"] != "nats":
            assert w["spec"]["template"]["metadata"]["annotations"][o.ANNOTATION_SPEC_HASH]


def test_jetstream_is_on_a_persistent_volume(rendered: Rendered) -> None:
    nats = next(w for c, w in _workloads(rendered) if w["metadata"]["name"] == "nats")
    assert nats["kind"] == "StatefulSet"
    assert "--jetstream" in nats["spec"]["template"]["spec"]["containers"][0]["args"]
    (claim,) = nats["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert nats["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"] == "Retain"  # bus_down keeps it


def test_release_order_is_global_then_standby_first_primary_last(topology: Topology) -> None:
    order = manifests.release_order(topology)
    assert order[0] == GLOBAL_CLUSTER
    assert order[-1] == topology.primary_region
    infos = [RegionInfo(r.name, r.weight, r.capacity, "") for r in topology.regions]
    assert check_release_order(order[1:], infos, topology.primary_region) == []


def test_a_region_called_global_is_refused(topology: Topology) -> None:
    bad = topology.model_dump()
    bad["contexts"] = None
    bad["regions"][0]["name"] = "global"
    bad["regions"][1]["fallback"] = "global"
    bad["regions"][2]["fallback"] = "global"
    bad["primary"] = "global"
    with pytest.raises(ConfigError, match="reserved for the global tier"):
        manifests.render_all(Topology.model_validate(bad))


# -- admin on the pod's loopback; NetworkPolicies admit exactly the public ports -------------------
def _port_matches(rule_port: dict[str, Any], port: int, protocol: str) -> bool:
    assert not isinstance(rule_port.get("port"), str), "named ports: this evaluator takes numbers only"
    if rule_port.get("protocol", "TCP") != protocol:
        return False
    first = rule_port.get("port")
    return first is None or first <= port <= rule_port.get("endPort", first)


def _admits(policies: list[dict[str, Any]], pod_labels: dict[str, str], port: int, protocol: str) -> bool:
    """NetworkPolicy ingress semantics for a peer outside the namespace (another cluster's node
    through a NodePort, a pod elsewhere): a pod no Ingress policy selects admits everything;
    a selected one admits what some selecting policy's rule allows (no ``ports``: every port;
    no ``from``: every peer). Policies add up; a rule naming peers admits no arbitrary peer."""
    selecting = []
    for p in policies:
        sel = p["spec"]["podSelector"]
        assert set(sel) <= {"matchLabels"}, "this evaluator knows matchLabels only"
        if "Ingress" in p["spec"]["policyTypes"] and _matches(sel.get("matchLabels", {}), pod_labels):
            selecting.append(p)
    if not selecting:
        return True
    return any(
        not rule.get("from") and (not rule.get("ports") or any(_port_matches(q, port, protocol) for q in rule["ports"]))
        for p in selecting for rule in p["spec"].get("ingress", [])
    )


PROBE_PORTS = [(n, proto) for n in (1, 80, 8080, o.NATS_MONITOR_PORT, o.ADMIN_PORT, 29999, 30000, 32767, 65535)
               for proto in ("TCP", "UDP")]
"""Ports no Service exposes, probed besides every port any container or Service names."""


def _policy_problems(rendered: Rendered) -> list[str]:
    """Where a namespace's NetworkPolicies admit anything but exactly its NodePort Services'
    ports to exactly their pods, or admit the admin port anywhere (empty: none)."""
    problems = []
    for cluster, objs in rendered.items():
        policies = [x for x in objs if x["kind"] == "NetworkPolicy"]
        services = [x for x in objs if x["kind"] == "Service" and x["spec"].get("type") == "NodePort"]
        candidates = set(PROBE_PORTS)
        candidates |= {(p["containerPort"], p["protocol"]) for w in objs for c in manifests.iter_containers(w)
                       for p in c["ports"]}
        candidates |= {(p["port"], p["protocol"]) for s in services for p in s["spec"]["ports"]}
        for w in (x for x in objs if x["kind"] in WORKLOADS):
            labels = w["spec"]["template"]["metadata"]["labels"]
            public = {(p["port"], p["protocol"]) for s in services if _matches(s["spec"]["selector"], labels)
                      for p in s["spec"]["ports"]}
            admitted = {c for c in candidates if _admits(policies, labels, *c)}
            if admitted != public:
                problems.append(f"{_id(cluster, w)}: admits {sorted(admitted)}, its NodePorts are {sorted(public)}")
            if (o.ADMIN_PORT, "TCP") in admitted:
                problems.append(f"{_id(cluster, w)}: admits the admin port {o.ADMIN_PORT}")
    return problems


def test_network_policies_admit_exactly_the_public_ports(rendered: Rendered) -> None:
    assert _policy_problems(rendered) == []
    gateway = next(w for w in rendered["a"] if w["metadata"]["name"] == "gateway")
    policies = [x for x in rendered["a"] if x["kind"] == "NetworkPolicy"]
    labels = gateway["spec"]["template"]["metadata"]["labels"]
    assert _admits(policies, labels, o.GATEWAY_PORT, "TCP")
    assert not _admits(policies, labels, o.PROXY_PORT, "TCP")  # another component's port, not the gateway's
    assert not _admits(policies, labels, o.ADMIN_PORT, "TCP")


def test_every_namespace_denies_ingress_by_default(rendered: Rendered) -> None:
    for cluster, objs in rendered.items():
        deny = [x for x in objs if x["kind"] == "NetworkPolicy" and x["metadata"]["name"] == o.DENY_INGRESS_POLICY]
        assert [d["spec"] for d in deny] == [{"podSelector": {}, "policyTypes": ["Ingress"]}], cluster
        allows = [x for x in objs if x["kind"] == "NetworkPolicy" and x is not deny[0]]
        assert allows and all("from" not in r for a in allows for r in a["spec"]["ingress"]), cluster


@pytest.mark.parametrize("breakage", ["admin-port", "every-port", "no-default-deny", "other-pods-port"])
def test_the_policy_check_fails_when_a_policy_admits_too_much(rendered: Rendered, breakage: str) -> None:
    """Negative controls of the check above: each breakage is found."""
    broken = copy.deepcopy(rendered)
    objs = broken["b"]
    gw = next(x for x in objs if x["kind"] == "NetworkPolicy" and x["metadata"]["name"] == "allow-public-gateway")
    if breakage == "admin-port":
        gw["spec"]["ingress"][0]["ports"].append({"port": o.ADMIN_PORT, "protocol": "TCP"})
    elif breakage == "every-port":
        del gw["spec"]["ingress"][0]["ports"]
    elif breakage == "no-default-deny":  # then a pod no allow policy selects (here NATS) admits all
        broken["global"] = [x for x in broken["global"] if x["metadata"]["name"] not in
                            (o.DENY_INGRESS_POLICY, "allow-public-nats")]
    else:
        gw["spec"]["ingress"][0]["ports"].append({"port": o.PROXY_PORT, "protocol": "TCP"})
    problems = _policy_problems(broken)
    assert problems, breakage
    if breakage == "admin-port":
        assert any(f"admits the admin port {o.ADMIN_PORT}" in p and "b/Deployment/gateway" in p for p in problems)


def test_fedapp_admin_listens_on_the_pods_loopback_only(rendered: Rendered) -> None:
    seen = 0
    for c, w in _workloads(rendered):
        for ctr in manifests.iter_containers(w):
            if ctr["image"] != o.APP_IMAGE:
                continue
            seen += 1
            env = {e["name"]: e["value"] for e in ctr["env"]}
            assert env[ADMIN_LISTEN_ENV] == f"127.0.0.1:{o.ADMIN_PORT}", _id(c, w)
            assert o.ADMIN_PORT not in {p["containerPort"] for p in ctr["ports"]}, _id(c, w)
    assert seen
    exposed = {p[k] for objs in rendered.values() for s in objs if s["kind"] == "Service"
               for p in s["spec"]["ports"] for k in ("port", "targetPort")}
    assert o.ADMIN_PORT not in exposed
