"""The control plane's HTTP surface: ``/status``, ``/metrics``, ``/snapshot``, readiness,
the fault hook (``{"broadcast_delay": D}`` and the readiness fault of
:class:`~gameday.fedapp.common.ReadyzFault`) and ``POST /admin/reconcile``.

:class:`ControlPlaneHttp` reads the parts; it changes nothing but the broadcast delay and
starts nothing but an admin reconciliation.
"""

from __future__ import annotations

import math

from aiohttp import web

from gameday.fedapp.common import ReadyzFault, json_response, read_json, render_metrics
from gameday.fedapp.controlplane.broadcaster import Broadcaster
from gameday.fedapp.controlplane.bus import Runtime
from gameday.fedapp.controlplane.consumer import EventConsumer
from gameday.fedapp.controlplane.liveness import Liveness
from gameday.fedapp.controlplane.reconciler import Reconciler
from gameday.fedapp.controlplane.release import ReleaseController
from gameday.fedapp.controlplane.scope import Scope
from gameday.fedapp.controlplane.store import SnapshotStore
from gameday.fedapp.skeleton import HttpComponent, Route
from gameday.fedapp.wire import RECONCILE_PATH, Json

MAX_BROADCAST_DELAY = 3600.0
"""The largest ``broadcast_delay`` the fault hook accepts, in seconds."""

HELP = {
    "gameday_cp_version": "Global snapshot version (R5).",
    "gameday_cp_announced_version": "Last version announced on the broadcast subject.",
    "gameday_cp_events_consumed_total": "Agent events consumed from JetStream.",
    "gameday_cp_events_ignored_total": "Consumed events that changed nothing (duplicate, stale, no-op).",
    "gameday_cp_backlog": "Events pending on the cp consumer (R13).",
    "gameday_cp_broadcasts_total": "Version broadcasts published.",
    "gameday_cp_processing_latency_seconds": "Event observed_at to applied (R13).",
}


def _q(v: float) -> float | None:
    return None if math.isnan(v) else round(v, 6)


class ControlPlaneHttp(HttpComponent):
    """The HTTP hooks of :class:`~gameday.fedapp.skeleton.HttpComponent` over the parts a
    subclass sets (:class:`~gameday.fedapp.controlplane.plane.ControlPlane` does)."""

    rt: Runtime
    scope: Scope
    store: SnapshotStore
    consumer: EventConsumer
    reconciler: Reconciler
    broadcaster: Broadcaster
    liveness: Liveness
    ready_fault: ReadyzFault
    release: ReleaseController | None = None

    def status(self) -> Json:
        snap, cons, bc = self.store.snapshot, self.consumer, self.broadcaster
        return {
            "version": snap.version,
            "scope": self.scope.name,
            "layout": self.scope.layout,
            "announced_version": bc.announced_version,
            "last_change_at": self.store.last_change_at,
            "state_mode": self.store.mode,
            "ready": self.rt.ready,
            "nats_connected": self.rt.connected,
            "broadcast_delay": bc.delay,
            "consumer_backlog": cons.backlog,
            "consumer_ack_pending": cons.ack_pending,
            "events_consumed": cons.events_consumed,
            "events_ignored": cons.events_ignored,
            "events_bad": cons.events_bad,
            "processing_latency_p50_s": _q(cons.latency.quantile(0.5)),
            "processing_latency_p99_s": _q(cons.latency.quantile(0.99)),
            "full_snapshot_bytes": len(snap.diff_since(0).to_bytes()),
            "entries": len(snap.entries),
            "regions_alive": self.liveness.regions_alive(),
            "reconcile": self.reconciler.status(),
            "broadcasts": dict(bc.broadcasts),
            "diffs_served": dict(bc.diffs_served),
            "cas_conflicts": self.store.cas_conflicts,
            "revision": self.store.revision,
            "faults": self.fault_state(),
        }

    def metrics(self) -> str:
        bc = self.broadcaster
        samples: list[tuple[str, str, float]] = [
            ("gameday_cp_version", "", self.store.snapshot.version),
            ("gameday_cp_announced_version", "", bc.announced_version),
            ("gameday_cp_events_consumed_total", "", self.consumer.events_consumed),
            ("gameday_cp_events_ignored_total", "", self.consumer.events_ignored),
            ("gameday_cp_backlog", "", self.consumer.backlog),
            ("gameday_cp_broadcasts_total", 'kind="version"', bc.broadcasts["version"]),
            ("gameday_cp_broadcasts_total", 'kind="heartbeat"', bc.broadcasts["heartbeat"]),
            ("gameday_cp_reconcile_passes_total", "", self.reconciler.passes),
            ("gameday_cp_cas_conflicts_total", "", self.store.cas_conflicts),
            ("gameday_cp_broadcast_delay_seconds", "", bc.delay),
        ]
        for r, alive in self.liveness.regions_alive().items():
            samples.append(("gameday_cp_region_alive", f'region="{r}"', 1 if alive else 0))
        return render_metrics(samples, help_text=HELP,
                              histograms={"gameday_cp_processing_latency_seconds": self.consumer.latency})

    def unready_reason(self) -> str | None:
        return None if self.rt.ready else "starting"

    def ready_detail(self) -> Json:
        return {"version": self.store.snapshot.version}

    def apply_fault(self, body: Json) -> None:
        if "broadcast_delay" in body:
            try:
                delay = float(body["broadcast_delay"])
            except (ValueError, TypeError) as exc:
                raise ValueError(f"broadcast_delay: {exc}") from exc
            if not 0 <= delay <= MAX_BROADCAST_DELAY:
                raise ValueError(f"broadcast_delay: got {delay}, expected 0..3600 seconds")
            self.broadcaster.delay = delay

    def fault_state(self) -> Json:
        return {"broadcast_delay": self.broadcaster.delay, "readyz": self.ready_fault.describe()}

    async def _snapshot(self, _: web.Request) -> web.Response:
        s = self.store.snapshot
        return json_response({"version": s.version, "announced_version": self.broadcaster.announced_version,
                              "entries": s.entries, "changed_at": s.changed_at})

    async def _reconcile(self, _: web.Request) -> web.Response:
        if not self.rt.ready:
            return json_response({"error": "not ready"}, status=503)
        return json_response(await self.reconciler.reconcile(reason="admin"))

    def admin_routes(self) -> list[Route]:
        routes = [Route("POST", RECONCILE_PATH, self._reconcile)]
        if self.release is not None:
            routes.append(Route("POST", "/admin/release", self._release))
        return routes

    def public_routes(self) -> list[Route]:
        routes = [Route("GET", "/snapshot", self._snapshot)]
        if self.release is not None:
            routes.append(Route("GET", "/release", self._release_status))
        return routes

    async def _release(self, request: web.Request) -> web.Response:
        assert self.release is not None
        body = await read_json(request)
        version, restart_s = body.get("version"), body.get("restart_s", 0.3)
        if not isinstance(version, str) or not version or len(version) > 64:
            raise web.HTTPBadRequest(text=f"version: got {version!r}, expected a version string")
        if isinstance(restart_s, bool) or not isinstance(restart_s, int | float) or not 0 <= restart_s <= 30:
            raise web.HTTPBadRequest(text=f"restart_s: got {restart_s!r}, expected 0-30 seconds")
        if not self.release.start(version, float(restart_s)):
            return json_response({"error": "a release is running", **self.release.state}, status=409)
        return json_response(self.release.state, status=202)

    async def _release_status(self, _: web.Request) -> web.Response:
        assert self.release is not None
        return json_response(self.release.state)
