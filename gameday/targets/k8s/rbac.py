"""Never inject what cannot be reverted: the permissions a fault and its inverse need, asked
of the API server before the injection, and the least-privilege Role that grants them.

A fault on a Kubernetes target is a plan of :class:`~gameday.targets.k8s.plan.Op` (its
injection) and another (its exact inverse). :func:`needed` turns both, and the reads the
injection makes first, into RBAC permissions (cluster, namespace, API group, resource, verb);
:func:`missing` asks each cluster's API server whether the current credentials hold them
(``SelfSubjectAccessReview``, through the official client) and names every one they lack, so
the drill is refused before anything is touched (a token that may scale a workload down
but not read it back, or create a NetworkPolicy but not delete it, would otherwise leave
the fault in place). :func:`role_manifests` writes the Role and RoleBinding per cluster and
namespace that grant exactly them (``gameday rbac``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gameday.targets.k8s.plan import Op

_RESOURCES: dict[str, tuple[str, str]] = {
    "Namespace": ("", "namespaces"),
    "ConfigMap": ("", "configmaps"),
    "Secret": ("", "secrets"),
    "Service": ("", "services"),
    "Pod": ("", "pods"),
    "Deployment": ("apps", "deployments"),
    "StatefulSet": ("apps", "statefulsets"),
    "PodDisruptionBudget": ("policy", "poddisruptionbudgets"),
    "NetworkPolicy": ("networking.k8s.io", "networkpolicies"),
}
"""Kind -> (API group, resource)."""


@dataclass(frozen=True, order=True)
class Permission:
    """One RBAC permission on one cluster: *verb* on *resource* (``deployments/scale``: a
    subresource) of *group* in *namespace* (None: cluster-scoped)."""

    cluster: str
    namespace: str | None
    group: str
    resource: str
    verb: str

    def describe(self) -> str:
        group = self.group or "core"
        where = f"namespace {self.namespace}" if self.namespace else "the cluster"
        return f"{self.verb} {self.resource} ({group}) in {where}"


def _perm(op: Op, verb: str, kind: str | None = None, sub: str = "") -> Permission:
    group, resource = _RESOURCES[kind or op.kind]
    return Permission(op.cluster, op.namespace, group, f"{resource}/{sub}" if sub else resource, verb)


def for_op(op: Op) -> list[Permission]:
    """The permissions the kube client needs to carry out *op* (see ``Clusters.execute``)."""
    if op.verb == "connect":
        return []
    if op.verb == "scale":  # the scale subresource: read first (the count the revert restores), then patch
        return [_perm(op, "get", sub="scale"), _perm(op, "patch", sub="scale")]
    if op.verb == "apply":  # server-side apply creates what is absent
        return [_perm(op, "patch"), _perm(op, "create")]
    if op.verb == "patch":
        return [_perm(op, "get"), _perm(op, "patch")] if op.kind == "Service" else [_perm(op, "patch")]
    if op.verb == "delete":
        return [_perm(op, "delete")] + ([_perm(op, "get")] if op.kind == "Namespace" else [])
    if op.verb == "rollout":
        return [_perm(op, "get")]
    if op.verb == "wait":
        ns = Op(verb="wait", cluster=op.cluster, kind="Deployment", name="", namespace=op.namespace or "")
        return [_perm(ns, "list", "Deployment"), _perm(ns, "list", "StatefulSet")]
    if op.verb == "admin":  # a port-forward to every pod the selector picks, with the run's admin token
        return [_perm(op, "list", "Pod"), _perm(op, "create", "Pod", "portforward"),
                _perm(op, "get", "Pod", "portforward"), _perm(op, "get", "Secret")]
    return []


def needed(*plans: Iterable[Op]) -> list[Permission]:
    """Every permission the operations of *plans* need, sorted, each once."""
    return sorted({p for ops in plans for op in ops for p in for_op(op)})


Review = Callable[[str, Mapping[str, str | None]], tuple[bool, str]]
"""``(cluster, {namespace, verb, group, resource, subresource}) -> (allowed, why)``: one
``SelfSubjectAccessReview`` (:meth:`gameday.targets.k8s.client.Clusters.access_review`)."""


def missing(perms: Iterable[Permission], review: Review) -> list[str]:
    """The permissions of *perms* that the credentials of their clusters lack, as ``cluster:
    verb resource (group) in namespace`` lines, each asked of the cluster's API server
    (*review*). A review the server cannot answer counts as missing, with why: the drill
    cannot show it may revert."""
    out = []
    for p in perms:
        resource, _, sub = p.resource.partition("/")
        allowed, why = review(p.cluster, {"namespace": p.namespace, "verb": p.verb, "group": p.group,
                                          "resource": resource, "subresource": sub or None})
        if not allowed:
            out.append(f"{p.cluster}: {p.describe()}" + (f": {why}" if why else ""))
    return out


def missing_once(perms: Iterable[Permission], review: Review, allowed: set[Permission],
                 contexts: Mapping[str, str | None]) -> list[str]:
    """:func:`missing` of the permissions not in *allowed* (those a review allowed earlier in
    the run, which are not asked again); the ones allowed now join *allowed*. Each line names
    the cluster's kubeconfig context (``cluster (context ctx): verb resource ...``)."""
    perms = [p for p in perms if p not in allowed]
    lacking = missing(perms, review)
    allowed |= {p for p in perms if not any(line.startswith(f"{p.cluster}: {p.describe()}") for line in lacking)}
    return [line.replace(f"{c}: ", f"{c} (context {contexts.get(c)}): ", 1) for line in lacking
            for c in [line.split(":", 1)[0]]]


ROLE_NAME = "gameday-drill"
"""The Role and RoleBinding :func:`role_manifests` writes."""


def role_manifests(perms: Iterable[Permission], *, subject_kind: str = "User",
                   subject_name: str = "gameday") -> dict[str, list[dict[str, Any]]]:
    """Per cluster: a Role and a RoleBinding per namespace granting exactly *perms* (verbs
    merged per group and resource) to one subject (a User by default; ``ServiceAccount`` with
    *subject_name* ``namespace/name``). Cluster-scoped permissions (a Namespace) get a
    ClusterRole and ClusterRoleBinding."""
    rules: dict[tuple[str, str | None], dict[tuple[str, str], set[str]]] = defaultdict(lambda: defaultdict(set))
    for p in perms:
        rules[(p.cluster, p.namespace)][(p.group, p.resource)].add(p.verb)
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (cluster, namespace), by_resource in sorted(rules.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        role_rules = [{"apiGroups": [group], "resources": [resource], "verbs": sorted(verbs)}
                      for (group, resource), verbs in sorted(by_resource.items())]
        if subject_kind == "ServiceAccount":
            sa_ns, _, sa_name = subject_name.partition("/")
            subject = {"kind": "ServiceAccount", "name": sa_name or sa_ns, "namespace": sa_ns if sa_name else
                       (namespace or "default")}
        else:
            subject = {"kind": subject_kind, "name": subject_name, "apiGroup": "rbac.authorization.k8s.io"}
        labels = {"app.kubernetes.io/managed-by": "gameday"}
        if namespace is None:
            out[cluster] += [
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": ROLE_NAME, "labels": labels}, "rules": role_rules},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": ROLE_NAME, "labels": labels},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE_NAME},
                 "subjects": [subject]}]
            continue
        out[cluster] += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": ROLE_NAME, "namespace": namespace, "labels": labels}, "rules": role_rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": ROLE_NAME, "namespace": namespace, "labels": labels},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME},
             "subjects": [subject]}]
    return dict(out)
