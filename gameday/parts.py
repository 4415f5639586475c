"""The parts of a federation as the harness sees them: plain data, no behaviour.

A target describes its regions (:class:`RegionInfo`), how clients and observers reach it
(:class:`Endpoints`, :class:`ClientRoute`) and which of its processes are alive
(:class:`ComponentState`). They sit below every layer that reads them (observers, load,
verdicts' callers, the target interface in :mod:`gameday.interfaces`, which re-exports
them), so no layer needs the interface module to name a region.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LOAD_ROLE = "load"
"""The :attr:`ComponentState.role` of a load-generator process (not part of the federation)."""

SUPERVISOR_ROLE = "supervisor"
"""The :attr:`ComponentState.role` of a process that starts other components (local: the
launcher that forks them): when it dies, what it started dies with it, so a watcher names it,
not the first of its children it happens to look at."""


@dataclass(frozen=True)
class RegionInfo:
    """What the harness needs to know about one region."""

    name: str
    weight: float
    capacity: float | None
    """Declared capacity of the whole region, req/s; None: unknown (a federation profile
    without ``capacity_rps``): the headroom verdict is then not applicable, never a pass."""
    gateway_address: str
    """The address the GSLB answers with for this region."""


@dataclass(frozen=True)
class ClientRoute:
    """How a client's request reaches a gateway once DNS has answered with its address:
    ``scheme://<address>:<gateway_port><path>`` with ``Host: host_header``."""

    scheme: str = "http"
    path: str = "/work"
    """The reference app's work endpoint."""
    host_header: str | None = None
    """None: no Host header beyond the address (the reference app needs none)."""
    served_by_header: str | None = "X-Served-By"
    """A response header naming the serving region (``region/instance``); None: not set."""


@dataclass(frozen=True)
class Endpoints:
    """How to observe a federation from outside, exactly as a staging one is observed."""

    dns_server: tuple[str, int]
    """GSLB (host, port), UDP and TCP."""
    fqdn: str
    """The service name clients resolve, e.g. ``app.gameday.test.``."""
    gateway_port: int
    """Port of every region gateway (DNS answers carry addresses only)."""
    entry_nodes: dict[str, str]
    """Entry-node name (``gateway-a``, ``proxy-a``) -> its ``/status`` URL."""
    control_plane: str | None
    """Control plane ``/status`` URL; None: the federation exposes none (a foreign one)."""
    utilisation: dict[str, list[str]]
    """Region -> the app instances' ``/status`` URLs (utilisation)."""
    nats_url: str | None = None
    """Set where the harness may subscribe to the version broadcast directly."""
    broadcast_subject: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    gslb: str | None = None
    """GSLB ``/status`` URL: per-region ``healthy``, ``weight``, ``effective_weight``,
    ``ramp_progress``, ``since_change_s`` (the conformance suite reads health and ramps here)."""
    agents: dict[str, str] = field(default_factory=dict)
    """Region -> its region agent's ``/status`` URL (probe counters for R2)."""
    snapshot: str | None = None
    """Control plane ``GET /snapshot`` URL: ``{"version", "entries", ...}``, the global
    snapshot as the control plane holds it (slow state and merged labels for R3)."""
    client: ClientRoute = field(default_factory=ClientRoute)
    """How the load generator's requests reach a gateway."""
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


@dataclass(frozen=True)
class ComponentState:
    """Whether one process (a federation component or a load generator) is alive right now."""

    name: str
    """``proxy-b``, ``nats``, ``locust``: the name messages use."""
    alive: bool
    pid: int | None = None
    """Where the target knows one (local: always); None elsewhere."""
    role: str = ""
    """``proxy``, ``gateway``, ... or :data:`LOAD_ROLE`."""
    detail: str = ""
    """Why it is not alive, in the target's words (``not running``, ``exited with code -9``),
    and where to look (its log)."""
