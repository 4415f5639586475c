"""Liveness: which regions change alive/not alive and when, and heartbeats on a real nats-server
marking a region alive and handing a new agent epoch to the reconciler."""

from __future__ import annotations

import asyncio
import json
import time

from gameday.fedapp.controlplane import scope_for
from gameday.fedapp.controlplane.liveness import Liveness
from gameday.fedapp.controlplane.reconciler import Reconciler
from gameday.fedapp.controlplane.store import SnapshotStore
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import alive_key, heartbeat_subject
from tests.fedapp.controlplane.parts import LoggedRuntime, on_bus
from tests.fedapp.helpers import run, until


def _parts(spec: FederationSpec, timeout: float) -> tuple[LoggedRuntime, SnapshotStore, Reconciler, Liveness]:
    rt = LoggedRuntime()
    scope = scope_for(spec)
    store = SnapshotStore(rt, scope.kv_key, durable=False)
    rec = Reconciler(rt, scope, store, run_id=spec.run_id, primary=spec.topology.primary_region, interval=60.0)
    return rt, store, rec, Liveness(rt, scope, store, rec, timeout=timeout)


def test_alive_changes_wait_for_the_timeout_and_follow_the_snapshot(spec: FederationSpec) -> None:
    _rt, store, _rec, live = _parts(spec, timeout=5.0)
    regions = [r.name for r in spec.regions]
    start = time.monotonic()
    assert live.alive_changes(start + 1) == {}, "never heard, but the timeout has not passed"
    assert live.alive_changes(start + 6) == dict.fromkeys(regions, False)
    live.last_heard[regions[0]] = start + 4
    assert live.alive_changes(start + 6)[regions[0]] is True
    assert live.alive_changes(start + 10)[regions[0]] is False

    async def body() -> None:
        await store.mutate(lambda s: s.set_entry(alive_key(regions[0]), {"alive": True}))

    run(body)
    assert regions[0] not in live.alive_changes(start + 6), "no change when the snapshot already says so"
    live.restart_clocks()
    assert live.alive_changes(time.monotonic()) == {}, "a reconnect restarts every clock"
    assert live.regions_alive() == {r: r == regions[0] for r in regions}


def test_heartbeats_mark_a_region_alive_and_silence_marks_it_not(nats_server: FederationSpec) -> None:
    spec = nats_server
    rt, store, rec, live = _parts(spec, timeout=0.6)
    region = spec.regions[0].name

    async def body() -> None:
        async with on_bus(rt, spec.nats_url) as nc:
            await nc.subscribe(heartbeat_subject(spec.run_id, "*"), cb=live.on_heartbeat)
            await nc.flush()
            loop = asyncio.create_task(live.loop())
            for _ in range(6):
                await nc.publish(heartbeat_subject(spec.run_id, region),
                                 json.dumps({"region": region, "epoch": 42, "at": time.time()}).encode())
                await nc.publish(heartbeat_subject(spec.run_id, "nowhere"), b"{}")  # not a region of ours
                await asyncio.sleep(0.1)
            assert store.snapshot.entries.get(alive_key(region)) == {"alive": True}
            assert rec.epochs == {region: 42}, "the heartbeat's epoch did not reach the reconciler"
            await until(lambda: store.snapshot.entries.get(alive_key(region)) == {"alive": False}, 5,
                        "the silent region marked not alive")
            rt.stop.set()
            await asyncio.wait_for(loop, 5)

    run(body)
    assert "nowhere" not in live.last_heard
    changes = [(e["region"], e["alive"]) for e in rt.events("region_alive") if e["region"] == region]
    assert changes[:1] == [(region, True)] and changes[-1] == (region, False)
