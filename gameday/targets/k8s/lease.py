"""The cross-machine drill lock, planned as data: a ``coordination.k8s.io/v1`` Lease.

:mod:`gameday.runtime.drill_lock` serialises the drills of one machine (a file lock). Engineers'
runs on *several* machines against the same kube contexts need the lock kept with the
federation itself: one Lease, :data:`LEASE_NAME`, in the federation's namespace of the
``global`` cluster, taken the way Kubernetes leader election takes one:

* **take**: create it with our ``holderIdentity`` (``409 Conflict``: it exists); if it
  exists and :func:`may_take` says it is free (no holder, or its holder stopped renewing
  for ``leaseDurationSeconds``), replace it with :func:`taken` under its
  ``resourceVersion`` (a conflict there means another run was faster: wait again);
* **hold**: replace it with :func:`renewed` every ``leaseDurationSeconds / 3`` while the
  drill runs;
* **release**: delete it (under its ``resourceVersion``) once the fault is restored. A
  holder that dies stops renewing, so its lease frees itself after the duration.

This module is that plan as plain data (the object and the rule), tested offline against
the real schema; the executor (the calls above through the client, and the renewal
thread) is not written yet, so kube runs on different machines are not serialised.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from gameday.targets.k8s.objects import LABEL_MANAGED_BY, MANAGED_BY, NAMESPACE, Obj

LEASE_NAME = "gameday-drill-lock"
LEASE_DURATION_S = 60
"""Seconds a lease stays taken without a renewal. Renewed every 20 s, a live holder misses
two renewals (a slow API server) before losing it; a dead one frees it within a minute."""

MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
"""Kubernetes ``MicroTime`` (RFC 3339 with microseconds, UTC), as ``acquireTime``/``renewTime`` take."""


def micro_time(t: datetime) -> str:
    """*t* (timezone-aware) as a Kubernetes ``MicroTime``."""
    if t.tzinfo is None:
        raise ValueError("a lease time must be timezone-aware")
    return t.astimezone(UTC).strftime(MICRO_TIME)


def parse_micro_time(text: str) -> datetime:
    """A ``MicroTime`` (or a plain RFC 3339 ``...Z`` time, as some servers return) as a UTC datetime."""
    fmt = MICRO_TIME if "." in text else "%Y-%m-%dT%H:%M:%SZ"
    return datetime.strptime(text, fmt).replace(tzinfo=UTC)


@dataclasses.dataclass(frozen=True)
class LeaseState:
    """What :func:`may_take` needs of a Lease read from the cluster."""

    holder: str | None
    renewed: datetime | None
    duration_s: int | None

    @classmethod
    def of(cls, lease: Obj) -> LeaseState:
        spec = lease.get("spec") or {}
        renew = spec.get("renewTime") or spec.get("acquireTime")
        return cls(holder=spec.get("holderIdentity") or None,
                   renewed=parse_micro_time(renew) if isinstance(renew, str) else None,
                   duration_s=spec.get("leaseDurationSeconds"))


def taken(holder: str, now: datetime, *, transitions: int = 0, duration_s: int = LEASE_DURATION_S) -> Obj:
    """The Lease as *holder* writes it when it takes the lock at *now*.

    Args:
        holder: who holds it, as the waiters' messages name it (e.g. ``host/pid 4242 (worker gw1)``).
        transitions: the previous lease's ``leaseTransitions`` + 1 when taking one over, else 0.
    """
    if not holder:
        raise ValueError("a lease needs a holder")
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE_NAME, "namespace": NAMESPACE, "labels": {LABEL_MANAGED_BY: MANAGED_BY}},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration_s,
            "acquireTime": micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": transitions,
        },
    }


def renewed(lease: Obj, now: datetime) -> Obj:
    """*lease* with ``renewTime`` moved to *now* (everything else as it was)."""
    return {**lease, "spec": {**lease["spec"], "renewTime": micro_time(now)}}


def may_take(lease: Obj | None, holder: str, now: datetime) -> bool:
    """Whether *holder* may take the lock at *now*: no lease, no holder in it, its own, or
    its holder last renewed it more than ``leaseDurationSeconds`` ago (a lease without a
    duration or a renewal time never expires: someone wrote it by hand; wait for it)."""
    if lease is None:
        return True
    s = LeaseState.of(lease)
    if s.holder is None or s.holder == holder:
        return True
    if s.renewed is None or s.duration_s is None:
        return False
    return now > s.renewed + timedelta(seconds=s.duration_s)
