"""Kubernetes manifests and kind cluster configs for the reference federation, from a topology.

Pure functions returning plain dicts (no ``kubernetes`` import): the kube and kind
targets apply them, the tests validate them offline against the Kubernetes schemas,
and ``python -m gameday.targets.k8s.files`` writes the reviewed copies under
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

Admin (fault hooks, the reconciliation pass) is served on the pod's loopback only
(``GAMEDAY_ADMIN_LISTEN=127.0.0.1:``:data:`~gameday.targets.k8s.objects.ADMIN_PORT`), no
containerPort, no Service; the harness reaches it through a port-forward. Each namespace
denies all ingress and admits exactly the NodePort Services' ports
(:func:`~gameday.targets.k8s.objects.network_policies`, which says why a port-forward is the
harness's side).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

from gameday.errors import ConfigError
from gameday.fedapp.spec import Endpoint, FederationSpec, InstanceSpec, RegionSpec
from gameday.interfaces import RegionInfo
from gameday.model.release import plan_release
from gameday.model.topology import GLOBAL_CLUSTER, Topology
from gameday.targets.fedapp_spec import app_topology
from gameday.targets.k8s.objects import (
    AGENT_PORT,
    APP_PORT_BASE,
    CONTROL_PLANE_PORT,
    DENY_INGRESS_POLICY,
    GATEWAY_PORT,
    GSLB_DNS_PORT,
    GSLB_HTTP_PORT,
    LABEL_APP_INSTANCE,
    NATS_IMAGE,
    NATS_MONITOR_PORT,
    NATS_PORT,
    PLACEHOLDER_NET,
    PROXY_PORT,
    READINESS_FAILURE_THRESHOLD,
    READINESS_SUCCESS_THRESHOLD,
    REPLICAS,
    SECURITY,
    WORKDIR,
    Obj,
    admin_secret,
    config_map,
    deployment,
    fedapp_container,
    http_port,
    labels,
    meta,
    namespace,
    network_policies,
    node_port_service,
    pdb,
    probe,
    selector,
    spread,
)


@dataclass(frozen=True)
class Addressing:
    """The node address (IPv4: the GSLB answers A records with it) of every cluster."""

    hosts: dict[str, str]
    """Cluster key (region name or ``global``) -> node address."""

    def host(self, cluster: str) -> str:
        try:
            return self.hosts[cluster]
        except KeyError:
            raise ConfigError(
                f"no node address for cluster {cluster!r} (have {sorted(self.hosts)})"
            ) from None

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

    The global tier first (agents need the bus and the control plane), then the regions in
    :func:`gameday.model.release.plan_release` order (standby first, the primary last); each
    cluster is verified before the next.
    """
    infos = [RegionInfo(r.name, r.weight, r.capacity, "") for r in topology.regions]
    return [GLOBAL_CLUSTER, *plan_release(infos, topology.primary_region)]


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
        gw.append(
            RegionSpec(
                name=r.name,
                index=i + 1,
                weight=r.weight,
                fallback=r.fallback,
                gateway=Endpoint(host=host, port=GATEWAY_PORT),
                proxy=Endpoint(host=host, port=PROXY_PORT),
                agent=Endpoint(host=host, port=AGENT_PORT),
                instances=[
                    InstanceSpec(
                        name=f"{r.name}-{k}",
                        endpoint=Endpoint(host=host, port=APP_PORT_BASE + k),
                        capacity_rps=r.capacity_rps,
                    )
                    for k in range(1, r.instances + 1)
                ],
                quota=dict(r.quota),
                labels=dict(r.labels),
            )
        )
    g = addressing.host(GLOBAL_CLUSTER)
    return FederationSpec(
        run_id=run_id(topology),
        workdir=WORKDIR,
        topology=app_topology(topology),
        nats_url=f"nats://{g}:{NATS_PORT}",
        nats_port=NATS_PORT,
        control_plane=Endpoint(host=g, port=CONTROL_PLANE_PORT),
        gslb_dns=Endpoint(host=g, port=GSLB_DNS_PORT),
        gslb_http=Endpoint(host=g, port=GSLB_HTTP_PORT),
        gateway_port=GATEWAY_PORT,
        regions=gw,
    )


def spec_json(spec: FederationSpec) -> str:
    return json.dumps(spec.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


# -- per cluster ------------------------------------------------------------------------------------
def _template_hash(text: str, admin_generation: str) -> str:
    """The pods' ``spec-sha256`` annotation: a changed spec or a new admin token (a new
    *admin_generation*, not the token) rolls the pods, which read both at start only."""
    return hashlib.sha256(f"{text}\0{admin_generation}".encode()).hexdigest()


def render_region(topology: Topology, region: str, spec: FederationSpec, admin_generation: str = "") -> list[Obj]:
    """Namespace, spec ConfigMap, admin Secret, gateway/proxy/agent and per-instance app
    Deployments, Services, PDBs, NetworkPolicies."""
    r = topology.region(region)
    text = spec_json(spec)
    h = _template_hash(text, admin_generation)
    objs: list[Obj] = [namespace(topology, region), config_map(topology, region, text),
                       admin_secret(topology, region)]
    for component, port in (("gateway", GATEWAY_PORT), ("proxy", PROXY_PORT), ("agent", AGENT_PORT)):
        ports = [http_port(port)]
        objs.append(
            deployment(
                topology, region, component, fedapp_container(component, ports, ["--region", region]), h
            )
        )
        objs.append(node_port_service(topology, region, component, component, ports))
        objs.append(pdb(topology, region, component, REPLICAS[component]))
    objs.extend(_app(topology, region, r.instances, h))
    return [*objs, *network_policies(topology, region, objs)]


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
        ports = [http_port(APP_PORT_BASE + k)]
        # replicas 1 with a surge: an update starts the new pod before stopping the old one
        dep = deployment(
            topology,
            region,
            "app",
            fedapp_container("app", ports, ["--instance", inst]),
            spec_hash,
            name=name,
            replicas=1,
        )
        dep["spec"]["strategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
        }
        dep["metadata"]["labels"][LABEL_APP_INSTANCE] = inst
        dep["spec"]["selector"]["matchLabels"][LABEL_APP_INSTANCE] = inst
        dep["spec"]["template"]["metadata"]["labels"][LABEL_APP_INSTANCE] = inst
        objs.append(dep)
        objs.append(
            node_port_service(topology, region, name, "app", ports, extra_selector={LABEL_APP_INSTANCE: inst})
        )
    objs.append(pdb(topology, region, "app", instances))
    return objs


def render_global(topology: Topology, spec: FederationSpec, admin_generation: str = "") -> list[Obj]:
    """Namespace, spec ConfigMap, admin Secret, control plane, GSLB, NATS (JetStream on a
    PVC), Services, PDBs, NetworkPolicies."""
    c = GLOBAL_CLUSTER
    text = spec_json(spec)
    h = _template_hash(text, admin_generation)
    objs: list[Obj] = [namespace(topology, c), config_map(topology, c, text), admin_secret(topology, c)]
    cp_ports = [http_port(CONTROL_PLANE_PORT)]
    objs += [
        deployment(topology, c, "controlplane", fedapp_container("controlplane", cp_ports, []), h),
        node_port_service(topology, c, "controlplane", "controlplane", cp_ports),
        pdb(topology, c, "controlplane", REPLICAS["controlplane"]),
    ]
    gslb_ports = [
        {"name": "dns-udp", "containerPort": GSLB_DNS_PORT, "protocol": "UDP"},
        {"name": "dns-tcp", "containerPort": GSLB_DNS_PORT, "protocol": "TCP"},
        http_port(GSLB_HTTP_PORT),
    ]
    objs += [
        deployment(topology, c, "gslb", fedapp_container("gslb", gslb_ports, []), h),
        node_port_service(topology, c, "gslb", "gslb", gslb_ports),
        pdb(topology, c, "gslb", REPLICAS["gslb"]),
    ]
    objs += _nats(topology)
    return [*objs, *network_policies(topology, c, objs)]


NATS_PORTS: list[Obj] = [
    {"name": "client", "containerPort": NATS_PORT, "protocol": "TCP"},
    {"name": "monitor", "containerPort": NATS_MONITOR_PORT, "protocol": "TCP"},
]


def _nats_container() -> Obj:
    """The nats-server container: JetStream on its volume, probed on its monitor port."""
    return {
        "name": "nats",
        "image": NATS_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            "--port",
            str(NATS_PORT),
            "--http_port",
            str(NATS_MONITOR_PORT),
            "--jetstream",
            "--store_dir",
            "/data/jetstream",
            "--server_name",
            "gameday",
        ],
        "ports": [dict(p) for p in NATS_PORTS],
        "livenessProbe": probe("/healthz?js-enabled-only=true", "monitor", period=10, failure=3),
        "readinessProbe": probe(
            "/healthz",
            "monitor",
            period=2,
            failure=READINESS_FAILURE_THRESHOLD,
            success=READINESS_SUCCESS_THRESHOLD,
        ),
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "securityContext": dict(SECURITY),
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }


def _nats(topology: Topology) -> list[Obj]:
    c = GLOBAL_CLUSTER
    container = _nats_container()
    pod = {
        "containers": [container],
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 30,  # JetStream flushes its store on SIGTERM
        "securityContext": {
            "runAsNonRoot": True,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "topologySpreadConstraints": spread(topology, "nats"),
    }
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(topology, c, "nats", "nats"),
        "spec": {
            "replicas": REPLICAS["nats"],
            "serviceName": "nats-headless",
            "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": selector(topology, "nats")},
            "template": {"metadata": {"labels": labels(topology, c, "nats")}, "spec": pod},
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data", "labels": labels(topology, c, "nats")},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
            ],
            # the JetStream store outlives a scale to 0 (bus_down) and a re-deploy
            "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Retain", "whenDeleted": "Delete"},
        },
    }
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(topology, c, "nats-headless", "nats"),
        "spec": {
            "clusterIP": "None",
            "selector": selector(topology, "nats"),
            "ports": [{"name": "client", "port": NATS_PORT, "targetPort": "client", "protocol": "TCP"}],
        },
    }
    svc = node_port_service(topology, c, "nats", "nats", [dict(NATS_PORTS[0])])
    return [sts, headless, svc, pdb(topology, c, "nats", REPLICAS["nats"])]


def render_all(topology: Topology, addressing: Addressing | None = None,
               admin_generation: str = "") -> dict[str, list[Obj]]:
    """Every cluster's objects, keyed by cluster (``global`` first, then regions).

    *admin_generation* names the deploy's admin token (a random id beside it, never the
    token): a new one rolls the pods so they read the new token.
    """
    clusters(topology)  # refuses a region called "global"
    addressing = addressing or Addressing.placeholder(topology)
    spec = render_spec(topology, addressing)
    out: dict[str, list[Obj]] = {GLOBAL_CLUSTER: render_global(topology, spec, admin_generation)}
    for r in topology.regions:
        out[r.name] = render_region(topology, r.name, spec, admin_generation)
    return out


def allow_policies(topology: Topology, cluster: str) -> list[Obj]:
    """The cluster's ``allow-public-*`` NetworkPolicies exactly as a deploy applies them (they
    do not depend on the node addresses): what a fault that denies ingress must take away
    while it is in, and put back on its revert (NetworkPolicies add up: an allow rule would
    defeat a policy without rules)."""
    return [obj for obj in render_all(topology)[cluster]
            if obj["kind"] == "NetworkPolicy" and obj["metadata"]["name"] != DENY_INGRESS_POLICY]


def iter_containers(obj: Obj) -> Iterable[Obj]:
    """The containers of a workload object (none for other kinds)."""
    tpl = obj.get("spec", {}).get("template", {})
    yield from tpl.get("spec", {}).get("containers", [])
