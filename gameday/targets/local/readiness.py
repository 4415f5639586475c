"""Is the local federation ready, and what does it look like right now?"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import dns.exception
import dns.message
import dns.query
import dns.rdatatype
import httpx

from gameday.errors import ComponentFailed
from gameday.fedapp.spec import FederationSpec


class _Process(Protocol):
    """One component as the federation records it (its ``Component``), by shape."""

    @property
    def role(self) -> str: ...
    @property
    def region(self) -> str | None: ...
    @property
    def pid(self) -> int | None: ...


class LocalFederation(Protocol):
    """What readiness reads of a running local federation
    (:class:`gameday.targets.local.federation.LocalFederation`, which calls in here: named by
    shape so that the two modules do not import each other)."""

    spec: FederationSpec
    logdir: Path
    never_refreshing: set[str]

    @property
    def components(self) -> Mapping[str, _Process]: ...
    def is_running(self, name: str) -> bool: ...
    def get_json(self, name: str, path: str = "/status", timeout: float = 1.0) -> dict[str, Any]: ...
    def entry_nodes(self) -> list[str]: ...
    def regional_control_planes(self) -> dict[str, str]: ...


def query_gslb(fed: LocalFederation, timeout: float = 0.5) -> list[str]:
    """Ask the GSLB for the service's A records over UDP; return the addresses."""
    q = dns.message.make_query(fed.spec.topology.fqdn, dns.rdatatype.A)
    ep = fed.spec.gslb_dns
    resp = dns.query.udp(q, ep.host, port=ep.port, timeout=timeout)
    return [rr.address for rrset in resp.answer for rr in rrset if rr.rdtype == dns.rdatatype.A]


def _not_ready(fed: LocalFederation, versions: bool = True, seen_ready: set[str] | None = None) -> list[str]:
    """Reasons the federation is not ready yet (empty when it is).

    With *versions*, every entry node must also be at the control plane's version (the
    bring-up criterion); without, routing to every region is enough (the pre-check
    before a drill: a lagging node is for the stale-snapshot verdict to judge).
    """
    reasons: list[str] = []
    for name, c in fed.components.items():
        if c.pid is None or not fed.is_running(name):
            raise ComponentFailed(f"{name} is not running; see {fed.logdir / (name + '.log')}")
    regions = [r.name for r in fed.spec.regions]
    try:
        cp = fed.get_json("controlplane")
    except (httpx.HTTPError, ValueError) as exc:
        return [f"controlplane: {type(exc).__name__}"]
    version = int(cp.get("version", 0))
    if version <= 0:
        reasons.append("controlplane: no version yet")
    regional: dict[str, int] = {}
    for region, name in fed.regional_control_planes().items():
        try:
            regional[region] = int(fed.get_json(name).get("version", 0))
        except (httpx.HTTPError, ValueError) as exc:
            reasons.append(f"{name}: {type(exc).__name__}")
            continue
        if regional[region] <= 0:
            reasons.append(f"{name}: no version yet")
    for name in fed.entry_nodes():
        try:
            st = fed.get_json(name)
        except (httpx.HTTPError, ValueError) as exc:
            reasons.append(f"{name}: {type(exc).__name__}")
            continue
        home = fed.components[name].region
        got = (st.get("versions") or {}).get("regional")
        if versions and home is not None and home in regional and got != regional[home]:
            reasons.append(f"{name}: regional v{got} "
                           f"(controlplane-{home} v{regional[home]})")
        # A proxy broken on purpose never to refresh stays at its version when the control
        # plane moves on after start-up (seen on a loaded machine: v14 against v18); the
        # stale-snapshot verdict is what judges it.
        behind = versions and st.get("version") != version and name not in fed.never_refreshing
        if behind or sorted(st.get("routable_regions", [])) != sorted(regions):
            reasons.append(f"{name}: v{st.get('version')} routes {st.get('routable_regions')} (cp v{version})")
    seen_ready = set() if seen_ready is None else seen_ready
    for name, c in fed.components.items():
        if c.role in ("app", "agent", "gslb", "storectl") and name not in seen_ready:
            try:
                fed.get_json(name, "/readyz")
                seen_ready.add(name)  # once ready, liveness (pid) is checked above; no re-poll
            except (httpx.HTTPError, ValueError) as exc:
                reasons.append(f"{name}: /readyz {type(exc).__name__}")
    if fed.spec.topology.state is not None:
        reasons += _store_not_ready(fed, seen_ready)
    if not reasons:
        try:
            if not query_gslb(fed):
                reasons.append("gslb: empty answer")
        except (dns.exception.DNSException, OSError) as exc:
            reasons.append(f"gslb: {type(exc).__name__}")
    return reasons


def _store_not_ready(fed: LocalFederation, seen_ready: set[str]) -> list[str]:
    """Every app instance connected to the store, with the data stream made (a state layer)."""
    reasons = []
    for name, c in fed.components.items():
        if c.role != "app" or f"{name} store" in seen_ready:
            continue
        try:
            store = fed.get_json(name).get("store") or {}
        except (httpx.HTTPError, ValueError) as exc:
            reasons.append(f"{name}: /status {type(exc).__name__}")
            continue
        if store.get("ready") and store.get("connected"):
            seen_ready.add(f"{name} store")
        else:
            reasons.append(f"{name}: store not ready ({store.get('error') or 'no store status'})")
    return reasons


def wait_ready(fed: LocalFederation, timeout: float, versions: bool = True) -> float:
    """Poll until :func:`_not_ready` is empty; return seconds waited.

    Raises:
        ComponentFailed: a component died or *timeout* passed (with the reasons).
    """
    t0 = time.monotonic()
    reasons: list[str] = ["not checked"]
    seen_ready: set[str] = set()
    while True:
        reasons = _not_ready(fed, versions, seen_ready)
        if not reasons:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise ComponentFailed(
                f"federation not ready after {timeout} s: " + "; ".join(reasons[:8])
                + f" (logs in {fed.logdir})"
            )
        time.sleep(0.05)


def _get(fed: LocalFederation, name: str) -> dict[str, Any]:
    try:
        return fed.get_json(name)
    except (httpx.HTTPError, ValueError):
        return {}


def status_table(fed: LocalFederation) -> str:
    """A plain-text table of regions, addresses, health and versions."""
    cp = _get(fed, "controlplane")
    gslb = _get(fed, "gslb")
    s = fed.spec
    lines = [
        f"federation {s.topology.name} (run {s.run_id})  zone {s.topology.zone}  "
        f"service {s.topology.fqdn}",
        f"  NATS {s.nats_url}   control plane {s.control_plane.url} v{cp.get('version', '?')} "
        f"({cp.get('state_mode', '?')})   GSLB dns {s.gslb_dns.host}:{s.gslb_dns.port} udp+tcp",
        "",
        f"  {'region':<8} {'weight':>6} {'gateway':<22} {'routable':<9} {'instances':<10} "
        f"{'gw ver':>6} {'proxy ver':>9} {'dns':<8}",
    ]
    gregions = gslb.get("regions", {})
    for r in s.regions:
        gw = _get(fed, f"gateway-{r.name}")
        px = _get(fed, f"proxy-{r.name}")
        ready = gw.get("local_ready", [])
        routable = "yes" if r.name in px.get("routable_regions", []) else "NO"
        dns_state = "healthy" if gregions.get(r.name, {}).get("healthy") else "out"
        lines.append(
            f"  {r.name:<8} {r.weight:>6g} {r.gateway.host + ':' + str(r.gateway.port):<22} {routable:<9} "
            f"{len(ready)}/{len(r.instances):<8} {gw.get('version', '-')!s:>6} {px.get('version', '-')!s:>9} "
            f"{dns_state:<8}"
        )
    if s.topology.state is not None:
        first_app = next((n for n, c in fed.components.items() if c.role == "app"), None)
        store = (_get(fed, first_app).get("store") or {}) if first_app else {}
        nodes = ", ".join(f"{r.store.host}:{r.store.port}" for r in s.regions if r.store is not None)
        lines += ["", f"  store: JetStream stream {store.get('stream', '?')}, {s.topology.state.replicas} "
                      f"replica(s) ({s.topology.state.storage}), leader {store.get('leader') or '?'}; nodes {nodes}"]
    return "\n".join(lines)
