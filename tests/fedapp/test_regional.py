"""The regional control-plane layout (R14) as real processes against a real JetStream server.

The default topology forced to ``control_plane.layout: regional``: the global tier and
the control planes of regions a and b, driven through their public surfaces only (events
on JetStream, their HTTP endpoints). What a regional event may and may not reach, what the
global tier learns of it, and that the regional version survives a restart (R5).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from typing import Any

import httpx
import nats
import pytest

from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import (
    Event,
    events_subject,
    gateway_key,
    instance_key,
    regional_events_subject,
    serving_key,
)
from gameday.model.topology import generated_topology, load_topology
from tests.fedapp.helpers import Starter, run, until

A1, A2 = instance_key("a", "a-1"), instance_key("a", "a-2")


@pytest.fixture
def spec(make_spec: Callable[..., FederationSpec]) -> FederationSpec:
    return make_spec(timing={"region_timeout": 60.0}, control_plane={"layout": "regional"})


class Proc:
    """One control-plane process (global tier or a region's) and its HTTP status."""

    def __init__(self, component: Starter, http: httpx.AsyncClient, url: str, region: str | None) -> None:
        self.component, self.http, self.url, self.region = component, http, url, region
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        self.proc = self.component("controlplane", region=self.region)

        async def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"controlplane {self.region or 'global'} exited with {self.proc.returncode}")
            try:
                return (await self.http.get(f"{self.url}/readyz")).status_code == 200
            except httpx.HTTPError:
                return False

        await until(ready, 20, f"controlplane {self.region or 'global'} /readyz")

    async def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        await asyncio.to_thread(self.proc.wait, 5)
        assert self.proc.returncode == 0

    async def status(self) -> dict[str, Any]:
        r = await self.http.get(f"{self.url}/status")
        r.raise_for_status()
        return dict(r.json())

    async def entries(self) -> dict[str, Any]:
        r = await self.http.get(f"{self.url}/snapshot")
        r.raise_for_status()
        return dict(r.json()["entries"])

    async def wait_version(self, version: int, timeout: float = 10) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            st = await self.status()
            return st if st["version"] == version else None

        return dict(await until(check, timeout, f"controlplane {self.region or 'global'} at v{version}"))


def _ev(key: str, seq: int, healthy: bool, region: str = "a") -> Event:
    value: dict[str, Any] = {"healthy": healthy, "weight": 1} if "/instance/" in key else {"healthy": healthy}
    return Event(region=region, epoch=1000, seq=seq, key=key, value=value, observed_at=0.0)


def test_the_layout_follows_the_region_count_unless_set() -> None:
    assert load_topology().layout == "global"
    assert generated_topology(10).layout == "global"
    assert generated_topology(11).layout == "regional"
    assert generated_topology(11, layout="global").layout == "global"
    assert generated_topology(3, layout="regional").layout == "regional"
    names = [r.name for r in generated_topology(12).regions]
    assert names[0] == "r01" and names[-1] == "r12" and len(set(names)) == 12


def test_a_regional_event_stays_in_its_region_and_the_global_tier_hears_only_serving(
    nats_server: FederationSpec, component: Starter
) -> None:
    spec = nats_server
    a, b = spec.region("a").control_plane, spec.region("b").control_plane
    assert a is not None and b is not None

    async def body() -> None:
        async with httpx.AsyncClient(timeout=2) as http:
            glob = Proc(component, http, spec.control_plane.url, None)
            cp_a = Proc(component, http, a.url, "a")
            cp_b = Proc(component, http, b.url, "b")
            for p in (glob, cp_a, cp_b):
                await p.start()
            nc = await nats.connect(spec.nats_url)
            try:
                js = nc.jetstream()
                g0, b0 = (await glob.status())["version"], (await cp_b.status())["version"]
                # a-1 healthy: region a's snapshot moves, and a starts serving (one global fact).
                await js.publish(regional_events_subject(spec.run_id, "a"), _ev(A1, 1, True).to_bytes())
                st = await cp_a.wait_version(1)
                assert st["scope"] == "a" and st["layout"] == "regional"
                await until(lambda: _entry(glob, serving_key("a")), 10, "the global tier hears a serving")
                # a-2 healthy, then a-1 unhealthy: the region keeps serving, the global tier hears nothing.
                g1 = (await glob.status())["version"]
                await js.publish(regional_events_subject(spec.run_id, "a"), _ev(A2, 2, True).to_bytes())
                await js.publish(regional_events_subject(spec.run_id, "a"), _ev(A1, 3, False).to_bytes())
                await cp_a.wait_version(3)
                await asyncio.sleep(0.5)
                assert (await glob.status())["version"] == g1, "an instance change leaked into the global snapshot"
                assert g1 == g0 + 1, f"expected one global change (a serving) for a's first instance: v{g0} -> v{g1}"
                assert (await cp_b.status())["version"] == b0, "region b's snapshot moved for region a's event"
                assert not [k for k in await glob.entries() if "/instance/" in k]
                # The last healthy instance goes: a stops serving, which is global routing.
                await js.publish(regional_events_subject(spec.run_id, "a"), _ev(A2, 4, False).to_bytes())
                await glob.wait_version(g1 + 1)
                assert (await glob.entries())[serving_key("a")] == {"serving": False}
                # A gateway's health goes to the global tier only.
                await js.publish(events_subject(spec.run_id, "a"), _ev(gateway_key("a"), 5, True).to_bytes())
                await glob.wait_version(g1 + 2)
                assert (await cp_a.status())["version"] == 4
                # The regional version survives a restart of its control plane (R5), marks too.
                before = await cp_a.entries()
                await cp_a.stop()
                await cp_a.start()
                assert (await cp_a.status())["version"] == 4, "the regional control plane lost its version"
                assert await cp_a.entries() == before
                await js.publish(regional_events_subject(spec.run_id, "a"), _ev(A2, 4, False).to_bytes())
                await js.publish(regional_events_subject(spec.run_id, "a"), _ev(A2, 6, True).to_bytes())
                await cp_a.wait_version(5)
                await until(lambda: _serving(glob, "a"), 10, "the global tier hears a serving again")
            finally:
                await nc.close()

    run(body)


async def _entry(p: Proc, key: str) -> Any:
    return (await p.entries()).get(key)


async def _serving(p: Proc, region: str) -> bool:
    return bool(((await p.entries()).get(serving_key(region)) or {}).get("serving"))


def test_a_regional_control_plane_refuses_the_global_layout(
    make_spec: Callable[..., FederationSpec], component: Starter
) -> None:
    make_spec()  # the default topology: global layout
    proc = component("controlplane", region="a")
    proc.wait(30)
    assert proc.returncode != 0
