"""The workload: one app instance with a declared capacity.

Endpoints:

``/work`` (any method)
    ``{"region", "instance", "ts"}`` with ``X-Served-By: <region>/<instance>``;
    ``?ms=N`` sleeps N ms first (simulated work). Requests are counted in a sliding
    1 s window; when the window already holds ``capacity_rps`` accepted requests the
    answer is 503 with ``Retry-After: 1`` (counted as rejected, not in the window).
``/livez``, ``/readyz`` (the skeleton's, :mod:`gameday.fedapp.skeleton`)
    Separate on purpose (R11): liveness says "restart me", readiness "send me traffic".
``/status``, ``/metrics``
    Requests, rejections, utilisation (accepted requests in the last 1 s / capacity).
``POST /admin/fault``
    ``{"readyz": "ok"|"fail"|"flap", ...}`` (see :class:`ReadyzFault`) and
    ``{"livez": "ok"|"fail"}``.
"""

from __future__ import annotations

import asyncio
import collections
import time

from aiohttp import web

from gameday.fedapp.common import JsonLog, ReadyzFault, json_response, render_metrics
from gameday.fedapp.skeleton import HttpComponent, Route, start_http
from gameday.fedapp.spec import FederationSpec, InstanceSpec, RegionSpec
from gameday.fedapp.wire import SERVED_BY, Json

WINDOW = 1.0
"""Seconds of the sliding window capacity is measured over."""

_HELP = {
    "gameday_app_requests_total": "Work requests received (accepted and rejected)",
    "gameday_app_rejected_total": "Work requests rejected with 503 because the instance was over capacity",
    "gameday_app_utilisation": "Accepted requests in the last second / declared capacity",
    "gameday_app_capacity_rps": "Declared capacity in requests per second",
}


class App(HttpComponent):
    """One app instance's state and handlers."""

    def __init__(self, region: RegionSpec, inst: InstanceSpec, log: JsonLog) -> None:
        self.region = region
        self.inst = inst
        self.log = log
        self.served_by = f"{region.name}/{inst.name}"
        self.capacity = inst.capacity_rps
        self.window: collections.deque[float] = collections.deque()
        self.requests_total = 0
        self.rejected_total = 0
        self.ready_fault = ReadyzFault()
        self.livez_failing = False

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
                             headers={SERVED_BY: self.served_by})

    def live(self) -> bool:
        return not self.livez_failing

    def status(self) -> Json:
        return {
            "role": "app",
            "region": self.region.name,
            "instance": self.inst.name,
            "capacity_rps": self.capacity,
            "requests_total": self.requests_total,
            "rejected_total": self.rejected_total,
            "utilisation": round(self.utilisation(), 4),
            "faults": self.fault_state(),
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
        if livez is not None:
            self.livez_failing = livez == "fail"

    def fault_state(self) -> Json:
        return {"readyz": self.ready_fault.describe(), "livez": "fail" if self.livez_failing else "ok"}

    def public_routes(self) -> list[Route]:
        return [Route("*", "/work", self.work)]


async def serve(spec: FederationSpec, region: str | None, instance: str | None, stop: asyncio.Event) -> None:
    """Run app instance *instance* (e.g. ``a-2``) until *stop* is set."""
    if not instance:
        raise SystemExit("app: --instance is required")
    reg, inst = spec.instance(instance)
    log = JsonLog(f"app-{instance}")
    app = App(reg, inst, log)
    runner = await start_http(app, inst.endpoint.host, inst.endpoint.port, log, spec.admin.get(f"app-{instance}"))
    log("started", endpoint=inst.endpoint.url, capacity_rps=inst.capacity_rps)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        log("stopped")
