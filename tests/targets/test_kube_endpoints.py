"""The kube target's endpoints cover what the conformance rules R2, R3, R8 and R10 read.

Offline, against what would be deployed: every URL the target hands out must land, through
the rendered manifests, on a NodePort Service of the cluster whose node address it names,
selecting the one workload whose container serves that component on that port, and the
path must be one that component's router serves (read from the fedapp's own source). The
faults and capabilities the four suites use must be ones the kube target has.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from gameday.fedapp.agent import Agent
from gameday.fedapp.app import App
from gameday.fedapp.common import JsonLog
from gameday.fedapp.controlplane import ControlPlane
from gameday.fedapp.gateway import Gateway
from gameday.fedapp.gslb import Gslb
from gameday.fedapp.proxy import Proxy
from gameday.fedapp.skeleton import HttpComponent
from gameday.fedapp.spec import FederationSpec
from gameday.interfaces import Reconcilable
from gameday.model.topology import Topology, load_topology
from gameday.targets.k8s import files as k8s_files
from gameday.targets.k8s import manifests
from gameday.targets.k8s.kube import KubeTarget
from gameday.targets.k8s.plan import K8S_ACTIONS

REPO = Path(__file__).resolve().parents[2]
ADDRESSES = {"global": "10.0.0.1", "a": "10.0.1.1", "b": "10.0.2.1", "c": "10.0.3.1"}
SUITES = {rule: next((REPO / "suites" / "conformance").glob(f"test_r{rule:02d}_*.py")) for rule in (2, 3, 8, 10)}


def _components(spec: FederationSpec) -> dict[str, HttpComponent]:
    """One of each component of region ``a`` (and the global tier), constructed, not started."""
    log = JsonLog("test", stream=io.StringIO())
    region, inst = spec.instance("a-1")
    return {"gslb": Gslb(spec, log), "agent": Agent(spec, "a", log), "controlplane": ControlPlane(spec, log),
            "gateway": Gateway(spec, region, log), "proxy": Proxy(spec, region, log), "app": App(region, inst, log)}


COMPONENTS = _components(manifests.render_spec(load_topology(k8s_files.KIND_TOPOLOGY), manifests.Addressing(ADDRESSES)))


def _no_client(context: str) -> Any:
    raise AssertionError(f"the target tried to open an API client for {context!r}")


@pytest.fixture
def target(topology: Topology, tmp_path: Path) -> KubeTarget:
    t = KubeTarget(topology, tmp_path, allow=["kind-gd-*"], dry_run=True, client_factory=_no_client,
                   addresses=ADDRESSES, out=io.StringIO())
    t.up()
    return t


def _component_at(topology: Topology, url: str) -> tuple[str, str]:
    """(component, path) that *url* reaches through the rendered manifests; fails if none or several."""
    parts = urlsplit(url)
    cluster = next(c for c, h in ADDRESSES.items() if h == parts.hostname)
    objs = manifests.render_all(topology, manifests.Addressing(ADDRESSES))[cluster]
    services = [s for s in objs if s["kind"] == "Service" and s["spec"].get("type") == "NodePort"
                and any(p["nodePort"] == parts.port and p["protocol"] == "TCP" for p in s["spec"]["ports"])]
    assert len(services) == 1, f"{url}: {len(services)} NodePort Services on port {parts.port} in {cluster}"
    sel = services[0]["spec"]["selector"]
    workloads = [w for w in objs if w["kind"] in ("Deployment", "StatefulSet")
                 and sel.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
    assert len(workloads) == 1, f"{url}: the Service selects {len(workloads)} workloads"
    (container,) = workloads[0]["spec"]["template"]["spec"]["containers"]
    assert any(p["containerPort"] == parts.port for p in container["ports"]), f"{url}: no container port"
    return container["args"][0], parts.path


def _served(component: str, path: str) -> bool:
    public, _ = COMPONENTS[component].web_apps(separate_admin=True)
    return any(r.method == "GET" and r.resource is not None and r.resource.canonical == path
               for r in public.router.routes())


def test_the_conformance_urls_are_set(target: KubeTarget) -> None:
    ep = target.reference_endpoints()
    assert ep.gslb == "http://10.0.0.1:30054/status"
    assert ep.snapshot == "http://10.0.0.1:30090/snapshot"
    assert ep.agents == {r: f"http://{ADDRESSES[r]}:30082/status" for r in ("a", "b", "c")}


@pytest.mark.parametrize("field", ["gslb", "snapshot", "control_plane", "agents", "entry_nodes", "utilisation"])
def test_every_url_reaches_the_component_that_serves_it(target: KubeTarget, topology: Topology, field: str) -> None:
    value = getattr(target.reference_endpoints(), field)
    urls = [value] if isinstance(value, str) else [u for v in value.values() for u in ([v] if isinstance(v, str)
                                                                                       else v)]
    assert urls, f"Endpoints.{field} is empty"
    want = {"gslb": "gslb", "snapshot": "controlplane", "control_plane": "controlplane", "agents": "agent"}
    for url in urls:
        component, path = _component_at(topology, url)
        if field in want:
            assert component == want[field], f"{field} {url} reaches {component}"
        assert _served(component, path), f"{url}: {component} serves no GET {path}"


def test_the_check_above_fails_on_a_wrong_port(topology: Topology) -> None:
    """Negative control: a URL at the agent's port but the control plane's path is caught."""
    component, path = _component_at(topology, "http://10.0.1.1:30082/snapshot")
    assert component == "agent" and not _served(component, path)


@pytest.mark.parametrize("rule", sorted(SUITES))
def test_the_suites_faults_and_capabilities_exist_on_kube(target: KubeTarget, rule: int) -> None:
    text = SUITES[rule].read_text()
    faults = set(re.findall(r'drill\.fault\("([a-z_]+)"', text))
    assert faults <= set(K8S_ACTIONS), f"R{rule} uses faults the kube target lacks: {faults - set(K8S_ACTIONS)}"
    if "Reconcilable" in text:
        assert isinstance(target, Reconcilable)
    views = set(re.findall(r"view\.(gslb|snapshot|agent_url)\(", text))
    ep = target.reference_endpoints()
    for v in views:
        assert {"gslb": ep.gslb, "snapshot": ep.snapshot, "agent_url": ep.agents}[v], f"R{rule} reads {v}"
