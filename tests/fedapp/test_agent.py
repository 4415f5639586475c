"""The region agent as a real process, probing readiness endpoints this test controls.

The targets (the region's app instances and its gateway) are tiny aiohttp servers on the
addresses the spec gives them; each records every probe it answered, so the R2 arithmetic
(fall after 3, rise after 2) is checked probe by probe, not by timing guesses.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import httpx
import nats
from aiohttp import web

from gameday.fedapp.controlplane import ensure_jetstream
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import (
    Event,
    agent_state_subject,
    alive_key,
    events_stream,
    events_subject,
    gateway_key,
    heartbeat_subject,
    instance_key,
    slow_key,
)
from tests.conftest import NatsServer
from tests.fedapp.helpers import Starter, run, until

A1, A2, GW = instance_key("a", "a-1"), instance_key("a", "a-2"), gateway_key("a")
LOADED_SLACK_S = 2.0  # a loaded 2-core CI machine (load ~11) can delay a step by ~1-2 s
HANG_S = 5.0
"""How long a hung target takes to answer: far beyond probe_timeout plus LOADED_SLACK_S."""


class Targets:
    """Readiness endpoints for one region's instances and gateway, under the test's control."""

    def __init__(self, spec: FederationSpec, region: str) -> None:
        r = spec.region(region)
        self.endpoints = {i.name: i.endpoint for i in r.instances}
        self.endpoints["gateway"] = r.gateway
        self.fail_next: dict[str, int] = {}
        self.down: set[str] = set()
        self.hang: set[str] = set()
        self.served: dict[str, list[tuple[float, bool]]] = defaultdict(list)
        self._runners: list[web.AppRunner] = []

    async def __aenter__(self) -> Targets:
        for name, ep in self.endpoints.items():
            app = web.Application()
            app.router.add_get("/readyz", self._handler(name))
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)  # cleanup cuts hung probes short
            await runner.setup()
            await web.TCPSite(runner, ep.host, ep.port, reuse_address=True).start()
            self._runners.append(runner)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for runner in self._runners:
            await runner.cleanup()

    def _handler(self, name: str) -> Callable[[web.Request], Any]:
        async def readyz(_: web.Request) -> web.Response:
            if name in self.hang:
                await asyncio.sleep(HANG_S)
            ok = name not in self.down and name not in self.hang
            if self.fail_next.get(name, 0) > 0:
                self.fail_next[name] -= 1
                ok = False
            self.served[name].append((time.time(), ok))
            return web.Response(status=200 if ok else 503, text="ok" if ok else "not ready")

        return readyz


class Events:
    """Every event the agent publishes on its region's subject (core subscription)."""

    def __init__(self) -> None:
        self.seen: list[Event] = []

    async def cb(self, msg: Any) -> None:
        self.seen.append(Event.from_bytes(msg.data))

    def for_key(self, key: str) -> list[Event]:
        return [e for e in self.seen if e.key == key]


async def agent_ready(http: httpx.AsyncClient, spec: FederationSpec, proc: subprocess.Popen[bytes]) -> str:
    url = spec.region("a").agent.url

    async def ok() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"agent exited with {proc.returncode}")
        try:
            return (await http.get(f"{url}/readyz")).status_code == 200
        except httpx.HTTPError:
            return False

    await until(ok, 20, "agent /readyz")
    return url


def results_between(served: list[tuple[float, bool]], start: int, until_t: float) -> list[bool]:
    """Probe results the target answered from index *start* up to time *until_t*."""
    return [ok for t, ok in served[start:] if t <= until_t]


# -- tests -----------------------------------------------------------------------------
def test_fall_after_three_failures_rise_after_two_successes(
    nats_server: FederationSpec, component: Starter
) -> None:
    spec = nats_server
    t = spec.topology.timing
    assert (t.fall, t.rise) == (3, 2)

    async def body() -> None:
        nc = await nats.connect(spec.nats_url)
        js = nc.jetstream()
        await ensure_jetstream(js, spec.run_id)
        events = Events()
        await nc.subscribe(events_subject(spec.run_id, "a"), cb=events.cb)
        async with Targets(spec, "a") as targets, httpx.AsyncClient(timeout=2) as http:
            proc = component("agent", region="a")
            url = await agent_ready(http, spec, proc)

            # start-up: every target's first determination is published, after `rise` successes
            await until(lambda: {e.key for e in events.seen} == {A1, A2, GW}, 5, "initial events")
            first = {e.key: e for e in events.seen}
            assert first[A1].value == {"healthy": True, "weight": 1}
            assert first[GW].value == {"healthy": True}
            assert len({e.epoch for e in events.seen}) == 1
            assert sorted(e.seq for e in events.seen) == [1, 2, 3]
            for name, key in (("a-1", A1), ("a-2", A2), ("gateway", GW)):
                assert results_between(targets.served[name], 0, first[key].observed_at) == [True, True]

            # a blip of two failed probes moves nothing (R2: no flapping)
            mark = len(targets.served["a-1"])
            targets.fail_next["a-1"] = 2
            await until(lambda: len(targets.served["a-1"]) >= mark + 5, 5, "2 failures then 3 successes")
            assert [ok for _, ok in targets.served["a-1"][mark:mark + 5]] == [False, False, True, True, True]
            assert len(events.for_key(A1)) == 1, events.for_key(A1)
            st = (await http.get(f"{url}/status")).json()
            assert st["targets"]["a-1"]["healthy"] is True

            # three in a row: unhealthy, published at the third failure
            mark = len(targets.served["a-1"])
            targets.fail_next["a-1"] = 3
            down = await until(lambda: [e for e in events.for_key(A1) if not e.value["healthy"]], 5,
                               "unhealthy event")
            assert results_between(targets.served["a-1"], mark, down[0].observed_at) == [False, False, False]
            assert down[0].value == {"healthy": False, "weight": 1}

            # re-admission after exactly two successes
            up = await until(lambda: events.for_key(A1)[2:], 5, "healthy event")
            assert up[0].value == {"healthy": True, "weight": 1}
            assert results_between(targets.served["a-1"], mark + 3, up[0].observed_at) == [True, True]
            assert [e.seq for e in events.seen] == sorted(e.seq for e in events.seen)
            assert len(events.for_key(A2)) == 1  # the other targets never changed
            assert len(events.for_key(GW)) == 1

            # the events are durable in JetStream, not just fire-and-forget
            info = await js.stream_info(events_stream(spec.run_id))
            assert info.state.messages == len(events.seen) == 5
            st = (await http.get(f"{url}/status")).json()
            assert st["events_published"] == 5
            assert st["pending_events"] == 0
        await nc.close()

    run(body)


def test_state_reply_slow_edits_heartbeats_and_hung_targets(
    nats_server: FederationSpec, component: Starter, admin_headers: dict[str, str]
) -> None:
    spec = nats_server
    region = spec.region("a")

    async def body() -> None:
        nc = await nats.connect(spec.nats_url)
        await ensure_jetstream(nc.jetstream(), spec.run_id)
        beats: list[dict[str, Any]] = []

        async def on_beat(msg: Any) -> None:
            beats.append(json.loads(msg.data))

        await nc.subscribe(heartbeat_subject(spec.run_id, "a"), cb=on_beat)
        async with Targets(spec, "a") as targets, httpx.AsyncClient(timeout=2, headers=admin_headers) as http:
            targets.down.add("gateway")
            targets.hang.add("a-2")  # answers after HANG_S: longer than probe_timeout
            proc = component("agent", region="a")
            url = await agent_ready(http, spec, proc)

            async def determined() -> bool:
                st = (await http.get(f"{url}/status")).json()
                return all(v["healthy"] is not None for v in st["targets"].values())

            await until(determined, 5, "every target determined")
            st = (await http.get(f"{url}/status")).json()
            assert st["targets"]["a-2"]["healthy"] is False
            assert st["targets"]["a-2"]["last_error"] == "TimeoutError"
            # cut at probe_timeout, not when the hung target answers (HANG_S)
            assert st["targets"]["a-2"]["last_probe_ms"] < 1000 * (spec.topology.timing.probe_timeout + LOADED_SLACK_S)
            assert st["targets"]["gateway"]["consecutive_fail"] >= 3

            async def state() -> dict[str, Any]:
                msg = await nc.request(agent_state_subject(spec.run_id, "a"), b"{}", timeout=2)
                return dict(json.loads(msg.data))

            s = await state()
            assert s["region"] == "a"
            assert s["epoch"] == st["epoch"]
            assert s["slow"] == {"quota": dict(region.quota), "labels": dict(region.labels)}
            assert s["health"] == {A1: {"healthy": True, "weight": 1}, A2: {"healthy": False, "weight": 1},
                                   GW: {"healthy": False}}

            r = await http.post(f"{url}/admin/slow", json={"labels": {"tier": "bronze"}})
            assert r.status_code == 200
            s2 = await state()
            assert s2["slow"] == {"quota": dict(region.quota), "labels": {"tier": "bronze"}}
            assert (await http.post(f"{url}/admin/slow", json={"labels": "x"})).status_code == 400
            assert (await http.post(f"{url}/admin/slow", content=b"not json")).status_code == 400

            await until(lambda: len(beats) >= 2, 3, "two heartbeats")
            assert {(b["region"], b["epoch"]) for b in beats} == {("a", st["epoch"])}
            metrics = (await http.get(f"{url}/metrics")).text
            assert 'gameday_agent_events_published_total{region="a"} 3' in metrics
            assert 'gameday_agent_target_healthy{region="a",target="gateway"} 0' in metrics
            assert 'gameday_agent_probes_total{region="a",target="a-1"}' in metrics
            assert 'gameday_agent_probe_failures_total{region="a",target="gateway"}' in metrics
        await nc.close()

    run(body)


def test_changes_while_the_bus_is_down_are_published_when_it_is_back(
    spec: FederationSpec, component: Starter, nats_for: Callable[[FederationSpec], NatsServer]
) -> None:
    """R1: probing never waits for the bus; the latest pending value goes out after reconnect."""
    bus = nats_for(spec)

    async def body() -> None:
        nc = await nats.connect(spec.nats_url)
        js = nc.jetstream()
        await ensure_jetstream(js, spec.run_id)
        async with Targets(spec, "a") as targets, httpx.AsyncClient(timeout=2) as http:
            proc = component("agent", region="a")
            url = await agent_ready(http, spec, proc)

            async def stored() -> int:
                return int((await js.stream_info(events_stream(spec.run_id))).state.messages)

            await until(lambda: _eq(stored(), 3), 5, "3 initial events stored")
            await nc.close()

            await asyncio.to_thread(bus.stop)
            probes_before = (await http.get(f"{url}/status")).json()["targets"]["gateway"]["probes"]
            targets.down.add("gateway")

            async def pending() -> dict[str, Any] | None:
                st = dict((await http.get(f"{url}/status")).json())
                gw_down = st["targets"]["gateway"]["healthy"] is False
                return st if gw_down and st["pending_events"] == 1 else None

            st = await until(pending, 5, "gateway unhealthy and pending while the bus is down")
            assert st["nats_connected"] is False
            assert st["targets"]["gateway"]["probes"] >= probes_before + 3  # probing went on

            await asyncio.to_thread(bus.start)
            nc = await nats.connect(spec.nats_url)
            js = nc.jetstream()
            await until(lambda: _eq(stored(), 4), 8, "the pending event stored after the bus came back")
            last = await js.get_last_msg(events_stream(spec.run_id), events_subject(spec.run_id, "a"))
            ev = Event.from_bytes(last.data or b"")
            assert (ev.key, ev.value) == (GW, {"healthy": False})
            assert ev.seq == 4
            await until(lambda: _pending_zero(http, url), 3, "nothing pending")
            await nc.close()

    run(body)


async def _eq(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


async def _pending_zero(http: httpx.AsyncClient, url: str) -> bool:
    return bool((await http.get(f"{url}/status")).json()["pending_events"] == 0)


def test_agent_and_control_plane_end_to_end(nats_server: FederationSpec, component: Starter,
                                             admin_headers: dict[str, str]) -> None:
    """Agent -> JetStream -> control plane: health, liveness, and slow state only on a full pass."""
    spec = nats_server
    region = spec.region("a")

    async def body() -> None:
        async with Targets(spec, "a") as targets, httpx.AsyncClient(timeout=5, headers=admin_headers) as http:
            cp_url = spec.control_plane.url
            component("controlplane")

            async def cp_ready() -> bool:
                try:
                    return (await http.get(f"{cp_url}/readyz")).status_code == 200
                except httpx.HTTPError:
                    return False

            await until(cp_ready, 20, "controlplane ready")
            agent = component("agent", region="a")
            url = await agent_ready(http, spec, agent)

            async def entries() -> dict[str, Any]:
                return dict((await http.get(f"{cp_url}/snapshot")).json()["entries"])

            want = {A1: {"healthy": True, "weight": 1}, A2: {"healthy": True, "weight": 1},
                    GW: {"healthy": True}, alive_key("a"): {"alive": True},
                    slow_key("a"): {"quota": dict(region.quota), "labels": dict(region.labels)}}

            async def has(expected: dict[str, Any]) -> bool:
                e = await entries()
                return all(e.get(k) == v for k, v in expected.items())

            await until(lambda: has(want), 5, "region a's state in the global snapshot")

            targets.down.add("gateway")
            await until(lambda: has({GW: {"healthy": False}}), 5, "gateway removal reaches the snapshot")

            # slow state: edited in the region, seen globally only after a full pass
            r = await http.post(f"{url}/admin/slow", json={"labels": {"tier": "bronze"}})
            assert r.status_code == 200
            targets.down.discard("gateway")
            await until(lambda: has({GW: {"healthy": True}}), 5, "gateway back")
            assert (await entries())[slow_key("a")]["labels"] == dict(region.labels)
            res = (await http.post(f"{cp_url}/admin/reconcile")).json()
            assert "a" in res["replied"]
            assert (await entries())[slow_key("a")]["labels"] == {"tier": "bronze"}

            # the agent dies: the region is declared not alive after region_timeout
            agent.terminate()
            await asyncio.to_thread(agent.wait, 5)
            await until(lambda: has({alive_key("a"): {"alive": False}}),
                        spec.topology.timing.region_timeout + 2, "region a not alive")

    run(body)
