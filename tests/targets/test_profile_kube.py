"""kube with a federation profile: a team's faults as Kubernetes operations with exact inverses.

The profile below is the documentation's example (examples/profiles/kubernetes.yaml, shown in
docs/howto/kubernetes.md). What is checked:

- the ``kubernetes:`` section validates, and its errors name the field;
- each plan, applied to a stand-in API server (``apiserver.py``) through the real
  ``kubernetes`` client, changes exactly what it says, and its recorded inverse puts every
  object back byte for byte; the objects it writes pass the real schemas strictly;
- a dry run prints every operation with its inverse and opens no client;
- ``gameday restore`` re-attaches through the registry from the ledger and runs the inverse.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client as k8s

from gameday.errors import ConfigError, FaultError
from gameday.runtime.settings import Settings
from gameday.targets import registry
from gameday.targets.k8s import objects as o
from gameday.targets.k8s import profile_plan as pp
from gameday.targets.k8s.kube import KubeTarget
from gameday.targets.k8s.profiled import ProfileKubeTarget
from gameday.targets.profile import LoadedProfile, load_profile, parse_profile

from .apiserver import ApiServer, merge_patch

PROFILE = """\
# A team's own federation on its own clusters, drilled with --gameday-target=kube.
name: shop
service:
  fqdn: shop.example.test.
  dns: {server: 127.0.0.1, port: 5353}
  load: {port: 8080, path: /healthz}
regions:
  - name: a
    gateway: 127.0.0.11
    weight: 60
    capacity_rps: 200
  - name: b
    gateway: 127.0.0.12
    weight: 40
    capacity_rps: 200
kubernetes:
  contexts:             # cluster key -> kubeconfig context (allow them: --gameday-allow-context)
    a: staging-a
    b: staging-b
    global: staging-global
  faults:               # region-less faults name their cluster
    control_plane_down:
      cluster: global
      scale_to_zero: {kind: Deployment, namespace: fed, name: controller}
  regions:
    a:
      gateway_down:     # a fault gameday knows: takes region a out
        scale_to_zero: {kind: Deployment, namespace: edge, name: gateway}
      region_isolated:  # a fault of the team's own
        isolate_namespace: {namespace: edge}
        takes_region_out: true
    b:
      gateway_down:     # the gateway Service points at no pod, then back
        patch_selector:
          namespace: edge
          service: gateway
          selector: {app.kubernetes.io/name: gateway, gameday.dev/drained: "true"}
"""
CLUSTER_OF = {"staging-a": "a", "staging-b": "b", "staging-global": "global"}


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedProfile:
    path = tmp_path / "shop.yaml"
    path.write_text(PROFILE)
    return load_profile(path)


def _no_client(context: str) -> Any:
    raise AssertionError(f"the dry run tried to open an API client for {context!r}")


def _deployment(ns: str, name: str, replicas: int) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": name, "image": "example/gw:1.2.3"}]}}}}


def _service(ns: str, name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": selector, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


@pytest.fixture
def servers() -> Any:
    """One stand-in API server per cluster, with the team's objects in it."""
    with ApiServer() as a, ApiServer() as b, ApiServer() as g:
        a.put(_deployment("edge", "gateway", 3))
        b.put(_service("edge", "gateway", {"app.kubernetes.io/name": "gateway", "tier": "edge"}))
        g.put(_deployment("fed", "controller", 2))
        yield {"a": a, "b": b, "global": g}


def _factory(servers: dict[str, ApiServer]) -> Any:
    def make(context: str) -> Any:
        cfg = k8s.Configuration()
        cfg.host = servers[CLUSTER_OF[context]].url
        return k8s.ApiClient(cfg)
    return make


def _target(loaded: LoadedProfile, tmp_path: Path, **kw: Any) -> ProfileKubeTarget:
    kw.setdefault("allow", ["staging-*"])
    return ProfileKubeTarget(loaded, tmp_path / "work", **kw)


# -- the profile section ---------------------------------------------------------------------------
@pytest.mark.parametrize(("change", "message"), [
    ({"regions": {"a": {"gateway_down": {"scale_to_zero": {"namespace": "edge", "name": "gateway"},
                                          "isolate_namespace": {"namespace": "edge"}}}}},
     r"kubernetes.regions.a.gateway_down.isolate_namespace: not allowed with scale_to_zero; a Kubernetes fault is "
     "exactly one of"),
    ({"regions": {"z": {}}}, r"kubernetes.regions.z: no region 'z' in regions"),
    ({"regions": {"a": {"x_down": {"cluster": "nowhere", "isolate_namespace": {"namespace": "edge"}}}}},
     r"kubernetes.regions.a.x_down: cluster 'nowhere' has no kubernetes.contexts entry"),
    ({"regions": {"a": {"x_down": {"isolate_namespace": {"namespace": "Edge_1"}}}}},
     r"isolate_namespace.namespace.*expected a Kubernetes namespace"),
    ({"faults": {"control_plane_down": {"scale_to_zero": {"namespace": "fed", "name": "c"}}}},
     r"kubernetes.faults.control_plane_down.cluster: got None, expected one of"),
    ({"regions": {"a": {"gateway_down": {"scale_to_zero": {"namespace": "edge", "name": "gw"},
                                          "takes_region_out": False}}}},
     r"gateway_down.takes_region_out: gateway_down is a fault gameday knows"),
    ({"regions": {"b": {"gateway_down": {"patch_selector": {"namespace": "e", "service": "g",
                                                             "selector": {"app": "no spaces"}}}}}},
     r"expected a Kubernetes label value"),
])
def test_the_kubernetes_section_names_the_bad_field(change: dict[str, Any], message: str) -> None:
    data = yaml.safe_load(PROFILE)
    data["kubernetes"].update(change)
    with pytest.raises(ConfigError, match=message):
        parse_profile(data, "shop.yaml")


def test_no_kubernetes_section_is_refused_by_kube(tmp_path: Path) -> None:
    data = yaml.safe_load(PROFILE)
    del data["kubernetes"]
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"plain.yaml: has no `kubernetes:` section; --gameday-target=kube"):
        ProfileKubeTarget(load_profile(path), tmp_path, allow=["*"])


def test_contexts_outside_the_allow_list_are_refused(loaded: LoadedProfile, tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"kube context 'staging-a' \(cluster 'a'\) is not allow-listed"):
        _target(loaded, tmp_path, allow=["kind-*"])


# -- plans and their inverses on the stand-in API server --------------------------------------------
@pytest.mark.parametrize(("fault", "region", "cluster", "changed"), [
    ("gateway_down", "a", "a", lambda s: s[("Deployment", "edge", "gateway")]["spec"]["replicas"] == 0),
    ("region_isolated", "a", "a", lambda s: s[("NetworkPolicy", "edge", "gameday-isolate-region-isolated")]
     ["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
    ("gateway_down", "b", "b", lambda s: s[("Service", "edge", "gateway")]["spec"]["selector"]
     == {"app.kubernetes.io/name": "gateway", "gameday.dev/drained": "true"}),
    ("control_plane_down", None, "global",
     lambda s: s[("Deployment", "fed", "controller")]["spec"]["replicas"] == 0),
])
def test_each_fault_changes_what_it_says_and_its_inverse_puts_it_back(
        loaded: LoadedProfile, tmp_path: Path, servers: dict[str, ApiServer], fault: str, region: str | None,
        cluster: str, changed: Any) -> None:
    t = _target(loaded, tmp_path, client_factory=_factory(servers))
    before = {c: s.state() for c, s in servers.items()}
    params: dict[str, Any] = {}
    t.inject(fault, region, params)
    after = servers[cluster].state()
    assert changed(after), after
    assert {c: s.state() for c, s in servers.items() if c != cluster} == \
        {c: v for c, v in before.items() if c != cluster}, "another cluster was touched"
    ledger_params = json.loads(json.dumps(params))  # what the ledger stores
    t2 = ProfileKubeTarget.attach(json.loads(json.dumps(t.ref())))  # gameday restore's view
    t2._factory = _factory(servers)
    t2.revert(fault, region, ledger_params)
    assert {c: s.state() for c, s in servers.items()} == before, "the revert is not the exact inverse"
    t2.revert(fault, region, ledger_params)  # idempotent
    assert {c: s.state() for c, s in servers.items()} == before
    assert not any(s.unknown for s in servers.values()), [s.unknown for s in servers.values()]


def test_a_workload_already_at_zero_is_refused_and_nothing_changes(loaded: LoadedProfile, tmp_path: Path,
                                                                   servers: dict[str, ApiServer]) -> None:
    servers["a"].objects[("Deployment", "edge", "gateway")]["spec"]["replicas"] = 0
    before = servers["a"].state()
    with pytest.raises(FaultError, match=r"already has 0 replicas .*nothing was injected"):
        _target(loaded, tmp_path, client_factory=_factory(servers)).inject("gateway_down", "a", {})
    assert servers["a"].state() == before
    assert [m for m, *_ in servers["a"].requests] == ["GET"], "only the read was made"


def test_a_missing_workload_fails_the_read_and_injects_nothing(loaded: LoadedProfile, tmp_path: Path,
                                                               servers: dict[str, ApiServer]) -> None:
    del servers["a"].objects[("Deployment", "edge", "gateway")]
    with pytest.raises(FaultError, match=r"reading the current state in context 'staging-a' failed, nothing was "
                                         r"injected: HTTP 404"):
        _target(loaded, tmp_path, client_factory=_factory(servers)).inject("gateway_down", "a", {})


def test_a_lost_record_reverts_what_needs_none_and_says_what_to_do_for_the_rest(loaded: LoadedProfile,
                                                                                 tmp_path: Path) -> None:
    t = _target(loaded, tmp_path, dry_run=True, client_factory=_no_client, out=io.StringIO())
    t.revert("region_isolated", "a", {})  # deleting the policy needs nothing recorded
    assert [op.verb for op in t.recorded] == ["delete"]
    with pytest.raises(FaultError, match=r"exact inverse is unknown: scale Deployment edge/gateway back to its replica "
                                         r"count in cluster 'a' by hand"):
        t.revert("gateway_down", "a", {})


selectors = st.dictionaries(st.sampled_from(["app", "tier", "zone", "gameday.dev/drained", "team"]),
                            st.sampled_from(["a", "b", "true", "edge"]), min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(now=selectors, want=selectors)
def test_selector_patches_are_exact_inverses(now: dict[str, str], want: dict[str, str]) -> None:
    svc = _service("edge", "gateway", now)
    inject = pp.selector_patch(now, want)
    broken = merge_patch(svc, inject)
    assert broken["spec"]["selector"] == want
    assert merge_patch(broken, pp.selector_patch(want, now)) == svc


# -- dry run ------------------------------------------------------------------------------------------------
def test_a_dry_run_prints_every_operation_and_its_inverse_and_opens_no_client(loaded: LoadedProfile,
                                                                               tmp_path: Path) -> None:
    out = io.StringIO()
    t = _target(loaded, tmp_path, dry_run=True, client_factory=_no_client, out=out)
    for fault, region in [("gateway_down", "a"), ("region_isolated", "a"), ("gateway_down", "b")]:
        params: dict[str, Any] = {}
        t.inject(fault, region, params)
        t.revert(fault, region, params)
    lines = out.getvalue().splitlines()
    assert lines == [
        "gameday dry-run: scale Deployment edge/gateway to 0 [a] (context staging-a)",
        "gameday dry-run: scale Deployment edge/gateway to the replica count read at injection [a] (context staging-a)",
        "gameday dry-run: apply NetworkPolicy edge/gameday-isolate-region-isolated [a] (context staging-a)",
        "gameday dry-run: delete NetworkPolicy edge/gameday-isolate-region-isolated [a] (context staging-a)",
        'gameday dry-run: patch Service edge/gateway {"spec": {"selector": {"app.kubernetes.io/name": "gateway", '
        '"gameday.dev/drained": "true"}}} (every other selector key set to null) [b] (context staging-b)',
        'gameday dry-run: patch Service edge/gateway {"spec": {"selector": {}}} (back to the selector read at '
        'injection) [b] (context staging-b)',
    ]
    inject, revert = t.plan_fault("gateway_down", "a", {})
    assert (inject, revert) == ("scale Deployment edge/gateway to 0 [a] (context staging-a)",
                                "scale Deployment edge/gateway to the replica count read at injection [a] "
                                "(context staging-a)")


def test_the_registry_builds_it_for_kube_with_a_profile(loaded: LoadedProfile, tmp_path: Path) -> None:
    s = Settings(target="kube", profile=loaded.path, allow_context=("staging-*",), dry_run=True)
    t = registry.make("kube", loaded.profile.as_topology(), s, tmp_path)
    assert isinstance(t, ProfileKubeTarget)
    assert set(t.faults()) == {"gateway_down", "region_isolated", "control_plane_down"}
    assert t.faults()["region_isolated"].takes_region_out
    # the ledger records where to re-attach it: not KubeTarget's own attach
    assert registry.attach_path(t) == "gameday.targets.k8s.profiled:ProfileKubeTarget.attach"
    again = registry.attach("kube", json.loads(json.dumps(t.ref())), registry.attach_path(t))
    assert isinstance(again, ProfileKubeTarget) and again.allow == ("staging-*",)
    registry.check("kube", loaded.profile.as_topology(), s)  # a dry run: no API call
    assert not isinstance(t, KubeTarget)


def test_the_written_policy_passes_the_real_schema_strictly(loaded: LoadedProfile) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    from gameday.targets.k8s import objects as o

    loc = pp.locate(loaded.profile, "region_isolated", "a")
    (op,), _ = pp.plan_inject(loc, pp.Observed())
    kubernetes_validate.validate(dict(op.body or {}), o.SCHEMA_VERSION, strict=True)
    bad = {**dict(op.body or {}), "spec": {"podSelector": {}, "policyType": ["Ingress"]}}  # misspelt
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, o.SCHEMA_VERSION, strict=True)


def _kind_profile(tmp_path: Path, contexts: dict[str, str]) -> Path:
    data = yaml.safe_load(PROFILE)
    data["kubernetes"]["contexts"] = contexts
    path = tmp_path / "kind-shop.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_kind_with_a_profile_drills_its_existing_kind_clusters(tmp_path: Path) -> None:
    path = _kind_profile(tmp_path, {"a": "kind-shop-a", "b": "kind-shop-b", "global": "kind-shop-g"})
    s = Settings(target="kind", profile=path, dry_run=True)
    t = registry.make("kind", load_profile(path).profile.as_topology(), s, tmp_path)
    assert isinstance(t, ProfileKubeTarget) and t.name == "kind"
    assert t.allow == ("kind-shop-a", "kind-shop-b", "kind-shop-g"), "kind's own contexts, allowed as always"
    assert registry.attach_path(t) == "gameday.targets.k8s.profiled:ProfileKubeTarget.attach"


def test_kind_with_a_profile_refuses_contexts_that_are_not_kind(tmp_path: Path) -> None:
    path = _kind_profile(tmp_path, {"a": "kind-shop-a", "b": "staging-b", "global": "kind-shop-g"})
    with pytest.raises(Exception, match=r"kubernetes.contexts \['staging-b'\] are not kind contexts"):
        registry.make("kind", load_profile(path).profile.as_topology(), Settings(target="kind", profile=path,
                                                                                  dry_run=True), tmp_path)


def test_the_documented_kubernetes_example_is_the_one_tested_here() -> None:
    repo = Path(__file__).resolve().parents[2]
    example = repo / "examples" / "profiles" / "kubernetes.yaml"
    assert yaml.safe_load(example.read_text(encoding="utf-8")) == yaml.safe_load(PROFILE)
    page = (repo / "docs" / "howto" / "kubernetes.md").read_text(encoding="utf-8")
    section = page.split("## Drill your own federation on Kubernetes", 1)[1]
    assert '--8<-- "examples/profiles/kubernetes.yaml"' in section, "the how-to no longer shows the tested example"
    assert load_profile(example).profile.kubernetes is not None


# -- never inject what cannot be reverted (issue 32) ------------------------------------------------------
def test_a_token_that_can_isolate_but_not_delete_the_policy_is_refused_before_anything(
        loaded: LoadedProfile, tmp_path: Path, servers: dict[str, ApiServer]) -> None:
    # region_isolated applies a NetworkPolicy (create/patch) and its inverse deletes it: a token
    # without delete could inject and never revert. The access reviews say so up front.
    servers["a"].denied.add(("delete", "networking.k8s.io", "networkpolicies", ""))
    t = _target(loaded, tmp_path, client_factory=_factory(servers))
    before = servers["a"].state()
    lacking = t.missing_permissions("region_isolated", "a", {})
    assert lacking == ["a (context staging-a): delete networkpolicies (networking.k8s.io) in namespace edge: "
                       "RBAC: not granted"], lacking
    assert servers["a"].state() == before
    assert {r["verb"] for r in servers["a"].reviews} == {"create", "delete", "patch"}
    # a workload that may be read and patched through its scale subresource: allowed, asked once
    assert t.missing_permissions("gateway_down", "a", {}) == []
    asked = len(servers["a"].reviews)
    assert t.missing_permissions("gateway_down", "a", {}) == [] and len(servers["a"].reviews) == asked
    assert {(r["resource"], r.get("subresource"), r["verb"]) for r in servers["a"].reviews[-2:]} == \
        {("deployments", "scale", "get"), ("deployments", "scale", "patch")}
    assert not any(s.unknown for s in servers.values()), [s.unknown for s in servers.values()]


def test_a_token_that_cannot_patch_the_selector_back_is_named(
        loaded: LoadedProfile, tmp_path: Path, servers: dict[str, ApiServer]) -> None:
    servers["b"].denied.add(("patch", "", "services", ""))  # the selector could not be patched back
    t = _target(loaded, tmp_path, client_factory=_factory(servers))
    lacking = t.missing_permissions("gateway_down", "b", {})
    assert lacking == ["b (context staging-b): patch services (core) in namespace edge: RBAC: not granted"]


def test_gameday_rbac_prints_a_least_privilege_role_that_validates_strictly(tmp_path: Path) -> None:
    profile = tmp_path / "shop.yaml"
    profile.write_text(PROFILE)
    out = subprocess.run([sys.executable, "-m", "gameday.cli", "rbac", "--profile", str(profile)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    for d in docs:
        kubernetes_validate.validate(d, o.SCHEMA_VERSION, strict=True)
    def rules(cluster: str, namespace: str) -> dict[tuple[str, str], list[str]]:
        (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == namespace
                   and d["metadata"]["annotations"]["gameday.dev/cluster"].startswith(f"cluster {cluster} ")]
        return {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in role["rules"]}

    assert rules("a", "edge") == {("apps", "deployments/scale"): ["get", "patch"],
                                  ("networking.k8s.io", "networkpolicies"): ["create", "delete", "patch"]}
    assert rules("b", "edge") == {("", "services"): ["get", "patch"]}
    assert rules("global", "fed") == {("apps", "deployments/scale"): ["get", "patch"]}
    assert len([d for d in docs if d["kind"] == "RoleBinding"]) == 3
    assert "# cluster a (context staging-a)" in out and "# cluster global (context staging-global)" in out
