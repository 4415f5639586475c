"""What the kube and kind targets do to clusters, as data: pure plans of API operations.

Every deploy, fault, revert and teardown is first planned here as a list of :class:`Op`
(no ``kubernetes`` import, no I/O); :mod:`gameday.targets.kube` only executes a plan, or
in dry-run mode records it. The tests check the plans (exact inverses, allow-list).

How each catalogue fault is done on Kubernetes ("hook" = a POST to the fedapp's own
fault endpoint on every matching pod, through the API server's pod proxy; the same hooks
the local target uses):

==================  ===========================================================================
kind                inject / revert
==================  ===========================================================================
gateway_down        scale Deployment ``gateway`` of the region to 0 (the replica count is
                    recorded in params as ``replicas``) / scale back to it
gateway_hung        NetworkPolicy selecting the gateway pods, Ingress with no rule: packets
                    are dropped, connections hang / delete it
region_blackhole    NetworkPolicy selecting every pod of the region, Ingress and Egress with
                    no rule ("pulling the cable") / delete it
control_plane_down  scale Deployment ``controlplane`` (global) to 0 / scale back
bus_down            scale StatefulSet ``nats`` (global) to 0; JetStream stays on its PVC /
                    scale back
sync_delay          hook ``{"broadcast_delay": seconds}`` on the control plane (the old delay
                    is recorded as ``previous``) / hook the old delay
probe_flap          hook ``{"readyz": "flap", period, down}`` on the gateways / ``{"readyz": "ok"}``
gateway_blip        hook ``{"readyz": "fail", seconds}`` on the gateways / ``{"readyz": "ok"}``
gateway_unready     hook ``{"readyz": "fail"}`` on the gateways / ``{"readyz": "ok"}``
instances_unready   hook ``{"readyz": "fail"}`` on every app instance / ``{"readyz": "ok"}``
instances_hung      NetworkPolicy selecting the app pods, Ingress with no rule / delete it
proxy_cut_off       hook ``{"drop_broadcasts": true}`` on the proxies / ``false``
region_labels       ``POST /admin/slow {"labels": ...}`` on the agent (the old labels are
                    recorded as ``previous``) / put them back, then the control plane's
                    full reconciliation pass (``/admin/reconcile``)
==================  ===========================================================================

Hooks live in the pods' memory: a pod restarted during a fault comes back healthy, and the
revert (idempotent) still succeeds.

NetworkPolicies need a CNI that enforces them (kindnet does since kind v0.24; on staging,
Calico/Cilium/...); the fedapp admin hooks are the same ones the local target uses, reached
through the API server so they need no network path from the harness to the pods.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gameday.errors import ConfigError, FaultError, TargetError
from gameday.targets import k8s_objects as o
from gameday.targets import manifests as m
from gameday.topology import GLOBAL_CLUSTER, Topology

LABEL_FAULT = "gameday.dev/fault"


@dataclass(frozen=True, kw_only=True)
class Op:
    """One Kubernetes API operation on one cluster.

    verbs: ``connect`` (open a client for the cluster's context), ``apply`` (server-side
    apply of ``body``), ``scale`` (set ``replicas``), ``delete`` (absent is fine),
    ``wait`` (the cluster's workloads available, R12's "verify before the next"),
    ``admin`` (POST ``body`` as JSON to ``port``/``path`` of every pod matching
    ``selector``, through the API server's pod proxy), ``patch`` (JSON merge patch
    ``body``), ``rollout`` (wait until the Deployment's rollout is complete).
    """

    verb: str
    cluster: str
    kind: str
    name: str
    namespace: str | None = o.NAMESPACE
    replicas: int | None = None
    body: Mapping[str, Any] | None = field(default=None, hash=False)
    selector: str | None = None
    port: int | None = None
    path: str | None = None

    def describe(self) -> str:
        """One line for dry-run output and errors, e.g. ``scale Deployment gameday/gateway to 0 [a]``."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        if self.verb == "scale":
            what = f"scale {self.kind} {where} to {self.replicas}"
        elif self.verb == "admin":
            body = dict(self.body or {})
            what = f"POST {self.path} {body} to pods {self.selector} port {self.port} in {self.namespace}"
        elif self.verb == "connect":
            what = f"connect to context {self.name!r}"
        else:
            what = f"{self.verb} {self.kind} {where}"
        return f"{what} [{self.cluster}]"


@dataclass(frozen=True)
class Observed:
    """What a fault plan needs to know of the live clusters before it changes them."""

    replicas: dict[tuple[str, str, str], int]
    """(cluster, kind, name) -> ``spec.replicas`` now."""
    broadcast_delay: float
    """The control plane's broadcast delay now, seconds."""
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    """Region -> its agent's slow-state labels now (read only for ``region_labels``)."""

    @classmethod
    def desired(cls, topology: Topology) -> Observed:
        """The state the manifests declare (dry-run: nothing is read from a cluster)."""
        reps = {(c, k, n): o.REPLICAS[n] for c, k, n in _SCALED.values() if c == GLOBAL_CLUSTER}
        for r in topology.regions:
            reps[(r.name, "Deployment", "gateway")] = o.REPLICAS["gateway"]
        labels = {r.name: dict(r.labels) for r in topology.regions}
        return cls(reps, topology.control_plane.broadcast_delay, labels)


# fault kind -> (cluster or "" for the fault's region, workload kind, workload name)
_SCALED: dict[str, tuple[str, str, str]] = {
    "gateway_down": ("", "Deployment", "gateway"),
    "control_plane_down": (GLOBAL_CLUSTER, "Deployment", "controlplane"),
    "bus_down": (GLOBAL_CLUSTER, "StatefulSet", "nats"),
}
# fault kind -> (NetworkPolicy name, component selected or None for every pod, policy types)
_POLICY: dict[str, tuple[str, str | None, list[str]]] = {
    "gateway_hung": ("gameday-fault-gateway-hung", "gateway", ["Ingress"]),
    "instances_hung": ("gameday-fault-instances-hung", "app", ["Ingress"]),
    "region_blackhole": ("gameday-fault-region-blackhole", None, ["Ingress", "Egress"]),
}
_OK = {"readyz": "ok"}
# fault kind -> (component, inject body from params, revert body); app instances are per pod
_HOOKS: dict[str, tuple[str, Callable[[Mapping[str, Any]], dict[str, Any]], dict[str, Any]]] = {
    "probe_flap": (
        "gateway",
        lambda p: {
            "readyz": "flap",
            "period": float(p.get("period", 1.0)),
            "down": float(p.get("down", 0.3)),
        },
        _OK,
    ),
    "gateway_blip": (
        "gateway",
        lambda p: {"readyz": "fail", "seconds": _param(p, "gateway_blip", "seconds")},
        _OK,
    ),
    "gateway_unready": ("gateway", lambda p: {"readyz": "fail"}, _OK),
    "instances_unready": ("app", lambda p: {"readyz": "fail"}, _OK),
    "proxy_cut_off": ("proxy", lambda p: {"drop_broadcasts": True}, {"drop_broadcasts": False}),
}
_PORTS = {
    "gateway": o.GATEWAY_PORT,
    "proxy": o.PROXY_PORT,
    "agent": o.AGENT_PORT,
    "controlplane": o.CONTROL_PLANE_PORT,
}


def _param(params: Mapping[str, Any], kind: str, name: str) -> float:
    if name not in params:
        raise ConfigError(f"fault {kind!r} needs the parameter {name!r}")
    return float(params[name])


def scaled_workload(kind: str, region: str | None) -> tuple[str, str, str] | None:
    """The (cluster, kind, name) a scale fault acts on, or None for other faults."""
    t = _SCALED.get(kind)
    if t is None:
        return None
    return (t[0] or _need_region(kind, region), t[1], t[2])


def _need_region(kind: str, region: str | None) -> str:
    if region is None:
        raise ConfigError(f"fault {kind!r} needs a region")
    return region


def check_allowed(contexts: Mapping[str, str], patterns: Sequence[str]) -> None:
    """Refuse unless every context matches an allow-list glob (``fnmatch``, case-sensitive).

    Raises:
        TargetError: names the first refused context, its cluster and the option to set.
    """
    for cluster, ctx in contexts.items():
        if not any(fnmatch.fnmatchcase(ctx, p) for p in patterns):
            allowed = ", ".join(repr(p) for p in patterns) or "none given"
            raise TargetError(
                f"kube context {ctx!r} (cluster {cluster!r}) is not allow-listed (allowed: {allowed}); "
                f"gameday only breaks contexts matching --gameday-allow-context. If {ctx!r} may be "
                f"broken, pass --gameday-allow-context={ctx} (or a glob matching it). Nothing was changed."
            )


# -- deploy and teardown ----------------------------------------------------------------------------
def plan_connect(contexts: Mapping[str, str]) -> list[Op]:
    return [
        Op(verb="connect", cluster=c, kind="Context", name=ctx, namespace=None) for c, ctx in contexts.items()
    ]


def plan_deploy(topology: Topology, addressing: m.Addressing) -> list[Op]:
    """Apply every object, cluster by cluster in :func:`manifests.release_order`, each
    cluster verified available (``wait``) before the next one is touched (R12)."""
    objs = m.render_all(topology, addressing)
    ops: list[Op] = []
    for cluster in m.release_order(topology):
        for obj in objs[cluster]:
            meta = obj["metadata"]
            ops.append(
                Op(
                    verb="apply",
                    cluster=cluster,
                    kind=obj["kind"],
                    name=meta["name"],
                    namespace=meta.get("namespace"),
                    body=obj,
                )
            )
        ops.append(Op(verb="wait", cluster=cluster, kind="Namespace", name=o.NAMESPACE, namespace=None))
    return ops


def plan_down(topology: Topology, only: Sequence[str] | None = None) -> list[Op]:
    """Delete the namespace (and with it everything deployed) in each cluster, primary first."""
    order = list(reversed(m.release_order(topology)))
    return [
        Op(verb="delete", cluster=c, kind="Namespace", name=o.NAMESPACE, namespace=None)
        for c in order
        if only is None or c in only
    ]


# -- faults -----------------------------------------------------------------------------------------
def _policy(topology: Topology, region: str, kind: str) -> dict[str, Any]:
    name, component, types = _POLICY[kind]
    pod_selector: dict[str, Any] = {"matchLabels": o.selector(topology, component)} if component else {}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": o.NAMESPACE,
            "labels": {**o.labels(topology, region), LABEL_FAULT: kind},
        },
        # no ingress/egress rules: everything the policy selects is denied
        "spec": {"podSelector": pod_selector, "policyTypes": types},
    }


def _hooks(topology: Topology, region: str, component: str, body: dict[str, Any]) -> list[Op]:
    """Hook ops for *component* of *region*: one for a Deployment's pods, one per app instance
    (each instance listens on its own port)."""
    if component != "app":
        return [_admin(region, component, topology, _PORTS[component], body)]
    ops = []
    for k in range(1, topology.region(region).instances + 1):
        sel = {**o.selector(topology, "app"), o.LABEL_APP_INSTANCE: f"{region}-{k}"}
        ops.append(
            Op(
                verb="admin",
                cluster=region,
                kind="Pod",
                name=f"app-{k}",
                port=o.APP_PORT_BASE + k,
                selector=_selector_string(sel),
                path="/admin/fault",
                body=body,
            )
        )
    return ops


def _selector_string(sel: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sel.items())


def _admin(
    cluster: str,
    component: str,
    topology: Topology,
    port: int,
    body: dict[str, Any],
    *,
    path: str = "/admin/fault",
) -> Op:
    sel = _selector_string(o.selector(topology, component))
    return Op(
        verb="admin",
        cluster=cluster,
        kind="Pod",
        name=component,
        selector=sel,
        port=port,
        path=path,
        body=body,
    )


def plan_inject(
    topology: Topology, kind: str, region: str | None, params: dict[str, Any], observed: Observed
) -> list[Op]:
    """The operations that inject *kind*; records in *params* what the revert needs.

    Raises:
        ConfigError: unknown fault kind or missing region.
        FaultError: the fault is already in effect (a workload already at 0 replicas).
    """
    scaled = scaled_workload(kind, region)
    if scaled is not None:
        cluster, wkind, name = scaled
        now = observed.replicas.get(scaled)
        if now is None:
            raise FaultError(f"{kind}: {wkind} {o.NAMESPACE}/{name} not found in cluster {cluster!r}")
        if now == 0:
            raise FaultError(
                f"{kind}: {wkind} {o.NAMESPACE}/{name} in cluster {cluster!r} already has 0 replicas "
                "(another fault in effect? run `gameday restore`); nothing was injected"
            )
        params["replicas"] = now  # the revert scales back to exactly this
        return [Op(verb="scale", cluster=cluster, kind=wkind, name=name, replicas=0)]
    if kind in _POLICY:
        r = _need_region(kind, region)
        return [
            Op(
                verb="apply",
                cluster=r,
                kind="NetworkPolicy",
                name=_POLICY[kind][0],
                body=_policy(topology, r, kind),
            )
        ]
    if kind in _HOOKS:
        component, inject, _ = _HOOKS[kind]
        return _hooks(topology, _need_region(kind, region), component, inject(params))
    if kind == "sync_delay":
        params["previous"] = observed.broadcast_delay
        seconds = float(params.get("seconds", 0.0))
        return [
            _admin(
                GLOBAL_CLUSTER, "controlplane", topology, o.CONTROL_PLANE_PORT, {"broadcast_delay": seconds}
            )
        ]
    if kind == "region_labels":
        r = _need_region(kind, region)
        labels = params.get("labels")
        if not isinstance(labels, dict):
            raise ConfigError(
                f"fault 'region_labels' needs the parameter 'labels' (a mapping), got {labels!r}"
            )
        params["previous"] = dict(observed.labels.get(r, {}))
        return [_admin(r, "agent", topology, o.AGENT_PORT, {"labels": dict(labels)}, path="/admin/slow")]
    raise ConfigError(f"kube target: unknown fault {kind!r}")


def plan_revert(topology: Topology, kind: str, region: str | None, params: Mapping[str, Any]) -> list[Op]:
    """The operations that exactly undo :func:`plan_inject` (idempotent: safe to repeat).

    When what the injection recorded in *params* was lost (runner killed between the
    injection and the ledger update), the revert restores what the manifests and the
    topology declare: the replica count, the broadcast delay, the agent's labels.
    """
    scaled = scaled_workload(kind, region)
    if scaled is not None:
        cluster, wkind, name = scaled
        replicas = int(params.get("replicas", o.REPLICAS[name]))
        return [Op(verb="scale", cluster=cluster, kind=wkind, name=name, replicas=replicas)]
    if kind in _POLICY:
        r = _need_region(kind, region)
        return [Op(verb="delete", cluster=r, kind="NetworkPolicy", name=_POLICY[kind][0])]
    if kind in _HOOKS:
        component, _, revert = _HOOKS[kind]
        return _hooks(topology, _need_region(kind, region), component, dict(revert))
    if kind == "sync_delay":
        previous = float(params.get("previous", topology.control_plane.broadcast_delay))
        return [
            _admin(
                GLOBAL_CLUSTER, "controlplane", topology, o.CONTROL_PLANE_PORT, {"broadcast_delay": previous}
            )
        ]
    if kind == "region_labels":
        r = _need_region(kind, region)
        # the old labels lost (runner killed before the ledger update): the declared ones
        old_labels = dict(params.get("previous", topology.region(r).labels))
        ops = [_admin(r, "agent", topology, o.AGENT_PORT, {"labels": old_labels}, path="/admin/slow")]
        return [*ops, *plan_reconcile(topology)]
    raise ConfigError(f"kube target: unknown fault {kind!r}")


# -- releases (R12) -----------------------------------------------------------------------------------
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def plan_rollout(topology: Topology, region: str, stamp: str) -> list[Op]:
    """Roll the region's app instances one at a time, as ``kubectl rollout restart`` does
    (a new pod-template annotation), each rollout complete before the next instance."""
    r = topology.region(region)
    ops: list[Op] = []
    for k in range(1, r.instances + 1):
        name = f"app-{k}"
        ops.append(
            Op(
                verb="patch",
                cluster=region,
                kind="Deployment",
                name=name,
                body={"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}},
            )
        )
        ops.append(Op(verb="rollout", cluster=region, kind="Deployment", name=name))
    return ops


def plan_reconcile(topology: Topology) -> list[Op]:
    """The control plane's full reconciliation pass (R3), through the pod proxy."""
    return [
        _admin(GLOBAL_CLUSTER, "controlplane", topology, o.CONTROL_PLANE_PORT, {}, path="/admin/reconcile")
    ]
