"""A model of a federation's Kubernetes state, for checking that fault plans have exact inverses.

Test infrastructure, deliberately small: a dict of objects keyed by (cluster, kind,
namespace, name), plus the admin-hook state of the fedapp components the plans talk to.
It applies the few operation verbs the plans use the way the API server (and the fedapp's
admin handlers) would: ``apply`` stores the applied object, ``scale`` sets
``spec.replicas`` of an existing workload (404 if there is none), ``delete`` removes
(absent is fine, as the executor treats a 404), ``admin`` feeds the body to the fedapp's
own parser (:class:`gameday.fedapp.common.ReadyzFault`, the control plane's delay bounds).
It does not pretend to be a cluster: no controllers, pods, scheduling or networking.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from gameday.fedapp.common import ReadyzFault
from gameday.model.topology import GLOBAL_CLUSTER, Topology
from gameday.targets.k8s.plan import Observed, Op

Key = tuple[str, str, str | None, str]


@dataclass
class ClusterState:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    admin: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(cluster, component) -> the component's fault-hook state."""

    @classmethod
    def deployed(cls, topology: Topology, rendered: dict[str, list[dict[str, Any]]]) -> ClusterState:
        """The state right after a deploy of *rendered*: every object, every hook healthy."""
        st = cls()
        for cluster, objs in rendered.items():
            for o in objs:
                st.objects[(cluster, o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])] = copy.deepcopy(
                    o
                )
        for r in topology.regions:
            st.admin[(r.name, "gateway")] = {"readyz": "ok"}
            st.admin[(r.name, "proxy")] = {"readyz": "ok", "drop_broadcasts": False}
            st.admin[(r.name, "agent")] = {"readyz": "ok", "labels": dict(r.labels)}
            for k in range(1, r.instances + 1):
                st.admin[(r.name, f"app-{k}")] = {"readyz": "ok"}
        st.admin[(GLOBAL_CLUSTER, "controlplane")] = {
            "readyz": "ok",
            "broadcast_delay": topology.control_plane.broadcast_delay,
        }
        return st

    def snapshot(self) -> tuple[dict[Key, dict[str, Any]], dict[tuple[str, str], dict[str, Any]]]:
        return copy.deepcopy(self.objects), copy.deepcopy(self.admin)

    def observe(self, topology: Topology) -> Observed:
        """What the kube target's reads would return from this state."""
        reps = {
            (c, k, n): int(o["spec"]["replicas"])
            for (c, k, _, n), o in self.objects.items()
            if k in ("Deployment", "StatefulSet")
        }
        labels = {r.name: dict(self.admin[(r.name, "agent")]["labels"]) for r in topology.regions}
        return Observed(reps, float(self.admin[(GLOBAL_CLUSTER, "controlplane")]["broadcast_delay"]), labels)

    def apply(self, op: Op) -> None:
        key: Key = (op.cluster, op.kind, op.namespace, op.name)
        if op.verb == "apply":
            assert op.body is not None
            self.objects[key] = copy.deepcopy(dict(op.body))
        elif op.verb == "scale":
            if key not in self.objects:
                raise LookupError(f"404: {key} does not exist, cannot scale it")
            assert op.replicas is not None
            assert op.replicas >= 0
            self.objects[key]["spec"]["replicas"] = op.replicas
        elif op.verb == "delete":
            self.objects.pop(key, None)
        elif op.verb == "admin":
            self._admin(op)
        else:
            raise AssertionError(f"a fault plan used verb {op.verb!r}, which the model does not know")

    def _admin(self, op: Op) -> None:
        state = self.admin[(op.cluster, op.name)]
        body = dict(op.body or {})
        if op.path == "/admin/reconcile":  # folds agents' slow state into the snapshot (not modelled)
            assert (op.name, body) == ("controlplane", {})
            return
        if op.path == "/admin/slow":  # the agent's handler: replace labels/quota
            assert op.name == "agent"
            assert set(body) <= {"labels", "quota"}
            state.update({k: dict(v) for k, v in body.items()})
            return
        assert op.path == "/admin/fault", op.path
        if "drop_broadcasts" in body:  # the proxy's handler
            assert op.name == "proxy"
            state["drop_broadcasts"] = bool(body["drop_broadcasts"])
        if "broadcast_delay" in body:  # the control plane's own bounds
            delay = float(body["broadcast_delay"])
            assert 0 <= delay <= 3600
            state["broadcast_delay"] = delay
        hook = ReadyzFault()
        hook.configure(
            {k: v for k, v in body.items() if k != "drop_broadcasts"}
        )  # raises ValueError on a body the component would reject
        if "readyz" in body:
            state["readyz"] = hook.mode
            for k in ("period", "down", "until"):
                state.pop(k, None)
            if hook.mode == "flap":
                state.update(period=hook.period, down=hook.down)
            if hook.mode == "fail" and "seconds" in body:
                state["until"] = float(body["seconds"])
