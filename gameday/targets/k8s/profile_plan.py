"""A team's own faults on its own clusters, from a federation profile: pure plans with exact inverses.

The ``kubernetes:`` section of a profile (:class:`gameday.targets.profile.KubernetesSpec`) declares
each fault as one of three Kubernetes operations; each is planned here as a list of
:class:`~gameday.targets.k8s.plan.Op` (no I/O), with its inverse computed from what was
read just before the injection:

=====================  ============================================  ===============================
profile                inject                                        revert (exact inverse)
=====================  ============================================  ===============================
``scale_to_zero``      scale the workload to 0 (its count recorded)  scale it back to that count
``isolate_namespace``  apply a NetworkPolicy selecting every pod of  delete that policy (absent is
                       the namespace, with no rule (all in/out       fine: idempotent)
                       traffic dropped)
``patch_selector``     merge-patch the Service's selector to the     merge-patch it back to the
                       profile's (keys not in it set to null, so     selector read before (the
                       the result is exactly the profile's)          added keys set to null)
=====================  ============================================  ===============================

The revert plan is returned with the injection and stored in the fault's ledger entry
(:func:`ops_to_json`), so ``gameday restore`` after a ``kill -9`` runs exactly that inverse,
whatever the profile file says by then.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gameday.errors import ConfigError, FaultError
from gameday.runtime.userinput import shown
from gameday.targets.k8s import objects as o
from gameday.targets.k8s.plan import LABEL_FAULT, Op
from gameday.targets.profile import IsolateNamespace, KubernetesFault, PatchSelector, Profile, ScaleToZero

REVERT_KEY = "k8s_revert"
"""Params key of the recorded revert plan (JSON ops) in the ledger entry."""


@dataclass(frozen=True)
class Located:
    """A profile fault and the cluster (key of ``kubernetes.contexts``) it acts on."""

    name: str
    region: str | None
    cluster: str
    fault: KubernetesFault


@dataclass(frozen=True)
class Observed:
    """What the injection read first. None: not read (a dry run makes no API call)."""

    replicas: int | None = None
    selector: dict[str, str] | None = None


def locate(profile: Profile, kind: str, region: str | None, source: str = "the profile") -> Located:
    """The fault *kind* of *region* in the profile's ``kubernetes`` section.

    Raises:
        ConfigError: no such section, region or fault; names what there is.
    """
    k = profile.kubernetes
    if k is None:
        raise ConfigError(f"{source}: has no `kubernetes:` section; the kube and kind targets drill a profile's "
                          "federation with faults given there as Kubernetes operations")
    if region is None:
        table, where = k.faults, "kubernetes.faults"
    else:
        if region not in {r.name for r in profile.regions}:
            raise ConfigError(f"{source}: no region {shown(region)} (regions: "
                              f"{', '.join(r.name for r in profile.regions)})")
        table, where = k.regions.get(region, {}), f"kubernetes.regions.{region}"
    fault = table.get(kind)
    if fault is None:
        raise ConfigError(f"{source}: {where} has no fault {shown(kind)} (it has: {', '.join(sorted(table)) or 'none'})"
                          "; nothing was injected")
    cluster = fault.cluster or region
    assert cluster is not None  # the profile's validation: a region-less fault names its cluster
    return Located(kind, region, cluster, fault)


def policy_name(fault: str) -> str:
    """The NetworkPolicy of an ``isolate_namespace`` fault (DNS-1123: ``_`` becomes ``-``)."""
    return f"gameday-isolate-{fault.replace('_', '-')}"[:63].rstrip("-")


def network_policy(loc: Located, action: IsolateNamespace) -> dict[str, Any]:
    """Every pod of the namespace selected, no rule: all ingress and egress dropped."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": policy_name(loc.name),
            "namespace": action.namespace,
            "labels": {o.LABEL_MANAGED_BY: o.MANAGED_BY, LABEL_FAULT: loc.name},
        },
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }


def selector_patch(now: Mapping[str, str], want: Mapping[str, str]) -> dict[str, Any]:
    """The JSON merge patch that turns selector *now* into exactly *want* (absent keys -> null)."""
    return {"spec": {"selector": {k: want.get(k) for k in sorted({*now, *want})}}}


def plan_inject(loc: Located, observed: Observed) -> tuple[list[Op], list[Op]]:
    """``(inject, revert)`` for the located fault, the revert computed from *observed*.

    With nothing observed (a dry run) the plans say what would be read instead of a value.

    Raises:
        FaultError: the workload is already at 0 replicas (another fault in effect?).
    """
    a = loc.fault.action
    c = loc.cluster
    if isinstance(a, ScaleToZero):
        if observed.replicas == 0:
            raise FaultError(f"{loc.name}: {a.kind} {a.namespace}/{a.name} in cluster {c!r} already has 0 replicas "
                             "(another fault in effect? run `gameday restore`); nothing was injected")
        back = Op(verb="scale", cluster=c, kind=a.kind, name=a.name, namespace=a.namespace,
                  replicas=observed.replicas, note=None if observed.replicas is not None
                  else "the replica count read at injection")
        return [Op(verb="scale", cluster=c, kind=a.kind, name=a.name, namespace=a.namespace, replicas=0)], [back]
    if isinstance(a, IsolateNamespace):
        name = policy_name(loc.name)
        return ([Op(verb="apply", cluster=c, kind="NetworkPolicy", name=name, namespace=a.namespace,
                    body=network_policy(loc, a))],
                [Op(verb="delete", cluster=c, kind="NetworkPolicy", name=name, namespace=a.namespace)])
    assert isinstance(a, PatchSelector)
    if observed.selector is None:  # dry run: the exact patches need the selector as it is
        return ([Op(verb="patch", cluster=c, kind="Service", name=a.service, namespace=a.namespace,
                    body={"spec": {"selector": dict(a.selector)}}, note="every other selector key set to null")],
                [Op(verb="patch", cluster=c, kind="Service", name=a.service, namespace=a.namespace,
                    body={"spec": {"selector": {}}}, note="back to the selector read at injection")])
    if not observed.selector:
        raise FaultError(f"{loc.name}: Service {a.namespace}/{a.service} in cluster {c!r} has no selector (its "
                         "endpoints are managed by hand); patching one in would have no exact inverse; nothing was "
                         "injected")
    return ([Op(verb="patch", cluster=c, kind="Service", name=a.service, namespace=a.namespace,
                body=selector_patch(observed.selector, a.selector))],
            [Op(verb="patch", cluster=c, kind="Service", name=a.service, namespace=a.namespace,
                body=selector_patch(a.selector, observed.selector))])


def plan_revert_unrecorded(loc: Located) -> list[Op]:
    """The revert when the injection's record was lost (runner killed before the ledger update).

    Raises:
        FaultError: the inverse needs what was read at injection (a replica count, a
            selector) and it was not recorded; names what to put back by hand.
    """
    a = loc.fault.action
    if isinstance(a, IsolateNamespace):
        return plan_inject(loc, Observed())[1]  # deleting the policy needs nothing recorded
    what = (f"scale {a.kind} {a.namespace}/{a.name} back to its replica count" if isinstance(a, ScaleToZero)
            else f"put back the selector of Service {a.namespace}/{a.service}")
    raise FaultError(f"reverting {loc.name} {loc.region or ''}: the state read at injection was not recorded (the "
                     f"runner died before the ledger update), so the exact inverse is unknown: {what} in cluster "
                     f"{loc.cluster!r} by hand")


def ops_to_json(ops: list[Op]) -> list[dict[str, Any]]:
    return [{k: (dict(v) if isinstance(v, Mapping) else v) for k, v in dataclasses.asdict(op).items()}
            for op in ops]


def ops_from_json(data: object) -> list[Op]:
    """Raises FaultError when the recorded plan is unreadable."""
    fields = {f.name for f in dataclasses.fields(Op)}
    if not isinstance(data, list) or not all(isinstance(d, dict) and set(d) <= fields for d in data):
        raise FaultError(f"the recorded revert plan is unreadable: {shown(data)}")
    try:
        return [Op(**d) for d in data]
    except TypeError as exc:
        raise FaultError(f"the recorded revert plan is unreadable: {exc}") from exc
