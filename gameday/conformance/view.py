"""A federation seen from outside, through a target's public endpoints only.

:class:`FederationView` reads statuses and metrics, sends requests through entry nodes
and the GSLB's answer, and waits for the states the conformance checks start from
(converged, DNS settled). Every wait has a deadline and raises ``AssertionError`` saying
what it waited for and what it last saw.

What every federation has is a client's way in (:class:`Endpoints`: the DNS server, the
name, the gateway port). The statuses, metrics and snapshot the rules read are the
reference app's (:class:`ReferenceEndpoints`, from the targets that run it); on another
federation they are absent, and a check that needs one skips saying what is missing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from gameday.conformance import dnssample, promtext
from gameday.conformance.wait import wait_until
from gameday.fedapp.wire import ROUTE_VERSION, SERVED_BY
from gameday.model.parts import Endpoints, RegionInfo
from gameday.observers.reference import ReferenceEndpoints

Json = dict[str, Any]
#: Answers sampled to judge which regions a GSLB without a status endpoint answers with: with
#: three regions at weight shares >= 20 %, a region missing from 60 answers by chance has
#: probability below 0.8**60 ~ 1.5e-6.
SETTLE_SAMPLE = 60


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

    def __init__(self, endpoints: Endpoints, regions: list[RegionInfo], timeout: float = 2.0,
                 target: str = "", reference: ReferenceEndpoints | None = None) -> None:
        """
        Args:
            endpoints: how a client reaches the federation (DNS, gateways).
            reference: the reference app's URLs where the target runs it; None: none exposed.
        """
        self.client = endpoints
        self.ep = reference if reference is not None else ReferenceEndpoints()
        self.target = target
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
        url = ReferenceEndpoints.sibling(status_url, "/metrics")
        r = self.http.get(url)
        r.raise_for_status()
        return promtext.parse(r.text)

    def _absent(self, what: str, why: str) -> None:
        """A check whose input the target does not expose is not applicable: skip it, saying
        what is missing (a rule that could not be checked is never a pass, nor an error)."""
        pytest.skip(f"target {self.target or '?'} exposes no {what}: {why}")

    def cp_url(self) -> str:
        """The control plane's ``/status`` URL (skips the check where the target exposes none)."""
        if self.ep.control_plane is None:
            self._absent("control-plane /status URL (ReferenceEndpoints.control_plane)",
                         "this check reads the control plane's version or metrics there")
        assert self.ep.control_plane is not None
        return self.ep.control_plane

    def entry_node(self, name: str) -> str:
        """Entry node *name*'s ``/status`` URL (skips the check where the target exposes none)."""
        url = self.ep.entry_nodes.get(name)
        if not url:
            self._absent(f"entry node {name} (ReferenceEndpoints.entry_nodes has {sorted(self.ep.entry_nodes)})",
                         "this check reads that node's /status")
        assert url
        return url

    def instances(self, region: str) -> list[str]:
        """The ``/status`` URLs of *region*'s app instances (skips the check where there are none)."""
        urls = self.ep.utilisation.get(region)
        if not urls:
            self._absent(f"app instances for region {region} (ReferenceEndpoints.utilisation)",
                         "this check reads the instances' own endpoints")
        assert urls
        return list(urls)

    def cp(self) -> Json:
        return self.get_json(self.cp_url())

    def cp_version(self) -> int:
        return int(self.cp()["version"])

    def nodes(self) -> dict[str, Json | None]:
        """Every entry node's ``/status`` (None for a node that did not answer)."""
        return {n: self.try_json(u) for n, u in self.ep.entry_nodes.items()}

    def gslb(self) -> Json:
        if not self.ep.gslb:
            self._absent("GSLB /status URL (ReferenceEndpoints.gslb)", "this check reads health and weight ramps there")
        assert self.ep.gslb is not None
        return self.get_json(self.ep.gslb)

    def agent_url(self, region: str) -> str:
        url = self.ep.agents.get(region)
        if not url:
            self._absent(f"agent /status URL for region {region} "
                         f"(ReferenceEndpoints.agents has {sorted(self.ep.agents)})",
                         "this check reads the region agent's probe counters there")
        assert url
        return url

    def snapshot(self) -> Json:
        if not self.ep.snapshot:
            self._absent("control-plane snapshot URL (ReferenceEndpoints.snapshot)",
                         "this check reads the global snapshot the control plane holds")
        assert self.ep.snapshot is not None
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

    def request_served(self, url: str, attempts: int = 3) -> Reply:
        """GET *url* until the federation serves it (200), at most *attempts* times; the served
        reply, else the last. For a check about *what* a node answers with (its route version),
        not whether every single request makes it: on a starved machine one request can spend
        the whole request budget and come back 502 (a 12-region federation at load ~24 did),
        which says nothing about the version it routes by. A node that never serves still fails."""
        reply = self.request(url)
        for _ in range(attempts - 1):
            if reply.status == 200:
                break
            reply = self.request(url)
        return reply

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
        return f"http://{addr}:{self.client.gateway_port}/work"

    def proxy_call_url(self, node: str) -> str:
        """The app's ``/work`` through an east-west proxy (``/call/work``)."""
        return ReferenceEndpoints.sibling(self.entry_node(node), "/call/work")

    def entry_urls(self) -> dict[str, str]:
        """Entry node -> a URL that sends one app request through it."""
        out = {}
        for node in self.ep.entry_nodes:
            role, region = node.split("-", 1)
            out[node] = self.gateway_work_url(region) if role == "gateway" else self.proxy_call_url(node)
        return out

    # -- DNS -----------------------------------------------------------------------------------
    def dns(self, n: int, deadline: float = 60.0) -> list[dnssample.Answer]:
        return dnssample.sample(self.client.dns_server, self.client.fqdn, n, deadline=deadline)

    def region_of(self, address: str) -> str:
        return self.addr_region.get(address, address)

    # -- waiting for states ------------------------------------------------------------------------
    def wait_converged(self, timeout: float, regions: list[str] | None = None) -> int | None:
        """Wait until every entry node reports the control plane's version and routes to
        exactly *regions* (default: all); return that version.

        Where the target exposes no control plane (a foreign federation described by a
        profile), wait only for the entry nodes it exposes to route to *regions*, and return
        None: there is no version, and the checks that read one skip saying so."""
        want = sorted(regions if regions is not None else self.names)

        def behind(v: int | None) -> dict[str, str]:
            off = {}
            for n, st in self.nodes().items():
                if st is None:
                    off[n] = "no answer"
                elif (v is not None and st.get("version") != v) or sorted(st.get("routable_regions", [])) != want:
                    off[n] = f"v{st.get('version')} routes {st.get('routable_regions')}"
            return off

        if self.ep.control_plane is None:
            def routed() -> tuple[bool, str | None]:
                off = behind(None)
                return (True, None) if not off else (False, f"behind: {off}")

            wait_until(routed, timeout, f"every entry node routing to {want}")
            return None

        def probe() -> tuple[bool, str | int]:
            try:
                v = self.cp_version()
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                return False, f"control plane: {exc!r}"
            off = behind(v)
            return (not off, v) if not off else (False, f"control plane v{v}; behind: {off}")

        v = wait_until(probe, timeout, f"every entry node at the control plane's version routing to {want}")
        return int(v)

    def wait_dns_settled(self, timeout: float, regions: list[str] | None = None) -> Json:
        """Wait until the GSLB answers with exactly *regions* (default: all), each at its
        full static weight (no re-admission ramp running); return its status.

        Where the target exposes no GSLB status (a foreign GSLB), judge from its answers: a
        sample of :data:`SETTLE_SAMPLE` queries names exactly *regions*. (A ramp cannot be
        seen that way; the returned status is ``{"regions": {name: {"answers": n}}}``.)"""
        want = sorted(regions if regions is not None else self.names)
        if not self.ep.gslb:
            return self._wait_dns_answers(timeout, want)

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

    def _wait_dns_answers(self, timeout: float, want: list[str]) -> Json:
        def probe() -> tuple[bool, Json | str]:
            counts: dict[str, int] = {}
            for a in self.dns(SETTLE_SAMPLE, deadline=max(timeout, 5.0)):
                r = self.region_of(a.addresses[0]) if a.addresses else "(empty)"
                counts[r] = counts.get(r, 0) + 1
            if sorted(counts) == want:
                return True, {"regions": {r: {"answers": n} for r, n in counts.items()}}
            return False, f"{SETTLE_SAMPLE} answers named {counts}"

        st = wait_until(probe, timeout, f"the GSLB's answers naming exactly {want}")
        assert isinstance(st, dict)
        return st


@contextmanager
def federation_view(endpoints: Endpoints, regions: list[RegionInfo], target: str = "",
                    reference: ReferenceEndpoints | None = None) -> Iterator[FederationView]:
    view = FederationView(endpoints, regions, target=target, reference=reference)
    try:
        yield view
    finally:
        view.close()
