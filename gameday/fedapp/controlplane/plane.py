"""The control plane assembled: its parts wired together, and the process's life cycle."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from gameday.fedapp.common import JsonLog, ReadyzFault, admin_token_from_env, connect_nats, every
from gameday.fedapp.controlplane.broadcaster import Broadcaster
from gameday.fedapp.controlplane.bus import BUS_ERRORS, Runtime, ensure_jetstream
from gameday.fedapp.controlplane.consumer import EventConsumer
from gameday.fedapp.controlplane.http import ControlPlaneHttp
from gameday.fedapp.controlplane.liveness import Liveness
from gameday.fedapp.controlplane.reconciler import Reconciler
from gameday.fedapp.controlplane.release import ReleaseController
from gameday.fedapp.controlplane.scope import Scope, scope_for
from gameday.fedapp.controlplane.serving import ServingReporter
from gameday.fedapp.controlplane.store import SnapshotStore
from gameday.fedapp.skeleton import start_http
from gameday.fedapp.spec import FederationSpec

SETUP_RETRY = 0.5
"""Seconds between attempts to set up the stream, bucket and consumer while the bus fails."""


class ControlPlane(ControlPlaneHttp):
    """One control-plane process (global tier or a region's): the parts, and :meth:`run`.

    Parts: :attr:`store` (the snapshot, compare-and-set), :attr:`consumer` (events in),
    :attr:`reconciler` (R3), :attr:`liveness` (heartbeats), :attr:`broadcaster` (R4 and
    diffs), :attr:`serving` (regional scope only); the HTTP surface is the base class.
    """

    def __init__(self, spec: FederationSpec, log: JsonLog, scope: Scope | None = None) -> None:
        self.spec = spec
        self.log = log
        self.scope = scope or scope_for(spec)
        self.ready_fault = ReadyzFault()
        topo = spec.topology
        self.rt = Runtime(log)
        self.store = SnapshotStore(self.rt, self.scope.kv_key, durable=topo.control_plane.state == "durable")
        self.broadcaster = Broadcaster(self.rt, self.scope.broadcast,
                                       delay=float(topo.control_plane.broadcast_delay))
        self.consumer = EventConsumer(self.rt, self.scope, self.store, self._ensure_jetstream,
                                      event_delay=topo.defects.cp_event_delay)
        self.reconciler = Reconciler(self.rt, self.scope, self.store, run_id=spec.run_id,
                                     primary=topo.primary_region,
                                     interval=topo.defects.reconcile_every or topo.timing.reconcile_interval,
                                     auto_merge=topo.defects.slow_auto_merge)
        self.liveness = Liveness(self.rt, self.scope, self.store, self.reconciler,
                                 timeout=topo.timing.region_timeout)
        self.serving = (ServingReporter(self.rt, self.scope.region, run_id=spec.run_id)
                        if self.scope.region is not None else None)
        self.store.on_bump.append(self.broadcaster.schedule)
        if self.serving is not None:
            self.store.on_bump.append(self.serving.on_bump)
        self._subscribed = False
        # The federation's own release mechanism (R12), in the global tier only.
        self.release = (ReleaseController(spec, log, admin_token_from_env) if self.scope.region is None else None)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve HTTP, connect to the bus, set up, and run the loops until *stop* is set."""
        rt = self.rt
        rt.stop = stop
        ep = self.scope.endpoint
        name = "controlplane" if self.scope.region is None else f"controlplane-{self.scope.region}"
        runner = await start_http(self, ep.host, ep.port, self.log, self.spec.admin.get(name))
        self.log("started", host=ep.host, port=ep.port, state_mode=self.store.mode,
                 broadcast_delay=self.broadcaster.delay, scope=self.scope.name, layout=self.scope.layout)
        tasks: list[asyncio.Task[None]] = []
        try:
            nc = await rt.until_stop(connect_nats(
                self.spec.nats_url, f"controlplane-{self.scope.name}", self.log,
                reconnected_cb=self._on_reconnected, disconnected_cb=self._on_disconnected,
            ))
            if nc is None:
                return
            rt.nc, rt.js = nc, nc.jetstream()
            if not await self._setup_with_retry():
                return
            rt.ready = True
            self.log("ready", version=self.store.snapshot.version, state_mode=self.store.mode)
            self.reconciler.kick()  # start-up sync
            tasks = [
                asyncio.create_task(self.consumer.consume_loop()),
                asyncio.create_task(self.consumer.backlog_loop()),
                asyncio.create_task(self.reconciler.loop()),
                asyncio.create_task(every(self.spec.topology.timing.heartbeat_interval,
                                          self.broadcaster.heartbeat, stop)),
            ]
            if self.scope.liveness:
                tasks.append(asyncio.create_task(self.liveness.loop()))
            if self.serving is not None:
                self.serving.note(self.store.snapshot)  # a restarted one tells the global tier again
                tasks.append(asyncio.create_task(self.serving.loop()))
            await stop.wait()
        finally:
            rt.ready = False
            spawned = rt.spawned()
            for t in [*tasks, *spawned]:
                t.cancel()
            await asyncio.gather(*tasks, *spawned, return_exceptions=True)
            if rt.nc is not None:
                with contextlib.suppress(*BUS_ERRORS):
                    await rt.nc.close()
            await runner.cleanup()
            self.log("stopped", version=self.store.snapshot.version)

    async def _setup_with_retry(self) -> bool:
        while not self.rt.stop.is_set():
            try:
                await self.setup()
            except BUS_ERRORS as exc:
                self.log("setup_failed", error=repr(exc))
                await self.rt.pause(SETUP_RETRY)
            else:
                return True
        return False

    async def setup(self) -> None:
        """Ensure the stream and bucket, load the state, bind the pull consumer, subscribe."""
        self.store.kv = await self._ensure_jetstream()
        if self.store.durable and not self.store.loaded and await self.store.load():
            self.broadcaster.resume(self.store.data)  # announced by the previous incarnation
        await self.consumer.bind()
        if not self._subscribed:
            await self.rt.nc.subscribe(self.scope.heartbeats, cb=self.liveness.on_heartbeat)
            await self.rt.nc.subscribe(self.scope.diff, cb=self.broadcaster.on_diff_request)
            self._subscribed = True

    async def _ensure_jetstream(self) -> Any:
        return await ensure_jetstream(self.rt.js, self.spec.run_id, stream=self.scope.stream,
                                      subjects=self.scope.stream_subjects)

    async def _on_disconnected(self) -> None:
        self.log("nats_disconnected")

    async def _on_reconnected(self) -> None:
        self.log("nats_reconnected")
        self.liveness.restart_clocks()
        self.reconciler.kick()


async def serve(spec: FederationSpec, region: str | None, instance: str | None, stop: asyncio.Event) -> None:
    """Run the federation control plane (the global tier), or with *region* that region's
    control plane (regional layout), until *stop* is set (*instance* unused)."""
    del instance
    try:
        scope = scope_for(spec, region)
    except (ValueError, KeyError) as exc:
        raise SystemExit(str(exc)) from exc
    await ControlPlane(spec, JsonLog("controlplane" if region is None else f"controlplane-{region}"), scope).run(stop)
