"""The federation control plane as a real process against a real JetStream nats-server.

Every test drives the control plane only through its public surfaces: events published to
JetStream, heartbeats and agent-state replies on core NATS, its broadcasts, the diff
service and its HTTP endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest

from gameday.fedapp.common import JsonLog
from gameday.fedapp.controlplane import ControlPlane, ensure_jetstream
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import (
    MERGED_SLOW_KEY,
    Diff,
    Event,
    agent_state_subject,
    alive_key,
    broadcast_subject,
    diff_subject,
    events_subject,
    gateway_key,
    heartbeat_subject,
    instance_key,
    slow_key,
)
from tests.conftest import NatsServer
from tests.fedapp.helpers import Starter, run, until

LOADED_SLACK_S = 2.0  # a loaded 2-core CI machine (load ~11) can delay a step by ~1-2 s


@pytest.fixture
def spec(make_spec: Callable[..., FederationSpec], request: pytest.FixtureRequest) -> FederationSpec:
    """The default topology; regions never time out unless a test asks (no surprise bumps).

    Parametrize indirectly with top-level overrides, e.g. ``{"control_plane": {...}}``.
    """
    over: dict[str, Any] = dict(getattr(request, "param", None) or {})
    timing = {"region_timeout": 60.0, **over.pop("timing", {})}
    return make_spec(timing=timing, **over)


# -- helpers ---------------------------------------------------------------------------
class CP:
    """A control-plane process plus an HTTP client for it."""

    def __init__(self, spec: FederationSpec, component: Starter, http: httpx.AsyncClient) -> None:
        self.spec, self.component, self.http = spec, component, http
        self.url = spec.control_plane.url
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        self.proc = self.component("controlplane")

        async def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"controlplane exited with {self.proc.returncode}")
            try:
                return (await self.http.get(f"{self.url}/readyz")).status_code == 200
            except httpx.HTTPError:
                return False

        await until(ready, 20, "controlplane /readyz")

    async def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        await asyncio.to_thread(self.proc.wait, 5)
        assert self.proc.returncode == 0, f"controlplane exited with {self.proc.returncode}"

    async def status(self) -> dict[str, Any]:
        r = await self.http.get(f"{self.url}/status")
        r.raise_for_status()
        return dict(r.json())

    async def snapshot(self) -> dict[str, Any]:
        r = await self.http.get(f"{self.url}/snapshot")
        r.raise_for_status()
        return dict(r.json())

    async def wait_version(self, version: int, timeout: float = 5) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            st = await self.status()
            return st if st["version"] == version else None

        return dict(await until(check, timeout, f"controlplane version {version}"))

    async def wait_consumed(self, n: int, timeout: float = 5) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            st = await self.status()
            return st if st["events_consumed"] >= n else None

        return dict(await until(check, timeout, f"{n} events consumed"))


@contextlib.asynccontextmanager
async def started_cp(spec: FederationSpec, component: Starter) -> AsyncIterator[tuple[CP, Any]]:
    """A started control-plane process and the test's own NATS connection (closed at the end)."""
    async with httpx.AsyncClient(timeout=2) as http:
        cp = CP(spec, component, http)
        await cp.start()
        nc = await nats.connect(spec.nats_url)
        try:
            yield cp, nc
        finally:
            await nc.close()


class Broadcasts:
    """Every broadcast heard, with the monotonic time it arrived."""

    def __init__(self) -> None:
        self.heard: list[tuple[float, dict[str, Any]]] = []

    async def cb(self, msg: Any) -> None:
        self.heard.append((time.monotonic(), json.loads(msg.data)))

    def versions(self) -> list[tuple[float, int]]:
        return [(t, int(b["version"])) for t, b in self.heard if not b["heartbeat"]]


def ev(key: str, seq: int, healthy: bool, epoch: int = 1000, region: str = "a") -> Event:
    value: dict[str, Any] = {"healthy": healthy, "weight": 1} if "/instance/" in key else {"healthy": healthy}
    return Event(region=region, epoch=epoch, seq=seq, key=key, value=value, observed_at=time.time())


async def publish(js: Any, spec: FederationSpec, event: Event) -> None:
    await js.publish(events_subject(spec.run_id, event.region), event.to_bytes())


A1, A2 = instance_key("a", "a-1"), instance_key("a", "a-2")


# -- tests -----------------------------------------------------------------------------
def test_events_bump_version_broadcast_it_and_diff_carries_only_changes(
    nats_server: FederationSpec, component: Starter
) -> None:
    spec = nats_server

    async def body() -> None:
        async with started_cp(spec, component) as (cp, nc):
            js = nc.jetstream()
            heard = Broadcasts()
            await nc.subscribe(broadcast_subject(spec.run_id), cb=heard.cb)
            assert (await cp.status())["version"] == 0

            await publish(js, spec, ev(A1, 1, True))
            await publish(js, spec, ev(A2, 2, True))
            await cp.wait_version(2)
            await until(lambda: [v for _, v in heard.versions() if v == 2], 2,
                        "broadcast of version 2")

            await publish(js, spec, ev(A1, 3, False))
            st = await cp.wait_version(3)
            assert st["announced_version"] == 3
            d = Diff.from_bytes((await nc.request(diff_subject(spec.run_id),
                                                  json.dumps({"since": 2, "node": "t"}).encode(),
                                                  timeout=2)).data)
            assert d == Diff(version=3, full=False, entries={A1: {"healthy": False, "weight": 1}})
            reply = await nc.request(diff_subject(spec.run_id), b'{"since": 0}', timeout=2)
            full = Diff.from_bytes(reply.data)
            assert full.full
            assert full.version == 3
            assert full.entries == {A1: {"healthy": False, "weight": 1}, A2: {"healthy": True, "weight": 1}}

            # every version announced once, in order; heartbeats repeat the last announced one
            assert [v for _, v in heard.versions()] == [1, 2, 3]
            await until(lambda: [b for _, b in heard.heard if b["heartbeat"] and b["version"] == 3], 2,
                        "a heartbeat broadcast carrying version 3")
            st = await cp.status()
            assert st["events_consumed"] == 3
            assert st["events_ignored"] == 0
            assert st["processing_latency_p99_s"] is not None
            assert st["processing_latency_p99_s"] < LOADED_SLACK_S  # nothing configured holds an event back
            assert st["full_snapshot_bytes"] == len(full.to_bytes())
            metrics = (await cp.http.get(f"{cp.url}/metrics")).text
            assert "gameday_cp_version 3" in metrics
            assert "gameday_cp_events_consumed_total 3" in metrics
            assert "gameday_cp_processing_latency_seconds_count 3" in metrics
            assert "gameday_cp_backlog 0" in metrics
            assert 'gameday_cp_broadcasts_total{kind="version"} 3' in metrics

    run(body)
    log = (Path(spec.workdir) / "controlplane-global.log").read_text()
    changes = [json.loads(line) for line in log.splitlines() if '"event":"version"' in line]
    assert [(c["version"], c["key"]) for c in changes] == [(1, A1), (2, A2), (3, A1)]


def test_duplicate_stale_and_noop_events_do_not_bump(nats_server: FederationSpec, component: Starter) -> None:
    spec = nats_server

    async def body() -> None:
        async with started_cp(spec, component) as (cp, nc):
            js = nc.jetstream()
            first = ev(A1, 2, True)
            await publish(js, spec, first)
            await cp.wait_version(1)
            await publish(js, spec, first)  # duplicate (redelivery)
            await publish(js, spec, ev(A1, 1, False))  # stale: older seq arriving late
            await publish(js, spec, ev(A1, 3, True))  # newer but the same value: no-op
            st = await cp.wait_consumed(4)
            assert st["version"] == 1
            assert st["events_ignored"] == 3
            assert (await cp.snapshot())["entries"][A1] == {"healthy": True, "weight": 1}
            await publish(js, spec, ev(A1, 4, False))
            await cp.wait_version(2)
            # a restarted agent (larger epoch) starts its seq again at 1 and still applies
            await publish(js, spec, ev(A1, 1, True, epoch=2000))
            await cp.wait_version(3)

    run(body)


def test_version_survives_restart_when_durable(nats_server: FederationSpec, component: Starter) -> None:
    spec = nats_server
    assert spec.topology.control_plane.state == "durable"

    async def body() -> None:
        async with started_cp(spec, component) as (cp, nc):
            js = nc.jetstream()
            for seq, key in enumerate([A1, A2, gateway_key("a")], start=1):
                await publish(js, spec, ev(key, seq, True))
            await cp.wait_version(3)
            before = await cp.snapshot()
            await cp.stop()

            await cp.start()
            st = await cp.status()
            assert st["version"] == 3, "durable control plane lost its version on restart"
            assert st["state_mode"] == "durable"
            assert st["announced_version"] == 3
            assert (await cp.snapshot())["entries"] == before["entries"]
            # the event marks survived too: a replay of an applied event is still a no-op
            await publish(js, spec, ev(A1, 1, True))
            await publish(js, spec, ev(A1, 4, False))
            st = await cp.wait_version(4)
            assert st["events_ignored"] == 1

    run(body)


@pytest.mark.parametrize("spec", [{"control_plane": {"state": "ephemeral"}}], indirect=True)
def test_version_regresses_after_restart_when_ephemeral(
    nats_server: FederationSpec, component: Starter
) -> None:
    """The deliberate misconfiguration: memory-only state starts at 0 again (negative control)."""
    spec = nats_server

    async def body() -> None:
        async with started_cp(spec, component) as (cp, nc):
            js = nc.jetstream()
            await publish(js, spec, ev(A1, 1, True))
            await publish(js, spec, ev(A2, 2, True))
            await cp.wait_version(2)
            await cp.stop()
            await cp.start()
            st = await cp.status()
            assert st["state_mode"] == "ephemeral"
            assert st["version"] == 0, "ephemeral state must start from scratch"
            await publish(js, spec, ev(A1, 3, False))
            st = await cp.wait_version(1)
            assert st["version"] < 2  # the version went backwards across the restart

    run(body)


@pytest.mark.parametrize("spec", [{"control_plane": {"broadcast_delay": 0.6}}], indirect=True)
def test_broadcast_delay_holds_announcements_back(nats_server: FederationSpec, component: Starter,
                                                  admin_headers: dict[str, str]) -> None:
    spec = nats_server

    async def body() -> None:
        async with started_cp(spec, component) as (cp, nc):
            js = nc.jetstream()
            heard = Broadcasts()
            await nc.subscribe(broadcast_subject(spec.run_id), cb=heard.cb)

            async def announced_after(version: int, delay: float) -> float:
                t0 = time.monotonic()
                await publish(js, spec, ev(A1, version, version % 2 == 1))
                await cp.wait_version(version, timeout=2)
                mid = await cp.status()
                # applied but not yet announced; diffs serve the announced snapshot only
                assert mid["announced_version"] == version - 1
                d = Diff.from_bytes((await nc.request(
                    diff_subject(spec.run_id), json.dumps({"since": version - 1}).encode(), timeout=2)).data)
                assert d.version == version - 1
                assert d.entries == {}
                hits = await until(lambda: [t for t, v in heard.versions() if v == version],
                                   delay + LOADED_SLACK_S + 1, f"broadcast of version {version}")
                measured = float(hits[0]) - t0
                # heartbeats in the meantime carried the previous version: the delay held
                early = [b for t, b in heard.heard if t0 < t < hits[0] and b["version"] >= version]
                assert early == [], f"version {version} leaked before its delay: {early}"
                return measured

            m1 = await announced_after(1, 0.6)
            assert 0.6 - 0.05 <= m1 <= 0.6 + LOADED_SLACK_S, m1

            r = await cp.http.post(f"{cp.url}/admin/fault", json={"broadcast_delay": 1.2}, headers=admin_headers)
            assert r.status_code == 200
            assert r.json()["broadcast_delay"] == 1.2
            m2 = await announced_after(2, 1.2)
            assert 1.2 - 0.05 <= m2 <= 1.2 + LOADED_SLACK_S, m2
            assert (await cp.status())["announced_version"] == 2
            assert (await cp.http.post(f"{cp.url}/admin/fault", json={"broadcast_delay": -1},
                                        headers=admin_headers)).status_code == 400

    run(body)


@pytest.mark.parametrize(
    "spec", [{"timing": {"region_timeout": 1.0, "heartbeat_interval": 0.2}}], indirect=True
)
def test_heartbeat_silence_marks_region_not_alive(nats_server: FederationSpec, component: Starter) -> None:
    spec = nats_server

    async def body() -> None:
        async with started_cp(spec, component) as (cp, nc):
            beating = True

            async def beat() -> None:
                for _ in range(200):  # bounded: at most 20 s
                    if not beating:
                        return
                    await nc.publish(heartbeat_subject(spec.run_id, "a"),
                                     json.dumps({"region": "a", "epoch": 7, "at": time.time()}).encode())
                    await asyncio.sleep(0.1)

            task = asyncio.create_task(beat())

            async def a_alive() -> bool:
                return bool((await cp.status())["regions_alive"]["a"])

            await until(a_alive, 3, "region a alive")
            # regions never heard are declared not alive once region_timeout has passed
            await until(lambda: _entry(cp, alive_key("b"), {"alive": False}),
                        3, "region b marked not alive")
            assert (await cp.snapshot())["entries"][alive_key("a")] == {"alive": True}

            beating = False
            await task
            t_silent = time.monotonic()

            async def a_dead() -> bool:
                return not (await cp.status())["regions_alive"]["a"]

            await until(a_dead, 1.0 + LOADED_SLACK_S + 1, "region a marked not alive")
            silence = time.monotonic() - t_silent
            assert 1.0 - 0.15 <= silence <= 1.0 + LOADED_SLACK_S, silence  # region_timeout plus the slack
            assert 'gameday_cp_region_alive{region="a"} 0' in (await cp.http.get(f"{cp.url}/metrics")).text

    run(body)


async def _entry(cp: CP, key: str, value: dict[str, Any]) -> bool:
    return bool((await cp.snapshot())["entries"].get(key) == value)


def test_reconcile_picks_up_slow_state_and_primary_wins(
    nats_server: FederationSpec, component: Starter, admin_headers: dict[str, str]
) -> None:
    spec = nats_server
    assert spec.topology.primary_region == "a"

    async def body() -> None:
        agents: dict[str, dict[str, Any]] = {
            "a": {"region": "a", "epoch": 1,
                  "slow": {"quota": {"cpu": 32}, "labels": {"tier": "gold", "owner": "p"}},
                  "health": {A1: {"healthy": True, "weight": 1}, gateway_key("a"): {"healthy": True}}},
            "b": {"region": "b", "epoch": 1,
                  "slow": {"quota": {"cpu": 16}, "labels": {"tier": "silver", "zone": "x"}},
                  "health": {gateway_key("b"): {"healthy": True}, A2: {"healthy": True}}},  # A2: not b's key
        }
        nc = await nats.connect(spec.nats_url)
        for r in list(agents):
            async def reply(msg: Any, r: str = r) -> None:
                await msg.respond(json.dumps(agents[r]).encode())

            await nc.subscribe(agent_state_subject(spec.run_id, r), cb=reply)
        await nc.flush()

        async with httpx.AsyncClient(timeout=5) as http:
            cp = CP(spec, component, http)
            await cp.start()
            # start-up sync: no admin call needed
            await until(lambda: _entry(cp, slow_key("a"), agents["a"]["slow"]), 3, "start-up sync of slow/a")
            snap = await cp.snapshot()
            assert snap["entries"][slow_key("b")] == agents["b"]["slow"]
            assert snap["entries"][MERGED_SLOW_KEY] == {
                "labels": {"owner": "p", "tier": "gold", "zone": "x"},
                "conflicts": [{"key": "tier", "values": {"a": "gold", "b": "silver"}, "winner": "a"}],
            }
            assert snap["entries"][A1] == {"healthy": True, "weight": 1}
            assert snap["entries"][gateway_key("b")] == {"healthy": True}
            assert A2 not in snap["entries"], "an agent may only report its own region's keys"
            st = await cp.status()
            assert st["reconcile"]["passes"] >= 1
            assert st["reconcile"]["last"]["missing"] == ["c"]

            # slow state edited in region b: nothing changes until the next full pass
            agents["b"]["slow"]["labels"]["tier"] = "gold"
            js = nc.jetstream()
            await publish(js, spec, ev(A1, 1, False))  # a real event after the reconcile still applies
            v = snap["version"] + 1
            await cp.wait_version(v)
            snap2 = await cp.snapshot()
            assert snap2["entries"][A1] == {"healthy": False, "weight": 1}
            assert snap2["entries"][slow_key("b")]["labels"]["tier"] == "silver"

            resp = await http.post(f"{cp.url}/admin/reconcile", headers=admin_headers)
            assert resp.status_code == 200
            res = resp.json()
            assert res["replied"] == ["a", "b"]
            assert res["missing"] == ["c"]
            snap3 = await cp.snapshot()
            assert snap3["entries"][slow_key("b")]["labels"]["tier"] == "gold"
            assert snap3["entries"][MERGED_SLOW_KEY] == {
                "labels": {"owner": "p", "tier": "gold", "zone": "x"}, "conflicts": []}
            # the agent's (older) health view overrides the event: it is the agent's current state
            assert snap3["entries"][A1] == {"healthy": True, "weight": 1}
            assert snap3["version"] > v
            assert (await cp.status())["reconcile"]["passes"] >= 2
        await nc.close()

    run(body)


def test_two_replicas_cannot_fork_the_version(nats_server: FederationSpec, tmp_path: Path) -> None:
    """Two control-plane instances on one KV bucket: compare-and-set forces the loser to reload."""
    spec = nats_server

    async def body() -> None:
        replicas = []
        conns = []
        for name in ("r1", "r2"):
            cp = ControlPlane(spec, JsonLog(name, stream=io.StringIO()))
            nc = await nats.connect(spec.nats_url)
            conns.append(nc)
            cp.rt.nc, cp.rt.js = nc, nc.jetstream()
            cp.store.kv = await ensure_jetstream(cp.rt.js, spec.run_id)
            await cp.store.load()
            replicas.append(cp.store)
        r1, r2 = replicas
        assert await r1.mutate(lambda s: s.set_entry(A1, {"healthy": True, "weight": 1}))
        # r2 still holds version 0 and revision 0: its write conflicts, it reloads and re-applies
        assert await r2.mutate(lambda s: s.set_entry(A2, {"healthy": True, "weight": 1}))
        assert r2.cas_conflicts == 1
        assert r2.snapshot.version == 2
        assert set(r2.snapshot.entries) == {A1, A2}
        # and r1, now stale, does the same: versions stay a single line
        assert await r1.mutate(lambda s: s.set_entry(A1, {"healthy": False, "weight": 1}))
        assert r1.cas_conflicts == 1
        assert r1.snapshot.version == 3
        assert r1.snapshot.entries == {A1: {"healthy": False, "weight": 1},
                                       A2: {"healthy": True, "weight": 1}}
        entry = await r1.kv.get("global")
        assert json.loads(entry.value)["version"] == 3
        # re-applying an effect already in the store is a no-op, not a bump
        assert not await r2.mutate(lambda s: s.set_entry(A1, {"healthy": False, "weight": 1}))
        assert r2.snapshot.version == 3
        for nc in conns:
            await nc.close()

    run(body)


def test_survives_a_bus_restart_and_resumes(
    spec: FederationSpec, component: Starter, nats_for: Callable[[FederationSpec], NatsServer]
) -> None:
    """R1: the control plane keeps serving while NATS is down and resumes consuming after it is back."""
    bus = nats_for(spec)

    async def body() -> None:
        async with httpx.AsyncClient(timeout=2) as http:
            cp = CP(spec, component, http)
            await cp.start()
            nc = await nats.connect(spec.nats_url)
            js = nc.jetstream()
            await publish(js, spec, ev(A1, 1, True))
            await publish(js, spec, ev(A2, 2, True))
            await cp.wait_version(2)
            passes = (await cp.status())["reconcile"]["passes"]
            await nc.close()

            await asyncio.to_thread(bus.stop)
            st = await until(lambda: _disconnected(cp), 5, "controlplane notices the bus is gone")
            assert st["version"] == 2  # still serving its state
            assert (await http.get(f"{cp.url}/livez")).status_code == 200

            await asyncio.to_thread(bus.start)
            nc = await nats.connect(spec.nats_url)
            js = nc.jetstream()
            await publish(js, spec, ev(A1, 3, False))
            st = await cp.wait_version(3, timeout=10)
            assert st["nats_connected"] is True
            await until(lambda: _passes_above(cp, passes), 5, "a reconciliation pass after the reconnect")
            await nc.close()

    run(body)


async def _disconnected(cp: CP) -> dict[str, Any] | None:
    st = await cp.status()
    return None if st["nats_connected"] else st


async def _passes_above(cp: CP, n: int) -> bool:
    return bool((await cp.status())["reconcile"]["passes"] > n)
