"""The reference app as the harness sees it from outside: its own URLs, and its observation
sources built the way any federation's are.

Only the targets that run the reference app (``local``, ``kind``, ``kube``) know these URLs:
each gives a :class:`ReferenceEndpoints` (:class:`RunsReferenceApp`), which the conformance
suite reads (health and ramps at the GSLB, probe counters at the agents, the snapshot at the
control plane) and from which :func:`reference_sources` builds the drill's
:class:`~gameday.observers.sources.Sources`. A federation described by a profile has none:
what a load client needs is :class:`~gameday.model.parts.Endpoints`, what the observer reads is its
profile's sources, and a conformance check that needs one of these URLs skips saying so.

Its wire contract (``gameday.fedapp.wire``), named once here: every gateway and proxy serves
``/status`` with ``version``, ``routable_regions`` and ``stale``; the control plane serves
``/status`` with ``version`` and broadcasts ``{"version": ...}`` on the bus; every app
instance serves ``/status`` with ``capacity_rps``, ``utilisation`` and ``rejected_total``; the
GSLB answers A queries for the service name; the proxies log JSON lines whose ``event`` is
``stale_snapshot`` or ``stale_snapshot_cleared``, stamped ``mono`` on the harness's clock,
with the ``reason``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from gameday.model.parts import Endpoints
from gameday.observers.sources import (
    AlarmSource,
    HttpJsonCheckTimeouts,
    HttpJsonNode,
    HttpJsonUtilisation,
    HttpJsonVersion,
    LogFileAlarms,
    NatsVersionFeed,
    Sources,
    UdpDns,
)

DNS_SAMPLES = 16
"""GSLB queries per read: its answers are weighted single addresses, so a 20 % region needs
several samples to be seen."""

EVENT_FIELD, TIME_FIELD, DETAIL_FIELD = "event", "mono", "reason"
"""How the reference app's log lines carry an alarm."""

NODE_VERSION, NODE_ROUTABLE, NODE_STALE = "version", "routable_regions", "stale"
"""The fields of an entry node's ``/status``: the route version, the regions it routes to,
its stale flag."""

CP_VERSION = "version"
"""The field of the control plane's ``/status`` and of its broadcast that holds the version."""

INSTANCE_CAPACITY, INSTANCE_UTILISATION, INSTANCE_REJECTED = "capacity_rps", "utilisation", "rejected_total"
"""The fields of an app instance's ``/status``: declared capacity (req/s), the share of it in
use, and the count of requests it rejected for overload."""


@dataclass(frozen=True)
class ReferenceEndpoints:
    """The reference app's own URLs, beyond what a client needs (:class:`Endpoints`).

    Every field defaults to "not exposed": ``ReferenceEndpoints()`` is a federation that shows
    none of them (the conformance view of a target that does not run the reference app).
    """

    entry_nodes: dict[str, str] = field(default_factory=dict)
    """Entry-node name (``gateway-a``, ``proxy-a``) -> its ``/status`` URL."""
    control_plane: str | None = None
    """Control plane ``/status`` URL; None: not exposed."""
    utilisation: dict[str, list[str]] = field(default_factory=dict)
    """Region -> the app instances' ``/status`` URLs (utilisation)."""
    nats_url: str | None = None
    """Set where the harness may subscribe to the version broadcast directly."""
    broadcast_subject: str | None = None
    """The subject the control plane broadcasts its version on (with :attr:`nats_url`)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What only some reference targets have: ``regional_control_planes`` (region -> its own
    control plane's ``/status``, the regional layout, R14), ``logs``, ``contexts``, ..."""
    gslb: str | None = None
    """GSLB ``/status`` URL: per-region ``healthy``, ``weight``, ``effective_weight``,
    ``ramp_progress``, ``since_change_s`` (the conformance suite reads health and ramps here)."""
    agents: dict[str, str] = field(default_factory=dict)
    """Region -> its region agent's ``/status`` URL (probe counters for R2)."""
    snapshot: str | None = None
    """Control plane ``GET /snapshot`` URL: ``{"version", "entries", ...}``, the global
    snapshot as the control plane holds it (slow state and merged labels for R3)."""
    node_regions: dict[str, str] = field(default_factory=dict)
    """Entry-node name -> its region, where names do not follow ``<role>-<region>``."""

    def node_region(self, node: str) -> str:
        """``gateway-b`` -> ``b`` (or what :attr:`node_regions` says)."""
        return self.node_regions.get(node) or node.split("-", 1)[1]

    @staticmethod
    def sibling(status_url: str, path: str) -> str:
        """Another endpoint of the component whose ``/status`` URL is *status_url*.

        Every component serves ``/livez``, ``/readyz``, ``/status``, ``/metrics`` under one
        base (the wire contract), so ``sibling(".../status", "/metrics")`` is its metrics.
        """
        base = status_url[: -len("/status")] if status_url.endswith("/status") else status_url.rstrip("/")
        return base + path

    def proxy_calls(self, skip_regions: tuple[str, ...] = ()) -> dict[str, str]:
        """Region -> ``/call/work`` of its east-west proxy (the app's work through the proxy's
        snapshot), for every region outside *skip_regions*."""
        return {self.node_region(n): self.sibling(u, "/call/work") for n, u in self.entry_nodes.items()
                if n.startswith("proxy-") and self.node_region(n) not in skip_regions}


@runtime_checkable
class RunsReferenceApp(Protocol):
    """A target capability: the federation is the reference app, and these are its URLs
    (``local``, ``kind``, ``kube``)."""

    def reference_endpoints(self) -> ReferenceEndpoints:
        """The reference app's URLs; cheap (no I/O)."""


def reference_endpoints_of(target: object) -> ReferenceEndpoints | None:
    """*target*'s reference-app URLs, or None when it does not run the reference app."""
    return target.reference_endpoints() if isinstance(target, RunsReferenceApp) else None


def reference_sources(ep: Endpoints, ref: ReferenceEndpoints, alarms: tuple[AlarmSource, ...]) -> Sources:
    """The reference app's sources: *ep* for DNS, *ref* for the rest; *alarms* as the target
    reads its nodes' logs."""
    host, port = ep.dns_server
    broadcast = (NatsVersionFeed(url=ref.nats_url, subject=ref.broadcast_subject, field=CP_VERSION)
                 if ref.nats_url and ref.broadcast_subject else None)
    return Sources(
        entry_nodes=tuple(HttpJsonNode(name=n, region=ref.node_region(n), url=url, version=NODE_VERSION,
                                       routable=NODE_ROUTABLE, stale=NODE_STALE)
                          for n, url in ref.entry_nodes.items()),
        dns=UdpDns(server=host, port=port, fqdn=ep.fqdn, samples=DNS_SAMPLES),
        control_plane=HttpJsonVersion(url=ref.control_plane, field=CP_VERSION) if ref.control_plane else None,
        alarms=alarms,
        utilisation={r: tuple(instance_utilisation(u) for u in urls) for r, urls in ref.utilisation.items()},
        regional_control_planes={r: HttpJsonVersion(url=u, field=CP_VERSION)
                                 for r, u in (ref.extra.get("regional_control_planes") or {}).items()},
        broadcast=broadcast,
        check_timeouts=HttpJsonCheckTimeouts(url=ref.gslb, regions=tuple(dict.fromkeys(
            ref.node_region(n) for n in ref.entry_nodes))) if ref.gslb else None,
    )


def instance_utilisation(url: str) -> HttpJsonUtilisation:
    """The utilisation source of the app instance whose ``/status`` is at *url*."""
    return HttpJsonUtilisation(url=url, capacity=INSTANCE_CAPACITY, utilisation=INSTANCE_UTILISATION,
                               rejected=INSTANCE_REJECTED)


def log_file_alarms(logdir: Path, nodes: list[str]) -> tuple[AlarmSource, ...]:
    """One :class:`LogFileAlarms` per entry node's ``<logdir>/<node>.log``."""
    return tuple(LogFileAlarms(path=logdir / f"{n}.log", node=n, json_event_field=EVENT_FIELD,
                                time_field=TIME_FIELD, detail_field=DETAIL_FIELD) for n in nodes)
