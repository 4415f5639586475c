"""The ``kube`` target: the reference federation on existing kubeconfig contexts (staging).

One context per cluster, from the topology's ``contexts`` mapping (every region and
``global``). Nothing happens unless every context matches a ``--gameday-allow-context``
glob; with ``--gameday-dry-run`` every API call is printed and recorded, none is made
(not even reads: fault plans then use the state the manifests declare).

What is planned lives in :mod:`gameday.targets.k8s.plan` (pure, tested); this module
only executes plans with the official client (``kubernetes``), and is the one place
(with :mod:`gameday.targets.k8s.kind`) that imports it.

Assumptions (see :mod:`gameday.targets.k8s.manifests`): components are reached on their
cluster's node address at their NodePort, from the harness and across clusters. The
node address of a cluster is the InternalIP of its first Ready node that is not a
control-plane node, read at :meth:`KubeTarget.up`. Staging clusters whose nodes are
not routable from the harness need LoadBalancers, or a profile naming reachable addresses
(:mod:`gameday.targets.k8s.profiled`); observing through port-forwards is not automated.

Admin calls (fault hooks, the reconciliation pass) carry the deploy's admin token
(``Authorization: Bearer``, from the ``gameday-admin`` Secret) down a port-forward of each pod,
opened and closed per call by :meth:`~gameday.targets.k8s.client.Clusters.pod_admin`.
"""

from __future__ import annotations

import json
import logging
import secrets
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self, TextIO

from gameday.errors import FaultError, GamedayError, TargetError, TargetUnreachable, TransientError
from gameday.fedapp.wire import broadcast_subject
from gameday.interfaces import Endpoints, RegionInfo
from gameday.model.topology import GLOBAL_CLUSTER, Topology
from gameday.observers.reference import (
    DETAIL_FIELD,
    EVENT_FIELD,
    TIME_FIELD,
    ReferenceEndpoints,
    reference_sources,
)
from gameday.observers.sources import LineFeedAlarms, Sources
from gameday.runtime.settings import Settings
from gameday.targets.admin_token import new_admin_token
from gameday.targets.fedapp_spec import ReferenceTiming
from gameday.targets.k8s import files as f
from gameday.targets.k8s import manifests as m
from gameday.targets.k8s import objects as o
from gameday.targets.k8s import plan, rbac
from gameday.targets.k8s.client import (
    API_ERRORS,
    ClientFactory,
    Clusters,
    brief,
    default_client_factory,
    probe_api_server,
)
from gameday.targets.k8s.plan import Op
from gameday.targets.k8s.profiled import ProfileKubeTarget

log = logging.getLogger(__name__)

LOG_POLL_INTERVAL = 2.0
"""Seconds between pod-log reads in :meth:`KubeTarget.alarm_lines` (the observer calls it at
10 Hz; reading every pod's log that often would load the API servers for nothing)."""


class KubeTarget(ReferenceTiming):
    """A :class:`~gameday.interfaces.Target` on existing kubeconfig contexts.

    Args:
        topology: must have ``contexts`` (every region and ``global``).
        workdir: where the dry-run record is written.
        allow: kubeconfig context globs that may be broken; every context must match one.
        dry_run: print and record every API call, make none.
        client_factory: context -> ApiClient (default: the kubeconfig).
        addresses: cluster -> node address, instead of reading the nodes at :meth:`up`.
        out: where dry-run lines are printed (default stderr).

    Raises:
        TargetError: no contexts in the topology, or a context is not allow-listed.
    """

    name = "kube"

    def __init__(
        self,
        topology: Topology,
        workdir: Path,
        *,
        allow: Sequence[str],
        dry_run: bool = False,
        client_factory: ClientFactory | None = None,
        addresses: dict[str, str] | None = None,
        out: TextIO | None = None,
    ) -> None:
        contexts = self._contexts(topology)
        plan.check_allowed(contexts, allow)
        self.topology = topology
        self.contexts: dict[str, str] = contexts
        self.workdir = workdir
        self.allow = tuple(allow)
        self.dry_run = dry_run
        self.recorded: list[Op] = []
        """Every operation executed (or, in dry-run, only recorded), in order."""
        self._in_effect: list[tuple[str, str | None]] = []
        self._allowed: set[rbac.Permission] = set()
        """Permissions an access review allowed this run (:meth:`missing_permissions`)."""
        """Faults this target injected and has not reverted, oldest first (nesting, see
        :func:`~gameday.targets.k8s.plan.plan_revert`)."""
        self._factory = client_factory or default_client_factory
        self._clusters: Clusters | None = None
        self._addressing = m.Addressing(dict(addresses)) if addresses else None
        self._out = out
        self._log_since: dict[str, str] = {}
        self._log_next = 0.0

    @classmethod
    def from_settings(cls, topology: Topology, settings: Settings, workdir: Path) -> KubeTarget | ProfileKubeTarget:
        """The registry's factory: the allow-list and dry run from the settings. With
        ``--gameday-profile``: the team's own federation on its clusters
        (:class:`~gameday.targets.k8s.profiled.ProfileKubeTarget`)."""
        if settings.profile is not None:
            return ProfileKubeTarget.from_settings(settings, workdir, name="kube")
        return cls(topology, workdir, allow=settings.allow_context, dry_run=settings.dry_run)

    @classmethod
    def check(cls, topology: Topology, settings: Settings, *,
              client_factory: ClientFactory = default_client_factory) -> None:
        """The session-start check (:mod:`gameday.targets.registry`): contexts given and
        allow-listed, and, unless ``--gameday-dry-run``, every API server answering. Creates
        nothing, changes nothing.

        Raises:
            TargetError: one line naming the context and what to allow or fix.
        """
        if settings.profile is not None:
            ProfileKubeTarget.check(settings, name="kube", client_factory=client_factory)
            return
        contexts = cls._contexts(topology)
        plan.check_allowed(contexts, settings.allow_context)
        if settings.dry_run:  # a dry run makes no API call, not even this one
            return
        for cluster, ctx in contexts.items():
            probe_api_server(cluster, ctx, client_factory)

    @staticmethod
    def _contexts(topology: Topology) -> dict[str, str]:
        if topology.contexts is None:
            raise TargetError(
                "the kube target needs `contexts:` in the topology file: the kubeconfig context of every "
                "region and of `global` (see clusters/kind/topology.yaml); pass it with --gameday-topology"
            )
        m.clusters(topology)  # a region called "global" is refused here (the topology checks the rest)
        return dict(topology.contexts)

    @classmethod
    def attach(cls, ref: dict[str, Any]) -> Self:
        """Re-attach from a ledger reference (for ``gameday restore``). The allow-list
        recorded when the fault was injected is checked again. (A profile's target records
        its own attach in the ledger: :meth:`ProfileKubeTarget.attach`.)"""
        return cls(
            Topology.model_validate(ref["topology"]),
            Path(ref["workdir"]),
            allow=ref["allow"],
            dry_run=bool(ref.get("dry_run", False)),
            addresses=ref.get("addresses"),
        )

    def ref(self) -> dict[str, Any]:
        return {
            "topology": self.topology.model_dump(mode="json"),
            "workdir": str(self.workdir),
            "allow": list(self.allow),
            "dry_run": self.dry_run,
            "addresses": self._addressing.hosts if self._addressing else None,
        }

    def drill_lock_key(self) -> str:
        """The federation's identity (:class:`~gameday.interfaces.SharedFederation`):
        ``k8s:<context>/<namespace>,...`` over every cluster's kubeconfig context, sorted, so the
        kind and the kube target on the same contexts take turns.

        The drill lock is a file lock: it serialises the runs of one machine only, and
        contexts are kubeconfig names (one cluster named differently in two kubeconfigs is two
        keys). Engineers drilling one staging federation from several machines are not
        serialised by it; that needs a lock kept in the clusters, a ``coordination.k8s.io``
        Lease in the namespace (planned as data in :mod:`gameday.targets.k8s.lease`, not
        executed yet)."""
        return "k8s:" + ",".join(sorted({f"{ctx}/{o.NAMESPACE}" for ctx in self.contexts.values()}))

    # -- lifecycle -------------------------------------------------------------------------------------
    def up(self) -> None:
        """Open a client per context and read each cluster's node address."""
        self.run(plan.plan_connect(self.contexts), TargetError)
        if self._addressing is None:
            if self.dry_run:
                self._addressing = m.Addressing.placeholder(self.topology)
            else:
                self._addressing = m.Addressing({c: self._node_address(c) for c in self.contexts})

    def deploy(self) -> None:
        """Apply the manifests cluster by cluster (R12 order), each verified before the next.

        A fresh admin token per deploy goes into each cluster's admin Secret (added by the
        executor, so the plan, the dry-run record and the ledger never hold it); the pods roll
        to read it (a new random *generation* id in their template, not the token).
        """
        generation = "dry-run" if self.dry_run else secrets.token_hex(8)
        if not self.dry_run:
            self.clusters.set_admin_token(new_admin_token())
        self.run(plan.plan_deploy(self.topology, self.addressing, generation), TargetError)

    def down(self) -> None:
        self.delete_namespaces(None)

    def delete_namespaces(self, only: Sequence[str] | None) -> None:
        """Delete the federation's namespace in every cluster (or in *only*). Idempotent."""
        self.run(plan.plan_down(self.topology, only), TargetError)

    @property
    def addressing(self) -> m.Addressing:
        if self._addressing is None:
            raise TargetError("kube target: up() has not run (no node addresses yet)")
        return self._addressing

    # -- description ---------------------------------------------------------------------------------------
    def manifests_dir(self) -> Path:
        """The reviewed copies of the manifests this target deploys (``clusters/manifests``; R11)."""
        return f.MANIFESTS_DIR

    def regions(self) -> list[RegionInfo]:
        return [
            RegionInfo(r.name, r.weight, r.capacity, self.addressing.host(r.name))
            for r in self.topology.regions
        ]

    def endpoints(self) -> Endpoints:
        g = self.addressing.host(GLOBAL_CLUSTER)
        return Endpoints(dns_server=(g, o.GSLB_DNS_PORT), fqdn=self.topology.fqdn, gateway_port=o.GATEWAY_PORT)

    def reference_endpoints(self) -> ReferenceEndpoints:
        """The reference app's URLs at its NodePort Services
        (:class:`~gameday.observers.reference.RunsReferenceApp`)."""
        a = self.addressing
        g = a.host(GLOBAL_CLUSTER)
        entry: dict[str, str] = {}
        for r in self.topology.regions:
            h = a.host(r.name)
            entry[f"gateway-{r.name}"] = f"http://{h}:{o.GATEWAY_PORT}/status"
            entry[f"proxy-{r.name}"] = f"http://{h}:{o.PROXY_PORT}/status"
        return ReferenceEndpoints(
            entry_nodes=entry,
            control_plane=f"http://{g}:{o.CONTROL_PLANE_PORT}/status",
            utilisation={
                r.name: [
                    f"http://{a.host(r.name)}:{o.APP_PORT_BASE + k}/status" for k in range(1, r.instances + 1)
                ]
                for r in self.topology.regions
            },
            nats_url=f"nats://{g}:{o.NATS_PORT}",
            broadcast_subject=broadcast_subject(m.run_id(self.topology)),
            extra={"gslb_status": f"http://{g}:{o.GSLB_HTTP_PORT}/status", "contexts": dict(self.contexts)},
            # what the conformance suite reads beyond the drill's sources: the GSLB's health
            # and ramps (R2, R8, R10), the agents' probe counters (R2), the control plane's
            # snapshot (R3); each at its component's NodePort Service, like the rest
            gslb=f"http://{g}:{o.GSLB_HTTP_PORT}/status",
            agents={r.name: f"http://{a.host(r.name)}:{o.AGENT_PORT}/status" for r in self.topology.regions},
            snapshot=f"http://{g}:{o.CONTROL_PLANE_PORT}/snapshot",
        )

    def sources(self) -> Sources:
        """The reference app's sources at :meth:`endpoints`; alarms from the proxy pods' logs
        (:meth:`alarm_lines`, through the Kubernetes API; the stale-snapshot alarm is the proxies')."""
        def proxy_lines() -> list[tuple[str, str]]:
            return [(node, line) for node, line in self.alarm_lines() if node.startswith("proxy-")]

        alarms = LineFeedAlarms(feed=proxy_lines, name="proxy pod logs", json_event_field=EVENT_FIELD,
                                time_field=TIME_FIELD, detail_field=DETAIL_FIELD)
        return reference_sources(self.endpoints(), self.reference_endpoints(), (alarms,))

    def _node_address(self, cluster: str) -> str:
        return self.clusters.node_address(cluster)

    # -- the prediction's inputs (StatesTiming) ---------------------------------------------
    def check_health(self, timeout: float) -> None:
        """Every Deployment and StatefulSet of the federation fully available, in every cluster.

        Raises:
            TargetUnreachable: names what is not ready after *timeout* seconds.
        """
        if self.dry_run:
            return
        deadline = time.monotonic() + timeout
        while True:
            try:
                missing = [f"{c}: {w}" for c in self.contexts for w in self.clusters.not_ready(c)]
            except TargetError as exc:
                raise TargetUnreachable(
                    f"kube federation is not healthy, nothing was injected: {exc}"
                ) from exc
            if not missing:
                return
            if time.monotonic() > deadline:
                raise TargetUnreachable(
                    f"kube federation not healthy after {timeout} s, nothing was injected: "
                    + "; ".join(missing)
                )
            time.sleep(1.0)

    # -- faults ----------------------------------------------------------------------------------------------
    def missing_permissions(self, kind: str, region: str | None, params: dict[str, Any]) -> list[str]:
        """What the credentials lack for the fault and its exact inverse (a SelfSubjectAccessReview
        per permission, :mod:`gameday.targets.k8s.rbac`); a permission once allowed is not asked again."""
        recorded = dict(params)
        inject = plan.plan_inject(self.topology, kind, region, recorded, plan.Observed.desired(self.topology))
        revert = plan.plan_revert(self.topology, kind, region, recorded)
        return rbac.missing_once(rbac.needed(inject, revert), self.clusters.access_review, self._allowed,
                                 self.contexts)

    def inject(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        observed = plan.Observed.desired(self.topology) if self.dry_run else self._observe(kind, region)
        ops = plan.plan_inject(self.topology, kind, region, params, observed)
        # In effect from its first operation on: a half-done injection counts as nested too.
        self._in_effect.append((kind, region))
        self.run(ops, FaultError)

    def revert(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        others = list(self._in_effect)
        if (kind, region) in others:
            others.remove((kind, region))
        self.run(plan.plan_revert(self.topology, kind, region, params, in_effect=others), FaultError)
        self._in_effect = others

    def _observe(self, kind: str, region: str | None) -> plan.Observed:
        """Read what the fault's plan needs: a replica count, the broadcast delay, agent labels."""
        reps: dict[tuple[str, str, str], int] = {}
        delay = self.topology.control_plane.broadcast_delay
        labels: dict[str, dict[str, str]] = {}
        try:
            need = plan.reads(kind, region)
            if need.workload is not None:
                reps[need.workload] = self.clusters.read_replicas(*need.workload)
            if need.broadcast_delay:
                delay = float(self._status(GLOBAL_CLUSTER, "controlplane").get("broadcast_delay", delay))
            if need.labels_of is not None:
                labels[need.labels_of] = dict(self._status(need.labels_of, "agent")["slow"]["labels"])
        except (*API_ERRORS, TargetError, KeyError, TypeError, ValueError) as exc:
            raise FaultError(
                f"{kind} {region or ''}: reading the current state failed, nothing was injected: {exc!r}"
            ) from exc
        return plan.Observed(reps, delay, labels)

    def _status(self, cluster: str, component: str) -> dict[str, Any]:
        """``/status`` of the first running pod of a singleton *component*."""
        sel = ",".join(f"{k}={v}" for k, v in o.selector(self.topology, component).items())
        port = {"controlplane": o.CONTROL_PLANE_PORT, "agent": o.AGENT_PORT}[component]
        return self.clusters.pod_proxy(cluster, sel, port, "GET", "/status", body=None)[0]

    # -- R3 and R12 --------------------------------------------------------------------------------------
    def reconcile(self) -> dict[str, Any]:
        """Run the control plane's full reconciliation pass now; its report (dry-run: ``{"dry_run": True}``).

        Raises:
            TargetError: the control plane did not answer.
        """
        (op,) = plan.plan_reconcile(self.topology)
        if self.dry_run:
            self.run([op], TargetError)
            return {"dry_run": True}
        self.recorded.append(op)
        assert op.port is not None
        assert op.path is not None
        try:
            assert op.selector is not None
            answers = self.clusters.pod_admin(op.cluster, op.selector, op.port, op.path, body={})
        except API_ERRORS as exc:
            raise TargetError(f"full reconciliation pass failed: {brief(exc)}") from exc
        return answers[0]

    def release_plan(self) -> list[str]:
        """The regions in the order :meth:`deploy` and a release touch them (R12)."""
        return [c for c in m.release_order(self.topology) if c != GLOBAL_CLUSTER]

    def rollout_region(self, region: str) -> None:
        """Rollout-restart each app instance Deployment of *region*, one at a time, each
        rollout complete (new pod available, old one gone) before the next."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.run(plan.plan_rollout(self.topology, region, stamp), TargetError)

    # -- logs ----------------------------------------------------------------------------------------
    def alarm_lines(self) -> Iterator[tuple[str, str]]:
        """New log lines of the gateways and proxies (read at most every LOG_POLL_INTERVAL s)."""
        if self.dry_run or time.monotonic() < self._log_next:
            return
        self._log_next = time.monotonic() + LOG_POLL_INTERVAL
        for r in self.topology.regions:
            try:
                lines = [
                    line for pod in self.clusters.entry_pods(r.name) for line in self._pod_lines(r.name, pod)
                ]
            except API_ERRORS as exc:
                raise TransientError(f"reading entry-node logs in region {r.name!r}: {brief(exc)}") from exc
            yield from lines

    def _pod_lines(self, region: str, pod: Any) -> list[tuple[str, str]]:
        name = str(pod.metadata.name)
        component = (pod.metadata.labels or {}).get(o.LABEL_COMPONENT, "?")
        key = f"{region}/{name}"
        since = self._log_since.get(key)
        # the first read takes the whole log; later ones the last minute, filtered by stamp
        text = self.clusters.pod_log(region, name, since_seconds=60 if since else None)
        out = []
        for line in text.splitlines():
            stamp, _, rest = line.partition(" ")
            if since is not None and stamp <= since:  # RFC 3339 nanosecond stamps sort as text
                continue
            self._log_since[key] = stamp
            out.append((f"{component}-{region}", rest))
        return out

    # -- the executor ---------------------------------------------------------------------------------------
    def run(self, ops: Sequence[Op], error: type[GamedayError]) -> None:
        """Execute *ops* in order (dry-run: print and record them only).

        Raises:
            *error* (TargetError or FaultError): an API call failed; names the operation.
        """
        for op in ops:
            self.recorded.append(op)
            if self.dry_run:
                line = f"gameday dry-run: {op.describe()}"
                log.info("%s", line)
                (self._out or sys.stderr).write(line + "\n")
                self._record_file(op)
                continue
            try:
                self.clusters.execute(op)
            except GamedayError:
                raise
            except API_ERRORS as exc:
                raise error(
                    f"{op.describe()} (context {self.contexts.get(op.cluster)!r}) failed: {brief(exc)}"
                ) from exc

    def _record_file(self, op: Op) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with (self.workdir / "dry-run.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(
                json.dumps(
                    {
                        "verb": op.verb,
                        "cluster": op.cluster,
                        "kind": op.kind,
                        "name": op.name,
                        "namespace": op.namespace,
                        "replicas": op.replicas,
                        "body": op.body,
                        "selector": op.selector,
                        "port": op.port,
                        "path": op.path,
                    },
                    default=str,
                )
                + "\n"
            )

    @property
    def clusters(self) -> Clusters:
        """The API clients (never opened in dry-run: that would be a bug, not a user error)."""
        if self.dry_run:
            raise TargetError("kube target: dry-run never opens an API client")
        if self._clusters is None:
            self._clusters = Clusters(self.topology, self.contexts, self._factory)
        return self._clusters
