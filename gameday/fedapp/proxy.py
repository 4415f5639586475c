"""A region's local proxy: the east-west entry node (R4, R6).

``/call/<path>`` forwards ``/<path>`` (query string kept) nearest-first by the proxy's
snapshot replica:

1. the local instances the snapshot marks healthy, directly, round-robin;
2. then the routable remote regions ordered by distance (|index difference|, ties
   by name), through their gateways with ``X-Gameday-Hop: 1``.

Targets that just failed are skipped for ``fall x probe_interval`` (long enough for
the region agent to report them and the snapshot to drop them); at most two targets
are tried within ``request_budget``. With no snapshot yet (version 0) the spec stands
in: every local instance, then every other region.

The replica is kept by a :class:`Follower` pulling only diffs after the first full
copy (R4), which is also the stale-snapshot detector (R6). In the regional layout (R14)
a second follower keeps the region's regional snapshot: step 1 uses it (the region's own
instances, east-west inside the region; it keeps working when the global tier is down),
step 2 the global one. ``/status`` says which snapshot (and version) each entry of the
routing table came from. ``POST /admin/fault``
passes ``drop_broadcasts`` / ``never_refresh`` to it, and takes ``readyz`` hooks.
"""

from __future__ import annotations

import asyncio
import itertools
import time

from aiohttp import web

from gameday.fedapp.common import JsonLog, ReadyzFault, render_metrics
from gameday.fedapp.follower import Follower
from gameday.fedapp.forward import (
    EntryNode,
    Forwarder,
    Outcome,
    Target,
    by_distance,
    failure,
    gateway_target,
    regional_follower,
    relay,
    scope_status,
    serve_entry_node,
)
from gameday.fedapp.skeleton import Route
from gameday.fedapp.snapshot import healthy_instances
from gameday.fedapp.spec import FederationSpec, RegionSpec
from gameday.fedapp.wire import Json

_HELP = {
    "gameday_proxy_requests_total": "Calls routed by the proxy",
    "gameday_proxy_retries_total": "Second attempts after a failed first attempt",
    "gameday_proxy_errors_total": "Calls the proxy itself answered with 502/503",
    "gameday_proxy_upstream_seconds": "Duration of upstream attempts",
}


class Proxy(EntryNode):
    """One region's local proxy: routing table, routing and handlers."""

    def __init__(self, spec: FederationSpec, region: RegionSpec, log: JsonLog) -> None:
        self.spec = spec
        self.region = region
        self.timing = spec.topology.timing
        self.log = log
        self.follower = Follower(
            run_id=spec.run_id, node=f"proxy-{region.name}", regions=[r.name for r in spec.regions],
            stale_after=self.timing.stale_after, log=log, on_change=self.rebuild,
        )
        self.regional = regional_follower(spec, region, f"proxy-{region.name}", log, on_change=self.rebuild)
        self.forwarder = Forwarder(log=log)
        self.ready_fault = ReadyzFault()
        self.local_from = "spec"
        """Which snapshot the local table came from: ``regional``, ``global`` or ``spec`` (none yet)."""
        self.local: list[Target] = []
        self.remote: list[Target] = []
        self.ejected_until: dict[Target, float] = {}
        self.cooldown = self.timing.fall * self.timing.probe_interval
        self._rr = itertools.count()
        self.requests_total = 0
        self.errors_total = 0
        defects = spec.topology.defects  # negative controls only: a healthy federation has none
        self.needs_sync = region.name in defects.proxy_needs_sync
        """R1 broken: refuse to route once no broadcast was heard for two heartbeat periods."""
        for f in (self.follower, self.regional):
            if f is not None:
                f.full_pulls = region.name in defects.proxy_full_pulls
                f.silent = region.name in defects.proxy_no_stale_alarm
        self.rebuild()

    # -- routing table --------------------------------------------------------------
    def rebuild(self) -> None:
        """Recompute the nearest-first table from the replica (called on every applied diff)."""
        replica = self.follower.replica
        by_name = {i.name: i for i in self.region.instances}
        local = self.regional.replica if self.regional is not None else replica
        if local.version > 0:
            names = [n for n in healthy_instances(local.entries, self.region.name) if n in by_name]
            self.local_from = self.follower.scope if self.regional is None else self.regional.scope
        else:
            names = sorted(by_name)
            self.local_from = "spec"
        regions = self.follower.routable if replica.version > 0 else [r.name for r in self.spec.regions]
        self.local = [Target(region=self.region.name, instance=n, url=by_name[n].endpoint.url) for n in names]
        others = by_distance(self.spec, self.region, [r for r in regions if r != self.region.name])
        self.remote = [gateway_target(r) for r in others]

    def candidates(self) -> list[Target]:
        """Targets for one call, best first, recently failed ones left out (unless nothing is left)."""
        local = self.local
        if len(local) > 1:
            k = next(self._rr) % len(local)
            local = local[k:] + local[:k]
        table = [*local, *self.remote]
        now = time.monotonic()
        usable = [t for t in table if self.ejected_until.get(t, 0.0) <= now]
        return usable or table

    def _failed(self, out: Outcome) -> None:
        self.ejected_until[out.target] = time.monotonic() + self.cooldown
        self.log("target_failed", target=out.target.label, status=out.status, error=out.error,
                 skip_s=self.cooldown)

    async def call(self, request: web.Request) -> web.Response:
        self.requests_total += 1
        version = self.follower.replica.version
        qs = request.query_string
        path_qs = "/" + request.match_info["tail"] + (f"?{qs}" if qs else "")
        silent = time.monotonic() - self.follower.last_heard
        if self.needs_sync and silent > 2 * self.timing.heartbeat_interval:
            self.errors_total += 1
            return failure(503, f"no broadcast heard for {silent:.1f} s: not routing on an old snapshot",
                           version, [], region=self.region.name)
        cands = self.candidates()
        if not cands:
            self.errors_total += 1
            return failure(503, "no route: no healthy local instance and no routable region", version, [],
                           region=self.region.name)
        served, attempts = await self.forwarder.forward(cands, request, path_qs, self.timing.request_budget,
                                                        self._failed)
        if served is None:
            self.errors_total += 1
            return failure(502, "all upstream attempts failed", version, attempts, region=self.region.name)
        return relay(served, version)

    # -- own endpoints --------------------------------------------------------------
    def _decisions(self) -> dict[str, str]:
        local_v = (self.regional.replica.version if self.regional is not None and self.local_from == "regional"
                   else self.follower.replica.version)
        remote = "global" if self.follower.replica.version > 0 else "spec"
        return {"local_instances": f"{self.local_from} v{local_v}" if self.local_from != "spec" else "spec",
                "remote_regions": f"{remote} v{self.follower.replica.version}" if remote != "spec" else "spec"}

    def routing_table(self) -> list[Json]:
        now = time.monotonic()
        remote_from = "global" if self.follower.replica.version > 0 else "spec"
        return [
            {"region": t.region, "instance": t.instance, "via": "gateway" if t.via_gateway else "direct",
             "distance": abs(self.spec.region(t.region).index - self.region.index),
             "skipped": self.ejected_until.get(t, 0.0) > now,
             "snapshot": remote_from if t.via_gateway else self.local_from}
            for t in [*self.local, *self.remote]
        ]

    def status(self) -> Json:
        return {
            "role": "proxy",
            "region": self.region.name,
            **self.follower.status(),
            **scope_status(self.follower, self.regional, self._decisions()),
            "routing_table": self.routing_table(),
            "requests_total": self.requests_total,
            "retries_total": self.forwarder.retries_total,
            "errors_total": self.errors_total,
        }

    def metrics(self) -> str:
        lab = f'region="{self.region.name}"'
        samples = [
            *self.follower_samples(lab),
            ("gameday_proxy_requests_total", lab, self.requests_total),
            ("gameday_proxy_retries_total", lab, self.forwarder.retries_total),
            ("gameday_proxy_errors_total", lab, self.errors_total),
        ]
        return render_metrics(samples, _HELP, {"gameday_proxy_upstream_seconds": self.forwarder.latency})

    def apply_fault(self, body: Json) -> None:
        self.configure_followers(body)

    def fault_state(self) -> Json:
        return {"readyz": self.ready_fault.describe(), **self.follower.status()["faults"]}

    def public_routes(self) -> list[Route]:
        return [Route("*", "/call/{tail:.*}", self.call)]


async def serve(spec: FederationSpec, region: str | None, instance: str | None, stop: asyncio.Event) -> None:
    """Run the local proxy of *region* until *stop* is set."""
    if not region:
        raise SystemExit("proxy: --region is required")
    reg = spec.region(region)
    log = JsonLog(f"proxy-{region}")
    await serve_entry_node(spec, Proxy(spec, reg, log), reg.proxy, log, stop, admin=spec.admin.get(f"proxy-{region}"))
