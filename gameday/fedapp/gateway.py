"""A region's gateway: the north-south entry node (R1, R7).

Routing of every path except its own endpoints (``/livez /readyz /status /metrics
/admin/*``):

1. Round-robin over the *ready* local instances. Readiness is the gateway's own:
   it probes each local instance's ``/readyz`` every ``probe_interval`` (a probe is
   a failure after ``probe_timeout``); ``fall`` consecutive failures make an instance
   not ready, ``rise`` consecutive successes ready again (the very first probe
   decides at once, as a kubelet does at start). Passively, a connection error marks
   the instance failed at once, until its next successful probe. None of this waits
   for the control plane.
2. No ready local instance: forward to the fallback region's gateway (the configured
   ``fallback`` if the snapshot finds it routable, else the nearest routable region).
3. A failed first attempt is retried once in another routable region's gateway (never
   the region that just failed, never our own), all within ``request_budget``.

A request that carries ``X-Gameday-Hop`` was forwarded by another gateway: it is
served locally or answered 502/503, never forwarded again. Responses carry
``X-Served-By`` (from the instance) and ``X-Route-Version`` (this gateway's snapshot).

In the regional layout (R14) the gateway also follows its region's regional snapshot:
an instance it marks unhealthy is not routed to even while the gateway's own probe
still passes (east-west inside the region), and the global snapshot keeps deciding
the fallback and retry regions. ``/status`` says so (``decisions``).

The snapshot comes from a :class:`Follower` connected in the background; with the bus
or the control plane down the gateway keeps routing by its last snapshot (R1). With
no snapshot at all (version 0) every other region counts as a fallback candidate.

Fault hooks (``POST /admin/fault``): ``{"readyz": "ok"|"fail"|"flap", ...}``,
``{"fallback": false}`` (no local fallback: a broken gateway for negative controls),
and the follower's ``drop_broadcasts`` / ``never_refresh``.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from dataclasses import dataclass

from aiohttp import web

from gameday.fedapp.common import JsonLog, ReadyzFault, every, render_metrics
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
from gameday.fedapp.spec import FederationSpec, InstanceSpec, RegionSpec
from gameday.fedapp.wire import HOP, Json, instance_key

_HELP = {
    "gameday_gateway_requests_total": "Requests routed by the gateway (own endpoints excluded)",
    "gameday_gateway_retries_total": "Second attempts in another region after a failed first attempt",
    "gameday_gateway_fallbacks_total": (
        "Requests sent to the fallback region because no local instance was ready"),
    "gameday_gateway_errors_total": "Requests the gateway itself answered with 502/503",
    "gameday_gateway_ejections_total": "Local instances marked failed by a connection error (passive)",
    "gameday_gateway_local_ready": "Local instances the gateway considers ready",
    "gameday_gateway_upstream_seconds": "Duration of upstream attempts",
}


@dataclass
class LocalInstance:
    """The gateway's readiness view of one local instance."""

    spec: InstanceSpec
    ready: bool = False
    probed: bool = False
    successes: int = 0
    failures: int = 0
    ejected: bool = False
    """Passively failed (connection error) until the next successful probe."""

    def record(self, ok: bool, fall: int, rise: int) -> bool:
        """Record a probe result; return True if ``ready`` changed."""
        before = self.ready
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            self.ejected = False
            if not self.probed or self.successes >= rise:
                self.ready = True
        else:
            self.successes, self.failures = 0, self.failures + 1
            if not self.probed or self.failures >= fall:
                self.ready = False
        self.probed = True
        return self.ready != before


class Gateway(EntryNode):
    """One region's gateway: state, routing and handlers."""

    def __init__(self, spec: FederationSpec, region: RegionSpec, log: JsonLog) -> None:
        self.spec = spec
        self.region = region
        self.timing = spec.topology.timing
        self.log = log
        self.follower = Follower(
            run_id=spec.run_id, node=f"gateway-{region.name}", regions=[r.name for r in spec.regions],
            stale_after=self.timing.stale_after, log=log,
        )
        self.regional = regional_follower(spec, region, f"gateway-{region.name}", log)
        self.forwarder = Forwarder(log=log)
        self.locals = [LocalInstance(spec=i) for i in region.instances]
        self._rr = itertools.count()
        self.ready_fault = ReadyzFault()
        # A topology defect (negative controls) can start the gateway without fallback.
        self.fallback_enabled = region.name not in spec.topology.defects.gateway_no_fallback
        self.needs_sync = region.name in spec.topology.defects.gateway_needs_sync
        """R1 broken: refuse clients' requests once no broadcast was heard for four heartbeat periods
        (four: a busy machine's late broadcast must not refuse them before the fault)."""
        self.requests_total = 0
        self.fallbacks_total = 0
        self.errors_total = 0
        self.ejections_total = 0

    # -- readiness ------------------------------------------------------------------
    def ready_locals(self) -> list[LocalInstance]:
        ready = [i for i in self.locals if i.ready and not i.ejected]
        if self.regional is None or self.regional.replica.version <= 0:
            return ready
        # Only an explicit "unhealthy" vetoes: an instance the regional snapshot has not
        # heard of yet is the gateway's own probes' to judge.
        entries = self.regional.replica.entries
        return [i for i in ready if (entries.get(instance_key(self.region.name, i.spec.name)) or {})
                .get("healthy", True)]

    async def probe(self, inst: LocalInstance) -> None:
        ok = await self.forwarder.probe(inst.spec.endpoint.url + "/readyz", self.timing.probe_timeout)
        if inst.record(ok, self.timing.fall, self.timing.rise):
            self.log("instance_ready" if inst.ready else "instance_not_ready", instance=inst.spec.name,
                     ready=[i.spec.name for i in self.ready_locals()])

    def _eject(self, out: Outcome) -> None:
        if out.error != "connect" or out.target.via_gateway:
            return
        for inst in self.locals:
            if inst.spec.name == out.target.instance and not inst.ejected:
                inst.ejected = True
                self.ejections_total += 1
                self.log("instance_ejected", instance=inst.spec.name,
                         ready=[i.spec.name for i in self.ready_locals()])

    # -- routing --------------------------------------------------------------------
    def _local_target(self) -> Target | None:
        ready = self.ready_locals()
        if not ready:
            return None
        inst = ready[next(self._rr) % len(ready)]
        return Target(region=self.region.name, instance=inst.spec.name, url=inst.spec.endpoint.url)

    def _remote(self, exclude: set[str]) -> list[Target]:
        """Other regions' gateways worth trying, best first: configured fallback, then nearest."""
        known = self.follower.replica.version > 0
        names = [r.name for r in self.spec.regions] if not known else self.follower.routable
        names = [n for n in names if n != self.region.name and n not in exclude]
        ordered = by_distance(self.spec, self.region, names)
        fb = self.region.fallback
        ordered.sort(key=lambda r: r.name != fb)  # stable: the fallback first, the rest by distance
        return [gateway_target(r) for r in ordered]

    async def route(self, request: web.Request) -> web.Response:
        self.requests_total += 1
        version = self.follower.replica.version
        budget = self.timing.request_budget
        silent = time.monotonic() - self.follower.last_heard
        if self.needs_sync and silent > 4 * self.timing.heartbeat_interval:
            return self._error(503, f"no broadcast heard for {silent:.1f} s: not routing on an old snapshot",
                               version, [])
        local = self._local_target()
        if HOP in request.headers:
            if local is None:
                return self._error(503, "no ready local instance (hop request: not forwarded again)",
                                   version, [])
            served, attempts = await self.forwarder.forward([local], request, request.path_qs, budget,
                                                            self._eject)
            if served is None:
                return self._error(502, "local upstream failed (hop request: not forwarded again)",
                                   version, attempts)
            return relay(served, version)
        if local is not None:
            first = local
        elif not self.fallback_enabled:
            return self._error(503, "no ready local instance and fallback disabled", version, [])
        else:
            remote = self._remote(set())
            if not remote:
                return self._error(502, "no ready local instance and no routable fallback region",
                                   version, [])
            first = remote[0]
            self.fallbacks_total += 1
        candidates = [first, *self._remote({first.region})[:1]]
        served, attempts = await self.forwarder.forward(candidates, request, request.path_qs, budget,
                                                        self._eject)
        if served is None:
            return self._error(502, "all upstream attempts failed", version, attempts)
        return relay(served, version)

    def _error(self, status: int, error: str, version: int, attempts: list[Outcome]) -> web.Response:
        self.errors_total += 1
        return failure(status, error, version, attempts, region=self.region.name)

    # -- own endpoints --------------------------------------------------------------
    def status(self) -> Json:
        return {
            "role": "gateway",
            "region": self.region.name,
            **self.follower.status(),
            **scope_status(self.follower, self.regional, self._decisions()),
            "local_ready": [i.spec.name for i in self.ready_locals()],
            "local": {i.spec.name: {"ready": i.ready, "ejected": i.ejected} for i in self.locals},
            "fallback": self.region.fallback,
            "fallback_enabled": self.fallback_enabled,
            "requests_total": self.requests_total,
            "retries_total": self.forwarder.retries_total,
            "fallbacks_total": self.fallbacks_total,
            "errors_total": self.errors_total,
            "ejections_total": self.ejections_total,
            "readyz": self.ready_fault.describe(),
        }

    def _decisions(self) -> dict[str, str]:
        local = "own readiness probes"
        if self.regional is not None and self.regional.replica.version > 0:
            local += f" and regional v{self.regional.replica.version}"
        v = self.follower.replica.version
        return {"local_instances": local, "fallback_and_retry": f"global v{v}" if v > 0 else "spec"}

    def metrics(self) -> str:
        lab = f'region="{self.region.name}"'
        samples = [
            *self.follower_samples(lab),
            ("gameday_gateway_requests_total", lab, self.requests_total),
            ("gameday_gateway_retries_total", lab, self.forwarder.retries_total),
            ("gameday_gateway_fallbacks_total", lab, self.fallbacks_total),
            ("gameday_gateway_errors_total", lab, self.errors_total),
            ("gameday_gateway_ejections_total", lab, self.ejections_total),
            ("gameday_gateway_local_ready", lab, len(self.ready_locals())),
        ]
        return render_metrics(samples, _HELP, {"gameday_gateway_upstream_seconds": self.forwarder.latency})

    def apply_fault(self, body: Json) -> None:
        if "fallback" in body:
            self.fallback_enabled = bool(body["fallback"])
        self.configure_followers(body)

    def fault_state(self) -> Json:
        return {"readyz": self.ready_fault.describe(),
                "fallback_enabled": self.fallback_enabled, **self.follower.status()["faults"]}

    def public_routes(self) -> list[Route]:
        return [Route("*", "/{tail:.*}", self.route)]  # everything else is routed (admin paths never are)


async def serve(spec: FederationSpec, region: str | None, instance: str | None, stop: asyncio.Event) -> None:
    """Run the gateway of *region* until *stop* is set."""
    if not region:
        raise SystemExit("gateway: --region is required")
    reg = spec.region(region)
    log = JsonLog(f"gateway-{region}")
    gw = Gateway(spec, reg, log)
    probes = [functools.partial(every, gw.timing.probe_interval, functools.partial(gw.probe, inst), stop)
              for inst in gw.locals]
    await serve_entry_node(spec, gw, reg.gateway, log, stop, background=probes,
                           admin=spec.admin.get(f"gateway-{region}"), instances=[i.spec.name for i in gw.locals])
