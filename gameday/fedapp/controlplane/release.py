"""The reference federation's own release mechanism (R12): a controller in the global control
plane that rolls a new app version out region by region.

``POST /admin/release`` ``{"version": "v2", "restart_s": 0.3}`` starts a release (202; 409
while one runs); ``GET /release`` says how it goes: ``{"version", "state": idle | running |
done | failed, "order", "steps": [{"region", "started", "done"}], "error"}`` (times are the
control plane's monotonic clock).

The order is the federation's: the lowest-weight regions first, the primary region last. In
each region one instance at a time is told to upgrade (``POST /admin/fault`` ``{"upgrade":
{"version", "restart_s"}}``: it restarts, unready for ``restart_s``, then serves the new
version), and the next is started only once that one serves the new version and is ready
again; the next region only once every instance of this one does. gameday does not take the
controller's word for any of it: R12 judges what each instance served over time.

The defect ``release_all_at_once`` (a negative control) upgrades every instance of every region
at the same moment.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from gameday.fedapp.common import JsonLog
from gameday.fedapp.spec import Endpoint, FederationSpec, InstanceSpec
from gameday.fedapp.wire import Json

INSTANCE_TIMEOUT = 20.0
"""Seconds an instance has to serve the new version and be ready again after its upgrade."""
POLL = 0.05


def release_order(spec: FederationSpec) -> list[str]:
    """The regions in the order this controller releases them: lowest weight first (name for a
    tie), the primary region last."""
    primary = spec.topology.primary_region
    return [r.name for r in sorted(spec.regions, key=lambda r: (r.name == primary, r.weight, r.name))]


class ReleaseController:
    """Runs at most one release at a time (see the module docstring)."""

    def __init__(self, spec: FederationSpec, log: JsonLog, token: Callable[[], str | None]) -> None:
        self.spec = spec
        self.log = log
        self.token = token
        self.all_at_once = spec.topology.defects.release_all_at_once
        self.state: dict[str, Any] = {"version": None, "state": "idle", "order": release_order(spec), "steps": [],
                                      "error": None}
        self._task: asyncio.Task[None] | None = None

    def start(self, version: str, restart_s: float) -> bool:
        """Start releasing *version*; False if a release is running."""
        if self._task is not None and not self._task.done():
            return False
        self.state = {"version": version, "state": "running", "order": release_order(self.spec), "steps": [],
                      "error": None, "all_at_once": self.all_at_once}
        self._task = asyncio.get_running_loop().create_task(self._run(version, restart_s))
        return True

    async def _run(self, version: str, restart_s: float) -> None:
        self.log("release_started", version=version, order=self.state["order"], all_at_once=self.all_at_once)
        try:
            timeout = aiohttp.ClientTimeout(total=2.0)
            async with aiohttp.ClientSession(timeout=timeout) as http:
                if self.all_at_once:
                    await self._all_at_once(http, version, restart_s)
                else:
                    for region in self.state["order"]:
                        step = {"region": region, "started": time.monotonic(), "done": None}
                        self.state["steps"].append(step)
                        for inst in self.spec.region(region).instances:
                            await self._upgrade(http, inst, version, restart_s)
                        step["done"] = time.monotonic()
                        self.log("release_region_done", version=version, region=region)
        except Exception as exc:  # noqa: BLE001  (said in the status and the log; the release stops)
            self.state.update(state="failed", error=f"{type(exc).__name__}: {exc}")
            self.log("release_failed", version=version, error=self.state["error"])
            return
        self.state["state"] = "done"
        self.log("release_done", version=version)

    async def _all_at_once(self, http: aiohttp.ClientSession, version: str, restart_s: float) -> None:
        now = time.monotonic()
        steps = [{"region": r, "started": now, "done": None} for r in self.state["order"]]
        self.state["steps"] = steps
        await asyncio.gather(*(self._upgrade(http, i, version, restart_s)
                               for r in self.state["order"] for i in self.spec.region(r).instances))
        for step in steps:
            step["done"] = time.monotonic()

    def _admin(self, inst: InstanceSpec) -> Endpoint:
        return self.spec.admin.get(f"app-{inst.name}", inst.endpoint)

    async def _upgrade(self, http: aiohttp.ClientSession, inst: InstanceSpec, version: str,
                       restart_s: float) -> None:
        admin = self._admin(inst)
        token = self.token()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with http.post(f"http://{admin.host}:{admin.port}/admin/fault", headers=headers,
                             json={"upgrade": {"version": version, "restart_s": restart_s}}) as resp:
            if resp.status != 200:
                raise RuntimeError(f"{inst.name} refused the upgrade: HTTP {resp.status} {await resp.text()}")
        ep = inst.endpoint
        deadline = time.monotonic() + INSTANCE_TIMEOUT
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL)
            try:
                async with http.get(f"http://{ep.host}:{ep.port}/status") as resp:
                    status: Json = await resp.json()
                async with http.get(f"http://{ep.host}:{ep.port}/readyz") as resp:
                    ready = resp.status == 200
            except (aiohttp.ClientError, TimeoutError, ValueError):
                continue
            if status.get("app_version") == version and ready:
                return
        raise RuntimeError(f"{inst.name} did not serve {version} ready within {INSTANCE_TIMEOUT:g} s")
