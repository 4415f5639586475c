"""The region agent: probe local app instances and the gateway, publish health *changes*.

One per region (HTTP status on the region's agent endpoint). Every target (each app
instance's ``/readyz`` and the region gateway's ``/readyz``) is probed every
``probe_interval`` (fixed delay) with a ``probe_timeout``. A target becomes unhealthy
after ``fall`` consecutive failures and healthy after ``rise`` consecutive successes
(R2); its initial state is unknown, and the first determination is published too.

Only changes are published, as :class:`~gameday.fedapp.wire.Event` on the region's
JetStream events subject, ordered by ``(epoch, seq)`` where ``epoch`` is the agent's
start time in ns. Publishing never blocks probing: determinations go into a pending map
(latest value per key) that a publisher drains while the bus is up and keeps while it
is down (R1).

In the regional control-plane layout (R14) instance events go on the region's own
subject (``gd.<run>.revents.<region>``, consumed by the region's control plane only) and
the gateway's on the global one: only the gateway's health changes global routing.

The agent also heartbeats every ``heartbeat_interval``, and answers the control
plane's state request with its full view, including the region's slow state (quota,
labels). ``POST /admin/slow`` edits the slow state locally, like editing a cluster's
metadata: the global snapshot only sees it at the next full reconciliation (R3).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import nats.errors
from aiohttp import web

from gameday.fedapp.common import JsonLog, ReadyzFault, connect_nats, every, json_response, read_json, render_metrics
from gameday.fedapp.skeleton import HttpComponent, Route, start_http
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import (
    SLOW_PATH,
    Event,
    Json,
    agent_state_subject,
    events_subject,
    gateway_key,
    heartbeat_subject,
    instance_key,
    is_regional_key,
    regional_events_subject,
)

PUBLISH_TIMEOUT = 1.0
"""Seconds to wait for JetStream's ack of one event before retrying it."""
RETRY_PAUSE = 0.2

BUS_ERRORS: tuple[type[BaseException], ...] = (nats.errors.Error, TimeoutError, OSError)


@dataclass
class Target:
    """One probed endpoint and its rise/fall state."""

    name: str
    """``gateway`` or the instance name (``a-1``)."""
    key: str
    """Snapshot key the target's health is published under."""
    url: str
    kind: str
    """``instance`` or ``gateway``."""
    healthy: bool | None = None
    consecutive_fail: int = 0
    consecutive_ok: int = 0
    last_probe_ms: float | None = None
    last_error: str | None = None
    probes: int = 0
    failures: int = 0
    changed_after: int | None = None
    """How many consecutive results (failures for a removal, successes for a re-admission)
    made the last change of the determined state (R2: at least 3 failures; successes, plural)."""

    def value(self) -> Json:
        if self.kind == "instance":
            return {"healthy": bool(self.healthy), "weight": 1}
        return {"healthy": bool(self.healthy)}

    def record(self, ok: bool, rise: int, fall: int) -> bool:
        """Count one probe result; return True if the determined state changed."""
        self.probes += 1
        if ok:
            self.consecutive_ok += 1
            self.consecutive_fail = 0
            if self.healthy is not True and self.consecutive_ok >= rise:
                self.healthy, self.changed_after = True, self.consecutive_ok
                return True
        else:
            self.failures += 1
            self.consecutive_fail += 1
            self.consecutive_ok = 0
            if self.healthy is not False and self.consecutive_fail >= fall:
                self.healthy, self.changed_after = False, self.consecutive_fail
                return True
        return False


class Agent(HttpComponent):
    """A region agent; :func:`serve` runs one."""

    def __init__(self, spec: FederationSpec, region: str, log: JsonLog) -> None:
        self.spec = spec
        self.region = region
        self.rspec = spec.region(region)
        self.log = log
        self.run_id = spec.run_id
        self.timing = spec.topology.timing
        self.epoch = time.time_ns()
        self.seq = 0
        self.slow: Json = {"quota": dict(self.rspec.quota), "labels": dict(self.rspec.labels)}
        self.targets: dict[str, Target] = {}
        for inst in self.rspec.instances:
            self.targets[inst.name] = Target(inst.name, instance_key(region, inst.name),
                                             f"{inst.endpoint.url}/readyz", "instance")
        self.targets["gateway"] = Target("gateway", gateway_key(region), f"{self.rspec.gateway.url}/readyz",
                                         "gateway")
        self.pending: dict[str, Event] = {}
        self.events_published = 0
        self.publish_failures = 0
        self.heartbeats = 0
        self.ready_fault = ReadyzFault()
        self._kick = asyncio.Event()
        self._publish_failing = False
        self._stop = asyncio.Event()
        self._nc: Any = None
        self._js: Any = None

    # -- lifecycle ------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        ep = self.rspec.agent
        runner = await start_http(self, ep.host, ep.port, self.log, self.spec.admin.get(f"agent-{self.region}"))
        self.log("started", region=self.region, epoch=self.epoch, host=ep.host, port=ep.port,
                 targets=sorted(self.targets))
        timeout = aiohttp.ClientTimeout(total=self.timing.probe_timeout)
        connector = aiohttp.TCPConnector(force_close=True, limit=0)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            # (defects.probe_interval_factor: a negative control's agent probing slower than stated)
            interval = self.timing.probe_interval * self.spec.topology.defects.probe_interval_factor
            tasks = [asyncio.create_task(every(interval, self._prober(session, t), stop))
                     for t in self.targets.values()]
            tasks.append(asyncio.create_task(self._bus(stop)))
            try:
                await stop.wait()
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                if self._nc is not None:
                    with contextlib.suppress(*BUS_ERRORS):
                        await self._nc.close()
                await runner.cleanup()
                self.log("stopped", region=self.region, seq=self.seq, pending=len(self.pending))

    async def _bus(self, stop: asyncio.Event) -> None:
        """Connect to NATS (retrying; probing runs meanwhile), then heartbeat and publish."""
        self._nc = await connect_nats(self.spec.nats_url, f"agent-{self.region}", self.log)
        self._js = self._nc.jetstream()
        while not stop.is_set():
            try:
                await self._nc.subscribe(agent_state_subject(self.run_id, self.region),
                                         cb=self._on_state_request)
                break
            except BUS_ERRORS as exc:
                self.log("subscribe_failed", error=repr(exc))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=RETRY_PAUSE)
        self.log("bus_ready", region=self.region)
        await asyncio.gather(
            every(self.timing.heartbeat_interval, self._heartbeat, stop),
            self._publisher(stop),
        )

    # -- probing ---------------------------------------------------------------------
    def _prober(self, session: aiohttp.ClientSession, target: Target) -> Any:
        async def probe() -> None:
            await self.probe(session, target)

        return probe

    async def probe(self, session: aiohttp.ClientSession, target: Target) -> None:
        t0 = time.monotonic()
        ok = False
        try:
            async with session.get(target.url) as resp:
                await resp.read()
                ok = 200 <= resp.status < 300
                target.last_error = None if ok else f"status {resp.status}"
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            target.last_error = type(exc).__name__
        observed_at = time.time()
        target.last_probe_ms = round((time.monotonic() - t0) * 1000, 3)
        was = target.healthy
        if target.record(ok, self.timing.rise, self.timing.fall):
            self.seq += 1
            ev = Event(region=self.region, epoch=self.epoch, seq=self.seq, key=target.key,
                       value=target.value(), observed_at=observed_at)
            self.pending[target.key] = ev
            self._kick.set()
            self.log("health_changed", target=target.name, key=target.key, healthy=target.healthy,
                     was=was, seq=self.seq, error=target.last_error)

    # -- publishing ------------------------------------------------------------------
    async def _publisher(self, stop: asyncio.Event) -> None:
        global_subject = events_subject(self.run_id, self.region)
        regional_subject = regional_events_subject(self.run_id, self.region) if self.spec.regional else None
        while not stop.is_set():
            if not self.pending:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._kick.wait(), timeout=1.0)
                self._kick.clear()
                continue
            for key, ev in sorted(self.pending.items(), key=lambda kv: kv[1].seq):
                subject = regional_subject if regional_subject and is_regional_key(key) else global_subject
                try:
                    await self._js.publish(subject, ev.to_bytes(), timeout=PUBLISH_TIMEOUT,
                                           headers={"Nats-Msg-Id": f"{ev.epoch}-{ev.seq}"})
                except BUS_ERRORS as exc:
                    self.publish_failures += 1
                    if not self._publish_failing:  # one line per outage, not one per retry
                        self.log("publish_failed", key=key, seq=ev.seq, error=type(exc).__name__,
                                 pending=len(self.pending))
                    self._publish_failing = True
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=RETRY_PAUSE)
                    break
                if self._publish_failing:
                    self._publish_failing = False
                    self.log("publish_recovered", pending=len(self.pending))
                if self.pending.get(key) is ev:
                    del self.pending[key]
                self.events_published += 1
                self.log("event_published", key=key, seq=ev.seq, value=ev.value)

    async def _heartbeat(self) -> None:
        body = json.dumps({"region": self.region, "epoch": self.epoch, "at": time.time()}).encode()
        try:
            await self._nc.publish(heartbeat_subject(self.run_id, self.region), body)
        except BUS_ERRORS as exc:
            self.log("heartbeat_failed", error=type(exc).__name__)
            return
        self.heartbeats += 1

    def state(self) -> Json:
        return {
            "region": self.region,
            "epoch": self.epoch,
            "slow": {"quota": dict(self.slow["quota"]), "labels": dict(self.slow["labels"])},
            "health": {t.key: t.value() for t in self.targets.values() if t.healthy is not None},
        }

    async def _on_state_request(self, msg: Any) -> None:
        with contextlib.suppress(*BUS_ERRORS):
            await msg.respond(json.dumps(self.state(), separators=(",", ":")).encode())

    # -- HTTP ------------------------------------------------------------------------
    def status(self) -> Json:
        return {
            "region": self.region,
            "epoch": self.epoch,
            "seq": self.seq,
            "nats_connected": bool(self._nc is not None and self._nc.is_connected),
            "pending_events": len(self.pending),
            "events_published": self.events_published,
            "heartbeats": self.heartbeats,
            "targets": {
                t.name: {
                    "key": t.key,
                    "healthy": t.healthy,
                    "consecutive_fail": t.consecutive_fail,
                    "consecutive_ok": t.consecutive_ok,
                    "last_probe_ms": t.last_probe_ms,
                    "last_error": t.last_error,
                    "probes": t.probes,
                    "changed_after": t.changed_after,
                }
                for t in self.targets.values()
            },
            "slow": self.slow,
            "timing": {"probe_interval": self.timing.probe_interval,
                       "probe_timeout": self.timing.probe_timeout,
                       "fall": self.timing.fall, "rise": self.timing.rise},
        }

    def metrics(self) -> str:
        reg = f'region="{self.region}"'
        samples: list[tuple[str, str, float]] = []
        for name, attr in (("gameday_agent_probes_total", "probes"),
                           ("gameday_agent_probe_failures_total", "failures")):
            samples.extend((name, f'{reg},target="{t.name}"', getattr(t, attr))
                           for t in self.targets.values())
        samples.extend(("gameday_agent_target_healthy", f'{reg},target="{t.name}"',
                        -1 if t.healthy is None else int(t.healthy)) for t in self.targets.values())
        samples += [
            ("gameday_agent_events_published_total", reg, self.events_published),
            ("gameday_agent_publish_failures_total", reg, self.publish_failures),
            ("gameday_agent_pending_events", reg, len(self.pending)),
            ("gameday_agent_heartbeats_total", reg, self.heartbeats),
        ]
        return render_metrics(samples, help_text={
            "gameday_agent_probes_total": "Readiness probes sent, per target.",
            "gameday_agent_probe_failures_total": "Probes that failed (error, timeout or non-2xx).",
            "gameday_agent_target_healthy": "Determined health: 1 healthy, 0 unhealthy, -1 unknown.",
            "gameday_agent_events_published_total": "Health-change events acknowledged by JetStream.",
        })

    async def edit_slow(self, request: web.Request) -> web.Response:
        """``POST /admin/slow``: edit the region's slow state (labels, quota) locally."""
        body = await read_json(request)
        for part in ("labels", "quota"):
            if part in body and not isinstance(body[part], dict):
                raise web.HTTPBadRequest(text=f"{part}: expected a JSON object")
        for part in ("labels", "quota"):
            if part in body:
                self.slow[part] = dict(body[part])
        self.log("slow_changed", slow=self.slow)
        return json_response({"slow": self.slow})

    def admin_routes(self) -> list[Route]:
        return [Route("POST", SLOW_PATH, self.edit_slow)]


async def serve(spec: FederationSpec, region: str | None, instance: str | None, stop: asyncio.Event) -> None:
    """Run the agent of *region* until *stop* is set (*instance* unused)."""
    del instance
    if region is None:
        raise SystemExit("agent: --region is required")
    await Agent(spec, region, JsonLog(f"agent-{region}")).run(stop)
