"""The workload: one app instance with a declared capacity.

Endpoints:

``/work`` (any method)
    ``{"region", "instance", "ts"}`` with ``X-Served-By: <region>/<instance>``;
    ``?ms=N`` sleeps N ms first (simulated work). Requests are counted in a sliding
    1 s window; when the window already holds ``capacity_rps`` accepted requests the
    answer is 503 with ``Retry-After: 1`` (counted as rejected, not in the window).
``POST /data/<id>`` (a federation with a state layer, :mod:`gameday.fedapp.store`)
    Store write *id* (``[A-Za-z0-9_-]``, at most 64) with the request body; answered only once
    the store acknowledged it: 201 ``{"id", "region", "instance", "seq", "stream",
    "duplicate"}``. 503 ``{"written": false}``: nothing was stored; 504 ``{"written": null}``:
    no acknowledgement in time, it may or may not have been stored.
``GET /data/<id>``
    200 ``{"id", "region", "found": true, "seq"}`` when stored, 404 ``{"id", "region", "found":
    false}`` when not (read where the read-back reads: the primary, or a sync stream's leader).
``POST /data/_lookup``
    ``{"ids": [...]}`` (at most 5000) -> ``{"found": {id: seq}, "failed": [ids whose read
    failed]}``; an id in neither is not stored.
``POST /tasks/<id>``
    Add task *id* to the background workers' queue: 201 once the queue stored it (503, 504 as for writes).
``POST /tasks/_processed``
    ``{"ids": [...]}`` -> ``{"processed": {id: times processed}}`` (absent: never).
``/livez``, ``/readyz`` (the skeleton's, :mod:`gameday.fedapp.skeleton`)
    Separate on purpose (R11): liveness says "restart me", readiness "send me traffic".
``/status``, ``/metrics``
    Requests, rejections, utilisation (accepted requests in the last 1 s / capacity).
``POST /admin/fault``
    ``{"readyz": "ok"|"fail"|"flap", ...}`` (see :class:`ReadyzFault`) and
    ``{"livez": "ok"|"fail"}``; ``{"upgrade": {"version": V, "restart_s": S}}``, one release
    step (:mod:`gameday.fedapp.controlplane.release`): the instance restarts, unready and
    answering ``/work`` with 503 for S seconds, then serves version V (``app_version`` in
    ``/status``, ``X-App-Version`` on ``/work``).
"""

from __future__ import annotations

import asyncio
import collections
import re
import time
from collections.abc import Awaitable

from aiohttp import web

from gameday.fedapp.common import JsonLog, ReadyzFault, json_response, read_json, render_metrics
from gameday.fedapp.skeleton import HttpComponent, Route, start_http
from gameday.fedapp.spec import FederationSpec, InstanceSpec, RegionSpec
from gameday.fedapp.store import DataStore, StoreUnavailable
from gameday.fedapp.wire import SERVED_BY, Json

INITIAL_VERSION = "v1"
"""The app version every instance serves until a release changes it."""
APP_VERSION = "X-App-Version"
MAX_RESTART_S = 30.0
WINDOW = 1.0
"""Seconds of the sliding window capacity is measured over."""
WRITE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_LOOKUP = 5000

_HELP = {
    "gameday_app_requests_total": "Work requests received (accepted and rejected)",
    "gameday_app_rejected_total": "Work requests rejected with 503 because the instance was over capacity",
    "gameday_app_utilisation": "Accepted requests in the last second / declared capacity",
    "gameday_app_capacity_rps": "Declared capacity in requests per second",
}


class App(HttpComponent):
    """One app instance's state and handlers."""

    def __init__(self, region: RegionSpec, inst: InstanceSpec, log: JsonLog, store: DataStore | None = None,
                 *, livez_follows_readyz: bool = False) -> None:
        self.region = region
        self.livez_follows_readyz = livez_follows_readyz
        """The R11 defect: ``/livez`` fails whenever the instance is unready."""
        self.store = store
        self.inst = inst
        self.log = log
        self.served_by = f"{region.name}/{inst.name}"
        self.capacity = inst.capacity_rps
        self.window: collections.deque[float] = collections.deque()
        self.requests_total = 0
        self.rejected_total = 0
        self.ready_fault = ReadyzFault()
        self.livez_failing = False
        self._version = INITIAL_VERSION
        self._next_version: str | None = None
        self._restarted_at = 0.0
        """Until when (monotonic) the instance is restarting into :attr:`_next_version`."""

    @property
    def version(self) -> str:
        """The version served now (a restart into the next one completes when its time is up)."""
        if self._next_version is not None and time.monotonic() >= self._restarted_at:
            self._version, self._next_version = self._next_version, None
        return self._version

    def restarting(self) -> bool:
        return self._next_version is not None and time.monotonic() < self._restarted_at

    def unready_reason(self) -> str | None:
        return f"restarting into {self._next_version}" if self.restarting() else None

    def _in_window(self, now: float) -> int:
        w = self.window
        while w and w[0] <= now - WINDOW:
            w.popleft()
        return len(w)

    def utilisation(self) -> float:
        return self._in_window(time.monotonic()) / self.capacity

    async def work(self, request: web.Request) -> web.Response:
        now = time.monotonic()
        self.requests_total += 1
        if self.restarting():
            return json_response({"error": f"restarting into {self._next_version}", "region": self.region.name,
                                  "instance": self.inst.name}, status=503,
                                 headers={SERVED_BY: self.served_by, APP_VERSION: self._version})
        if self._in_window(now) >= self.capacity:
            self.rejected_total += 1
            return json_response(
                {"error": "over capacity", "region": self.region.name, "instance": self.inst.name,
                 "capacity_rps": self.capacity},
                status=503, headers={"Retry-After": "1", SERVED_BY: self.served_by},
            )
        self.window.append(now)
        ms = request.query.get("ms")
        if ms is not None:
            try:
                delay = float(ms) / 1000
            except ValueError:
                raise web.HTTPBadRequest(text=f"ms: got {ms!r}, expected a number of milliseconds") from None
            if delay > 0:
                await asyncio.sleep(delay)
        return json_response({"region": self.region.name, "instance": self.inst.name, "ts": time.time()},
                             headers={SERVED_BY: self.served_by, APP_VERSION: self.version})

    # -- the data path (a state layer only) -------------------------------------------
    def _store(self) -> DataStore:
        if self.store is None:
            raise web.HTTPNotFound(text="this federation has no state layer")
        return self.store

    def _write_id(self, request: web.Request) -> str:
        wid = request.match_info["wid"]
        if not WRITE_ID.fullmatch(wid):
            raise web.HTTPBadRequest(text=f"write id: got {wid[:80]!r}, expected 1-64 of [A-Za-z0-9_-]")
        return wid

    async def write(self, request: web.Request) -> web.Response:
        store, wid = self._store(), self._write_id(request)
        body = await request.read()
        return await self._acknowledged(wid, store.write(wid, body[:4096]))

    async def _acknowledged(self, wid: str, stored: Awaitable[Json]) -> web.Response:
        """201 with the store's acknowledgement of *wid* once *stored* returns it; 503 nothing
        stored, 504 no acknowledgement in time (it may or may not be stored)."""
        where = {"id": wid, "region": self.region.name, "instance": self.inst.name}
        headers = {SERVED_BY: self.served_by}
        try:
            ack = await stored
        except StoreUnavailable as exc:
            return json_response({**where, "written": False, "error": str(exc)}, status=503, headers=headers)
        except TimeoutError as exc:
            return json_response({**where, "written": None, "error": str(exc)}, status=504, headers=headers)
        return json_response({**where, **ack}, status=201, headers=headers)

    async def read(self, request: web.Request) -> web.Response:
        store, wid = self._store(), self._write_id(request)
        where = {"id": wid, "region": self.region.name}
        try:
            stored = await store.read(wid)
        except StoreUnavailable as exc:
            return json_response({**where, "error": str(exc)}, status=503)
        if stored is None:
            return json_response({**where, "found": False}, status=404)
        return json_response({**where, "found": True, "seq": stored})

    async def enqueue(self, request: web.Request) -> web.Response:
        store, tid = self._store(), self._write_id(request)
        return await self._acknowledged(tid, store.enqueue(tid))

    async def processed(self, request: web.Request) -> web.Response:
        store, ids = self._store(), await self._ids(request)
        try:
            counts = await store.processed(ids)
        except StoreUnavailable as exc:
            return json_response({"error": str(exc)}, status=503)
        return json_response({"processed": counts, "region": self.region.name})

    async def _ids(self, request: web.Request) -> list[str]:
        body = await read_json(request)
        ids = body.get("ids")
        if not isinstance(ids, list) or len(ids) > MAX_LOOKUP or not all(
                isinstance(i, str) and WRITE_ID.fullmatch(i) for i in ids):
            raise web.HTTPBadRequest(text=f"ids: expected a list of at most {MAX_LOOKUP} write ids")
        return ids

    async def lookup(self, request: web.Request) -> web.Response:
        store, ids = self._store(), await self._ids(request)
        try:
            found, failed = await store.lookup(ids)
        except StoreUnavailable as exc:
            return json_response({"error": str(exc)}, status=503)
        return json_response({"found": found, "failed": failed, "region": self.region.name})

    def live(self) -> bool:
        if self.livez_follows_readyz and self.ready_fault.failing():
            return False  # the R11 defect: liveness coupled to readiness
        return not self.livez_failing

    def status(self) -> Json:
        return {
            "role": "app",
            "region": self.region.name,
            "instance": self.inst.name,
            "capacity_rps": self.capacity,
            "app_version": self.version,
            "restarting": self.restarting(),
            "requests_total": self.requests_total,
            "rejected_total": self.rejected_total,
            "utilisation": round(self.utilisation(), 4),
            "faults": self.fault_state(),
            **({"store": self.store.status()} if self.store is not None else {}),
        }

    def metrics(self) -> str:
        lab = f'region="{self.region.name}",instance="{self.inst.name}"'
        return render_metrics(
            [
                ("gameday_app_requests_total", lab, self.requests_total),
                ("gameday_app_rejected_total", lab, self.rejected_total),
                ("gameday_app_utilisation", lab, round(self.utilisation(), 4)),
                ("gameday_app_capacity_rps", lab, self.capacity),
            ],
            _HELP,
        )

    def apply_fault(self, body: Json) -> None:
        livez = body.get("livez")
        if livez not in (None, "ok", "fail"):
            raise ValueError(f"livez: got {livez!r}, expected 'ok' or 'fail'")
        upgrade = body.get("upgrade")
        if upgrade is not None:
            version = upgrade.get("version") if isinstance(upgrade, dict) else None
            restart_s = upgrade.get("restart_s", 0.3) if isinstance(upgrade, dict) else None
            if not isinstance(version, str) or not version or len(version) > 64:
                raise ValueError(f"upgrade.version: got {version!r}, expected a version string (at most 64 chars)")
            if isinstance(restart_s, bool) or not isinstance(restart_s, int | float) \
                    or not 0 <= restart_s <= MAX_RESTART_S:
                raise ValueError(f"upgrade.restart_s: got {restart_s!r}, expected 0-{MAX_RESTART_S:g} seconds")
        if livez is not None:
            self.livez_failing = livez == "fail"
        if upgrade is not None:
            _ = self.version  # a restart already over completes first
            self._next_version, self._restarted_at = version, time.monotonic() + float(restart_s or 0.0)
            self.log("upgrade", version=version, restart_s=restart_s)

    def fault_state(self) -> Json:
        return {"readyz": self.ready_fault.describe(), "livez": "fail" if self.livez_failing else "ok"}

    def public_routes(self) -> list[Route]:
        routes = [Route("*", "/work", self.work)]
        if self.store is not None:
            routes += [Route("POST", "/data/_lookup", self.lookup), Route("POST", "/data/{wid}", self.write),
                       Route("GET", "/data/{wid}", self.read), Route("POST", "/tasks/_processed", self.processed),
                       Route("POST", "/tasks/{wid}", self.enqueue)]
        return routes


async def serve(spec: FederationSpec, region: str | None, instance: str | None, stop: asyncio.Event) -> None:
    """Run app instance *instance* (e.g. ``a-2``) until *stop* is set."""
    if not instance:
        raise SystemExit("app: --instance is required")
    reg, inst = spec.instance(instance)
    log = JsonLog(f"app-{instance}")
    store = DataStore(spec, reg, log) if spec.topology.state is not None else None
    app = App(reg, inst, log, store, livez_follows_readyz=reg.name in spec.topology.defects.livez_follows_readyz)
    runner = await start_http(app, inst.endpoint.host, inst.endpoint.port, log, spec.admin.get(f"app-{instance}"))
    log("started", endpoint=inst.endpoint.url, capacity_rps=inst.capacity_rps)
    store_task = asyncio.create_task(store.run(stop)) if store is not None else None
    try:
        await stop.wait()
    finally:
        if store_task is not None:
            await asyncio.gather(store_task, return_exceptions=True)
        await runner.cleanup()
        log("stopped")
