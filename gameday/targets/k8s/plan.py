"""What the kube and kind targets do to clusters, as data: pure plans of API operations.

Every deploy, fault, revert and teardown is first planned here as a list of :class:`Op`
(no ``kubernetes`` import, no I/O); :mod:`gameday.targets.k8s.kube` only executes a plan, or
in dry-run mode records it. The tests check the plans (exact inverses, allow-list).

How each fault of :data:`gameday.faults.FAULTS` is done on Kubernetes is one entry of
:data:`K8S_ACTIONS`: scale a workload to 0 and back (:class:`Scale`), a NetworkPolicy with
no rule and its deletion (:class:`DenyPolicy`), a POST to the fedapp's own fault hook on
every matching pod through a port-forward to the pod's loopback admin port, the same hooks
the local target uses (:class:`Hook`), the broadcast delay and an agent's labels with the old value recorded
(:class:`BroadcastDelay`, :class:`AgentLabels`). Each entry's ``inject`` and ``revert``
are exact inverses; ``reads`` says what must be read from the live clusters first.

Hooks live in the pods' memory: a pod restarted during a fault comes back healthy, and the
revert (idempotent) still succeeds.

NetworkPolicies need a CNI that enforces them (kindnet does since kind v0.24; on staging,
Calico/Cilium/...); the fedapp admin hooks are the same ones the local target uses, reached
through port-forwards (the API server and the kubelet) so they need no network path from the
harness to the pods, and no NetworkPolicy admits them.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gameday.errors import ConfigError, FaultError, FaultUnavailable, TargetError
from gameday.faults.catalogue import FAULTS
from gameday.faults.model import FaultCall
from gameday.fedapp.wire import (
    AdminCall,
    ReadyzMode,
    agent_labels,
    broadcast_delay,
    drop_broadcasts,
    readyz_fault,
    reconcile,
)
from gameday.model.tables import Table
from gameday.model.topology import GLOBAL_CLUSTER, Topology
from gameday.targets.k8s import manifests as m
from gameday.targets.k8s import objects as o

LABEL_FAULT = "gameday.dev/fault"


@dataclass(frozen=True, kw_only=True)
class Op:
    """One Kubernetes API operation on one cluster.

    verbs: ``connect`` (open a client for the cluster's context), ``apply`` (server-side
    apply of ``body``), ``scale`` (set ``replicas``), ``delete`` (absent is fine),
    ``wait`` (the cluster's workloads available, R12's "verify before the next"),
    ``admin`` (POST ``body`` as JSON to ``port``/``path`` of every pod matching
    ``selector``, through a port-forward: ``port`` is the pod's loopback admin port), ``patch`` (JSON merge patch
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
    note: str | None = None
    """What a dry run could not know, in words (``the replica count read at injection``)."""

    def describe(self) -> str:
        """One line for dry-run output and errors, e.g. ``scale Deployment gameday/gateway to 0 [a]``."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        if self.verb == "scale":
            what = f"scale {self.kind} {where} to {self.replicas if self.replicas is not None else self.note}"
        elif self.verb == "patch" and self.kind == "Service":
            what = f"patch {self.kind} {where} {json.dumps(dict(self.body or {}), sort_keys=True)}"
        elif self.verb == "admin":
            body = dict(self.body or {})
            what = f"POST {self.path} {body} to pods {self.selector} port {self.port} in {self.namespace}"
        elif self.verb == "connect":
            what = f"connect to context {self.name!r}"
        else:
            what = f"{self.verb} {self.kind} {where}"
        note = f" ({self.note})" if self.note and not (self.verb == "scale" and self.replicas is None) else ""
        return f"{what}{note} [{self.cluster}]"


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
        reps: dict[tuple[str, str, str], int] = {}
        for a in K8S_ACTIONS.values():
            if isinstance(a, Scale):  # every workload a fault scales, as the manifests declare it
                for c in [a.cluster] if a.cluster else [r.name for r in topology.regions]:
                    reps[(c, a.kind, a.name)] = o.REPLICAS[a.name]
        labels = {r.name: dict(r.labels) for r in topology.regions}
        return cls(reps, topology.control_plane.broadcast_delay, labels)


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


def plan_deploy(topology: Topology, addressing: m.Addressing, admin_generation: str = "") -> list[Op]:
    """Apply every object, cluster by cluster in :func:`manifests.release_order`, each
    cluster verified available (``wait``) before the next one is touched (R12)."""
    objs = m.render_all(topology, addressing, admin_generation)
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
def _hooks(topology: Topology, region: str, component: str, admin: AdminCall) -> list[Op]:
    """Hook ops for *component* of *region*: one for a Deployment's pods, one per app instance
    (each instance listens on its own port)."""
    if component != "app":
        return [_admin(region, component, topology, admin)]
    ops = []
    for k in range(1, topology.region(region).instances + 1):
        sel = {**o.selector(topology, "app"), o.LABEL_APP_INSTANCE: f"{region}-{k}"}
        ops.append(
            Op(
                verb="admin",
                cluster=region,
                kind="Pod",
                name=f"app-{k}",
                port=o.ADMIN_PORT,
                selector=_selector_string(sel),
                path=admin.path,
                body=admin.json(),
            )
        )
    return ops


def _selector_string(sel: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sel.items())


def _admin(
    cluster: str,
    component: str,
    topology: Topology,
    admin: AdminCall,
) -> Op:
    """An admin call on *component*'s pods, to their loopback admin port
    (:data:`~gameday.targets.k8s.objects.ADMIN_PORT`), which only a port-forward reaches."""
    sel = _selector_string(o.selector(topology, component))
    return Op(
        verb="admin",
        cluster=cluster,
        kind="Pod",
        name=component,
        selector=sel,
        port=o.ADMIN_PORT,
        path=admin.path,
        body=admin.json(),
    )


@dataclass(frozen=True)
class Reads:
    """What a fault's injection needs read from the live clusters first (into :class:`Observed`)."""

    workload: tuple[str, str, str] | None = None
    """(cluster, kind, name) whose replica count is recorded."""
    broadcast_delay: bool = False
    labels_of: str | None = None
    """The region whose agent's labels are recorded."""


class K8sAction(Protocol):
    """How the kind/kube targets do one fault, as plans: inject plus its exact inverse."""

    def reads(self, call: FaultCall) -> Reads:
        """What :meth:`inject` needs observed (the kube target reads it; dry run: the declared state)."""

    def inject(self, topology: Topology, call: FaultCall, observed: Observed) -> list[Op]:
        """The operations that inject the fault; records in ``call.params`` what the revert needs.

        Raises:
            ConfigError: a parameter or the region is missing.
            FaultError: the fault is already in effect.
        """

    def revert(self, topology: Topology, call: FaultCall) -> list[Op]:
        """The operations that exactly undo :meth:`inject` (idempotent). When what the
        injection recorded was lost (runner killed before the ledger update), they restore
        what the manifests and the topology declare."""


@dataclass(frozen=True)
class Scale:
    """Scale a workload to 0 (the replica count recorded as ``replicas``) / back to it."""

    cluster: str | None
    """The cluster (``global``), or None for the fault's region."""
    kind: str
    name: str

    def workload(self, call: FaultCall) -> tuple[str, str, str]:
        return (self.cluster or call.need_region(), self.kind, self.name)

    def reads(self, call: FaultCall) -> Reads:
        return Reads(workload=self.workload(call))

    def inject(self, topology: Topology, call: FaultCall, observed: Observed) -> list[Op]:
        cluster, wkind, name = scaled = self.workload(call)
        now = observed.replicas.get(scaled)
        if now is None:
            raise FaultError(f"{call.name}: {wkind} {o.NAMESPACE}/{name} not found in cluster {cluster!r}")
        if now == 0:
            raise FaultError(
                f"{call.name}: {wkind} {o.NAMESPACE}/{name} in cluster {cluster!r} already has 0 replicas "
                "(another fault in effect? run `gameday restore`); nothing was injected"
            )
        call.params["replicas"] = now  # the revert scales back to exactly this
        return [Op(verb="scale", cluster=cluster, kind=wkind, name=name, replicas=0)]

    def revert(self, topology: Topology, call: FaultCall) -> list[Op]:
        cluster, wkind, name = self.workload(call)
        replicas = int(call.params.get("replicas", o.REPLICAS[name]))
        return [Op(verb="scale", cluster=cluster, kind=wkind, name=name, replicas=replicas)]


@dataclass(frozen=True)
class DenyPolicy:
    """A NetworkPolicy with no rule selecting *component*'s pods (None: every pod of the
    region): everything it selects is dropped / delete it.

    The manifests admit the public ports through ``allow-public-*`` policies
    (:func:`~gameday.targets.k8s.objects.network_policies`), and NetworkPolicies add up: an
    allow rule for a pod would defeat a policy without rules. So the injection also deletes
    the allow policies of the pods it selects, and the revert applies them again exactly as
    the manifests declare them (:func:`~gameday.targets.k8s.manifests.allow_policies`).
    Nested on the same pods (a gateway hung inside a region blackhole), a revert leaves out
    the allow policies another deny fault still in effect in the region had deleted
    (:func:`plan_revert`'s ``in_effect``): the last revert re-admits, not the first.
    """

    name: str
    component: str | None
    types: tuple[str, ...]

    def reads(self, call: FaultCall) -> Reads:
        return Reads()

    def body(self, topology: Topology, call: FaultCall) -> dict[str, Any]:
        region = call.need_region()
        pod_selector: dict[str, Any] = (
            {"matchLabels": o.selector(topology, self.component)} if self.component else {}
        )
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {
                "name": self.name,
                "namespace": o.NAMESPACE,
                "labels": {**o.labels(topology, region), LABEL_FAULT: call.name},
            },
            # no ingress/egress rules: everything the policy selects is denied
            "spec": {"podSelector": pod_selector, "policyTypes": list(self.types)},
        }

    def allows(self, topology: Topology, region: str) -> list[dict[str, Any]]:
        """The region's allow policies that admit traffic to pods this fault selects."""
        want = o.selector(topology, self.component).items() if self.component else set()
        return [p for p in m.allow_policies(topology, region)
                if want <= p["spec"]["podSelector"]["matchLabels"].items()]

    def inject(self, topology: Topology, call: FaultCall, observed: Observed) -> list[Op]:
        region = call.need_region()
        return [Op(verb="apply", cluster=region, kind="NetworkPolicy", name=self.name,
                   body=self.body(topology, call)),
                *(Op(verb="delete", cluster=region, kind="NetworkPolicy", name=p["metadata"]["name"])
                  for p in self.allows(topology, region))]

    def revert(self, topology: Topology, call: FaultCall) -> list[Op]:
        region = call.need_region()
        return [*(Op(verb="apply", cluster=region, kind="NetworkPolicy", name=p["metadata"]["name"], body=p)
                  for p in self.allows(topology, region)),
                Op(verb="delete", cluster=region, kind="NetworkPolicy", name=self.name)]


@dataclass(frozen=True)
class Hook:
    """The fedapp's own fault hook on every pod of *component* in the region (the hooks the
    local target uses): the call built from the fault call / the *off* call."""

    component: str
    on: Callable[[FaultCall], AdminCall]
    off: AdminCall

    def reads(self, call: FaultCall) -> Reads:
        return Reads()

    def inject(self, topology: Topology, call: FaultCall, observed: Observed) -> list[Op]:
        return _hooks(topology, call.need_region(), self.component, self.on(call))

    def revert(self, topology: Topology, call: FaultCall) -> list[Op]:
        return _hooks(topology, call.need_region(), self.component, self.off)


@dataclass(frozen=True)
class BroadcastDelay:
    """Hook ``{"broadcast_delay": seconds}`` on the control plane (the old delay recorded as
    ``previous``) / hook the old delay (the topology's if the record was lost)."""

    def reads(self, call: FaultCall) -> Reads:
        return Reads(broadcast_delay=True)

    def _op(self, topology: Topology, seconds: float) -> Op:
        return _admin(GLOBAL_CLUSTER, "controlplane", topology, broadcast_delay(seconds))

    def inject(self, topology: Topology, call: FaultCall, observed: Observed) -> list[Op]:
        call.params["previous"] = observed.broadcast_delay
        return [self._op(topology, float(call.value("seconds")))]

    def revert(self, topology: Topology, call: FaultCall) -> list[Op]:
        return [self._op(topology, float(call.params.get("previous", topology.control_plane.broadcast_delay)))]


@dataclass(frozen=True)
class AgentLabels:
    """``POST /admin/slow {"labels": ...}`` on the region's agent (the old labels recorded as
    ``previous``) / put them back (the declared ones if lost), then the full pass (R3)."""

    def reads(self, call: FaultCall) -> Reads:
        return Reads(labels_of=call.need_region())

    def inject(self, topology: Topology, call: FaultCall, observed: Observed) -> list[Op]:
        r = call.need_region()
        labels = call.value("labels")
        if not isinstance(labels, dict):
            raise ConfigError(
                f"fault 'region_labels' needs the parameter 'labels' (a mapping), got {labels!r}"
            )
        call.params["previous"] = dict(observed.labels.get(r, {}))
        return [_admin(r, "agent", topology, agent_labels(labels))]

    def revert(self, topology: Topology, call: FaultCall) -> list[Op]:
        r = call.need_region()
        old_labels = dict(call.params.get("previous", topology.region(r).labels))
        ops = [_admin(r, "agent", topology, agent_labels(old_labels))]
        return [*ops, *plan_reconcile(topology)]


@dataclass(frozen=True)
class NotDeployed:
    """A fault on a part the kind/kube manifests do not deploy (yet): refused with the reason
    before anything is read or run (:class:`~gameday.errors.FaultUnavailable`), so the drill
    never records an injection that cannot happen; its revert has nothing to undo."""

    what: str

    def _refuse(self, call: FaultCall) -> FaultUnavailable:
        return FaultUnavailable(f"{call.name}: the kind and kube targets deploy no {self.what} yet (the local "
                                "target does); nothing was injected")

    def reads(self, call: FaultCall) -> Reads:
        raise self._refuse(call)

    def inject(self, topology: Topology, call: FaultCall, observed: Observed) -> list[Op]:
        raise self._refuse(call)

    def revert(self, topology: Topology, call: FaultCall) -> list[Op]:
        return []


_OK = readyz_fault("ok")


def _readyz(mode: ReadyzMode, *timed: str) -> Callable[[FaultCall], AdminCall]:
    return lambda call: readyz_fault(mode, **{p: float(call.value(p)) for p in timed})


K8S_ACTIONS: Table[K8sAction] = Table("kube fault action", {
    "gateway_down": Scale(None, "Deployment", "gateway"),
    "gateway_hung": DenyPolicy("gameday-fault-gateway-hung", "gateway", ("Ingress",)),
    "region_blackhole": DenyPolicy("gameday-fault-region-blackhole", None, ("Ingress", "Egress")),
    "control_plane_down": Scale(GLOBAL_CLUSTER, "Deployment", "controlplane"),
    "bus_down": Scale(GLOBAL_CLUSTER, "StatefulSet", "nats"),
    "sync_delay": BroadcastDelay(),
    "probe_flap": Hook("gateway", _readyz("flap", "period", "down"), _OK),
    "gateway_blip": Hook("gateway", _readyz("fail", "seconds"), _OK),
    "gateway_unready": Hook("gateway", _readyz("fail"), _OK),
    "instances_unready": Hook("app", _readyz("fail"), _OK),
    "instances_hung": DenyPolicy("gameday-fault-instances-hung", "app", ("Ingress",)),
    "proxy_cut_off": Hook("proxy", lambda call: drop_broadcasts(True), drop_broadcasts(False)),
    "region_labels": AgentLabels(),
    "store_down": NotDeployed("store (the state layer's nats-server per region)"),
    "store_isolated": NotDeployed("store (the state layer's nats-server per region)"),
    "replication_lag": NotDeployed("store (the state layer's nats-server per region)"),
})
"""Fault name -> how the kind and kube targets plan it (see the module docstring)."""


def fault_call(kind: str, region: str | None, params: dict[str, Any]) -> tuple[K8sAction, FaultCall]:
    """The action and call for *kind*.

    Raises:
        ConfigError: *kind* is not a fault, or has no kube action.
    """
    fault = FAULTS.get(kind)
    action = K8S_ACTIONS.get(kind)
    if fault is None or action is None:
        raise ConfigError(f"kube target: unknown fault {kind!r}" + (
            "" if fault is None else "; register its plan with gameday.targets.k8s.plan.K8S_ACTIONS"))
    return action, FaultCall(fault, region, params)


def plan_inject(
    topology: Topology, kind: str, region: str | None, params: dict[str, Any], observed: Observed
) -> list[Op]:
    """The operations that inject *kind*; records in *params* what the revert needs.

    Raises:
        ConfigError: unknown fault kind, missing region or parameter.
        FaultError: the fault is already in effect (a workload already at 0 replicas).
    """
    action, call = fault_call(kind, region, params)
    return action.inject(topology, call, observed)


def plan_revert(topology: Topology, kind: str, region: str | None, params: Mapping[str, Any], *,
                in_effect: Sequence[tuple[str, str | None]] = ()) -> list[Op]:
    """The operations that exactly undo :func:`plan_inject` (idempotent: safe to repeat).

    *in_effect*: the other faults (kind, region) still in effect on these clusters. A deny
    fault's revert does not re-apply an allow policy another deny fault in effect in the same
    region deleted too: NetworkPolicies add up, so re-admitting there would end that fault.
    """
    action, call = fault_call(kind, region, dict(params))
    ops = action.revert(topology, call)
    if not isinstance(action, DenyPolicy) or region is None:
        return ops
    still = {p["metadata"]["name"]
             for other_kind, other_region in in_effect if other_region == region
             for other in [K8S_ACTIONS.get(other_kind)] if isinstance(other, DenyPolicy) and other != action
             for p in other.allows(topology, region)}
    return [op for op in ops if not (op.verb == "apply" and op.kind == "NetworkPolicy" and op.name in still)]


def reads(kind: str, region: str | None) -> Reads:
    """What :func:`plan_inject` of *kind* needs read from the live clusters."""
    action, call = fault_call(kind, region, {})
    return action.reads(call)


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
        _admin(GLOBAL_CLUSTER, "controlplane", topology, reconcile())
    ]
