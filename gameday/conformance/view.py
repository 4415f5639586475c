"""A federation seen from outside, through a target's :class:`Endpoints` only.

:class:`FederationView` reads statuses and metrics, sends requests through entry nodes
and the GSLB's answer, and waits for the states the conformance checks start from
(converged, DNS settled). Every wait has a deadline and raises ``AssertionError`` saying
what it waited for and what it last saw.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from gameday.conformance import dnssample, promtext
from gameday.conformance.wait import wait_until
from gameday.fedapp.wire import ROUTE_VERSION, SERVED_BY
from gameday.targets.base import Endpoints, RegionInfo

Json = dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """One request through an entry node, as the client saw it."""

    url: str
    status: int
    """HTTP status; 0 when no response arrived (refused, reset, timed out)."""
    elapsed: float
    """Seconds from sending to the full response, measured by the client."""
    served_by: str | None = None
    """``<region>/<instance>`` from ``X-Served-By``."""
    route_version: int | None = None
    """The snapshot version the entry node routed by (``X-Route-Version``)."""
    error: str | None = None

    @property
    def region(self) -> str | None:
        return self.served_by.split("/", 1)[0] if self.served_by else None

    def __str__(self) -> str:
        what = f"HTTP {self.status}" if self.status else f"no response ({self.error})"
        return (f"{self.url}: {what} in {self.elapsed * 1000:.0f} ms, served by {self.served_by or '-'}, "
                f"route version {self.route_version}")


class FederationView:
    """Read-only (plus plain requests) access to a federation's public endpoints."""

    def __init__(self, endpoints: Endpoints, regions: list[RegionInfo], timeout: float = 2.0) -> None:
        self.ep = endpoints
        self.regions = regions
        self.names = [r.name for r in regions]
        self.addr_region = {r.gateway_address: r.name for r in regions}
        self.http = httpx.Client(timeout=timeout, trust_env=False)

    def close(self) -> None:
        self.http.close()

    # -- reading -----------------------------------------------------------------------------
    def get_json(self, url: str) -> Json:
        """GET *url* as JSON. Raises ``httpx.HTTPError`` / ``ValueError`` on failure."""
        r = self.http.get(url)
        r.raise_for_status()
        data: Json = r.json()
        return data

    def try_json(self, url: str) -> Json | None:
        """GET *url* as JSON, or None if it did not answer with JSON."""
        try:
            return self.get_json(url)
        except (httpx.HTTPError, ValueError):
            return None

    def metrics(self, status_url: str) -> promtext.Metrics:
        """Parse the ``/metrics`` of the component whose ``/status`` URL is *status_url*."""
        url = Endpoints.sibling(status_url, "/metrics")
        r = self.http.get(url)
        r.raise_for_status()
        return promtext.parse(r.text)

    def cp(self) -> Json:
        if self.ep.control_plane is None:
            raise AssertionError("the target exposes no control-plane /status URL (Endpoints.control_plane); "
                                 "this check reads the control plane's version there")
        return self.get_json(self.ep.control_plane)

    def cp_version(self) -> int:
        return int(self.cp()["version"])

    def nodes(self) -> dict[str, Json | None]:
        """Every entry node's ``/status`` (None for a node that did not answer)."""
        return {n: self.try_json(u) for n, u in self.ep.entry_nodes.items()}

    def gslb(self) -> Json:
        if not self.ep.gslb:
            raise AssertionError("the target exposes no GSLB /status URL (Endpoints.gslb); "
                                 "the conformance suite needs it to see health and weight ramps")
        return self.get_json(self.ep.gslb)

    def agent_url(self, region: str) -> str:
        url = self.ep.agents.get(region)
        if not url:
            raise AssertionError(f"the target exposes no agent /status URL for region {region} "
                                 f"(Endpoints.agents has {sorted(self.ep.agents)})")
        return url

    def snapshot(self) -> Json:
        if not self.ep.snapshot:
            raise AssertionError("the target exposes no control-plane snapshot URL (Endpoints.snapshot)")
        return self.get_json(self.ep.snapshot)

    def node_metrics(self) -> dict[str, promtext.Metrics]:
        return {n: self.metrics(u) for n, u in self.ep.entry_nodes.items()}

    # -- requests ----------------------------------------------------------------------------
    def request(self, url: str, timeout: float = 2.0) -> Reply:
        """GET *url* once; a failure to get any response is a Reply with status 0."""
        t0 = time.monotonic()
        try:
            r = self.http.get(url, timeout=timeout)
        except httpx.HTTPError as exc:
            return Reply(url, 0, time.monotonic() - t0, error=f"{type(exc).__name__}: {exc}")
        elapsed = time.monotonic() - t0
        rv = r.headers.get(ROUTE_VERSION)
        return Reply(url, r.status_code, elapsed, r.headers.get(SERVED_BY),
                     int(rv) if rv and rv.isdigit() else None)

    def requests_for(self, urls: dict[str, str], seconds: float, max_rounds: int = 200,
                     pause: float = 0.02) -> dict[str, list[Reply]]:
        """Send one request to each of *urls* in turn, round after round, for *seconds*
        (at most *max_rounds* rounds); return the replies per key of *urls*."""
        out: dict[str, list[Reply]] = {k: [] for k in urls}
        end = time.monotonic() + seconds
        for _ in range(max_rounds):
            for k, u in urls.items():
                out[k].append(self.request(u))
            if time.monotonic() >= end:
                break
            time.sleep(pause)
        return out

    def gateway_work_url(self, region: str) -> str:
        """The app's ``/work`` through *region*'s gateway (its GSLB address and the gateway port)."""
        addr = next(r.gateway_address for r in self.regions if r.name == region)
        return f"http://{addr}:{self.ep.gateway_port}/work"

    def proxy_call_url(self, node: str) -> str:
        """The app's ``/work`` through an east-west proxy (``/call/work``)."""
        return Endpoints.sibling(self.ep.entry_nodes[node], "/call/work")

    def entry_urls(self) -> dict[str, str]:
        """Entry node -> a URL that sends one app request through it."""
        out = {}
        for node in self.ep.entry_nodes:
            role, region = node.split("-", 1)
            out[node] = self.gateway_work_url(region) if role == "gateway" else self.proxy_call_url(node)
        return out

    # -- DNS -----------------------------------------------------------------------------------
    def dns(self, n: int, deadline: float = 60.0) -> list[dnssample.Answer]:
        return dnssample.sample(self.ep.dns_server, self.ep.fqdn, n, deadline=deadline)

    def region_of(self, address: str) -> str:
        return self.addr_region.get(address, address)

    # -- waiting for states ------------------------------------------------------------------------
    def wait_converged(self, timeout: float, regions: list[str] | None = None) -> int:
        """Wait until every entry node reports the control plane's version and routes to
        exactly *regions* (default: all); return that version."""
        want = sorted(regions if regions is not None else self.names)

        def probe() -> tuple[bool, str | int]:
            try:
                v = self.cp_version()
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                return False, f"control plane: {exc!r}"
            off = {}
            for n, st in self.nodes().items():
                if st is None:
                    off[n] = "no answer"
                elif st.get("version") != v or sorted(st.get("routable_regions", [])) != want:
                    off[n] = f"v{st.get('version')} routes {st.get('routable_regions')}"
            return (not off, v) if not off else (False, f"control plane v{v}; behind: {off}")

        v = wait_until(probe, timeout, f"every entry node at the control plane's version routing to {want}")
        return int(v)

    def wait_dns_settled(self, timeout: float, regions: list[str] | None = None) -> Json:
        """Wait until the GSLB answers with exactly *regions* (default: all), each at its
        full static weight (no re-admission ramp running); return its status."""
        want = sorted(regions if regions is not None else self.names)

        def probe() -> tuple[bool, Json | str]:
            try:
                st = self.gslb()
            except (httpx.HTTPError, ValueError) as exc:
                return False, repr(exc)
            regs = st.get("regions", {})
            healthy = sorted(n for n, r in regs.items() if r.get("healthy"))
            ramping = {n: r.get("effective_weight") for n, r in regs.items()
                       if r.get("healthy") and r.get("effective_weight") != r.get("weight")}
            if healthy == want and not ramping:
                return True, st
            return False, f"healthy {healthy}, effective weights below static: {ramping}"

        st = wait_until(probe, timeout, f"the GSLB answering with {want} at full weight")
        assert isinstance(st, dict)
        return st


@contextmanager
def federation_view(endpoints: Endpoints, regions: list[RegionInfo]) -> Iterator[FederationView]:
    view = FederationView(endpoints, regions)
    try:
        yield view
    finally:
        view.close()
