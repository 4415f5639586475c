"""The parts of a federation as the harness sees them: plain data, no behaviour.

A target describes its regions (:class:`RegionInfo`), how clients reach it
(:class:`Endpoints`, :class:`ClientRoute`) and which of its processes are alive
(:class:`ComponentState`). They sit below every layer that reads them (observers, load,
verdicts' callers, the target interface in :mod:`gameday.interfaces`, which re-exports
them), so no layer needs the interface module to name a region.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
    """How a client reaches a federation: the name it resolves, where, and how its requests
    reach a gateway (the load generator needs no more).

    What the harness *observes* is the target's :class:`~gameday.observers.sources.Sources`;
    the reference app's own URLs (entry-node ``/status``, control plane, GSLB, agents) are
    its targets' :class:`~gameday.observers.reference.ReferenceEndpoints`.
    """

    dns_server: tuple[str, int]
    """The DNS server clients ask (the GSLB): (host, port), UDP and TCP."""
    fqdn: str
    """The service name clients resolve, e.g. ``app.gameday.test.``."""
    gateway_port: int
    """Port of every region gateway (DNS answers carry addresses only)."""
    client: ClientRoute = field(default_factory=ClientRoute)
    """How the load generator's requests reach a gateway."""

    if not TYPE_CHECKING:  # at run time only: a type checker must still flag the names below
        def __getattr__(self, name: str) -> Any:
            # Only called for a missing attribute: say where the reference app's URLs went.
            if name in _MOVED:
                raise AttributeError(
                    f"Endpoints.{name} is the reference app's, not every federation's: read it from "
                    f"gameday.observers.reference.reference_endpoints_of(target).{name} (the local, kind "
                    "and kube targets give one; an external target observes through its profile's sources)")
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


_MOVED = frozenset({"entry_nodes", "control_plane", "utilisation", "nats_url", "broadcast_subject", "extra",
                    "gslb", "agents", "snapshot", "node_regions", "node_region", "sibling"})
"""The fields :class:`Endpoints` had before the reference app's URLs moved out of it."""


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
