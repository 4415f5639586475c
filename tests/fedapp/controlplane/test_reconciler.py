"""The reconciler against real agents' state replies on a real nats-server: what a pass folds
into the snapshot, the primary winning a label conflict, missing agents, and region syncs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from gameday.fedapp.controlplane import scope_for
from gameday.fedapp.controlplane.reconciler import SYNC_RETRY, Reconciler
from gameday.fedapp.controlplane.store import SnapshotStore
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import MERGED_SLOW_KEY, agent_state_subject, gateway_key, instance_key, slow_key
from tests.fedapp.controlplane.parts import LoggedRuntime, on_bus
from tests.fedapp.helpers import run, until

UP = {"healthy": True, "weight": 1}


def _state(region: str, label: str, health: dict[str, Any]) -> dict[str, Any]:
    return {"region": region, "epoch": 1, "slow": {"quota": {"cpu": 4}, "labels": {"tier": label}}, "health": health}


async def _agent(nc: Any, spec: FederationSpec, region: str, state: dict[str, Any]) -> None:
    """Answer state requests for *region* with *state*, as the region's agent does."""

    async def cb(msg: Any) -> None:
        await msg.respond(json.dumps(state).encode())

    await nc.subscribe(agent_state_subject(spec.run_id, region), cb=cb)


def _parts(spec: FederationSpec) -> tuple[LoggedRuntime, SnapshotStore, Reconciler]:
    rt = LoggedRuntime()
    scope = scope_for(spec)
    store = SnapshotStore(rt, scope.kv_key, durable=False)
    rec = Reconciler(rt, scope, store, run_id=spec.run_id, primary=spec.topology.primary_region, interval=60.0)
    return rt, store, rec


def test_a_full_pass_folds_health_and_slow_state_and_the_primary_wins(nats_server: FederationSpec) -> None:
    spec = nats_server
    rt, store, rec = _parts(spec)
    primary = spec.topology.primary_region
    other = next(r.name for r in spec.regions if r.name != primary)
    silent = [r.name for r in spec.regions if r.name not in (primary, other)]

    async def body() -> None:
        async with on_bus(rt, spec.nats_url) as nc:
            await _agent(nc, spec, primary, _state(primary, "gold", {instance_key(primary, "x-1"): UP}))
            # an agent may only speak for its own region: the foreign key is dropped
            await _agent(nc, spec, other, _state(other, "bronze", {gateway_key(other): {"healthy": True},
                                                                   instance_key(primary, "x-9"): UP}))
            await nc.flush()
            result = await rec.reconcile(reason="admin")
            assert result["replied"] == sorted([primary, other]) and result["missing"] == sorted(silent)
            assert result["full"] and result["version_before"] == 0 and result["version"] == store.snapshot.version

    run(body)
    entries = store.snapshot.entries
    assert entries[instance_key(primary, "x-1")] == UP
    assert entries[gateway_key(other)] == {"healthy": True}
    assert instance_key(primary, "x-9") not in entries
    assert entries[slow_key(primary)]["labels"] == {"tier": "gold"}
    assert entries[MERGED_SLOW_KEY]["labels"]["tier"] == "gold", "the primary's label must win"
    assert rec.passes == 1 and rec.region_syncs == 0 and rec.status()["last"]["reason"] == "admin"


def test_a_new_agent_epoch_syncs_its_region_once_and_a_silent_one_is_retried(
    nats_server: FederationSpec,
) -> None:
    spec = nats_server
    rt, store, rec = _parts(spec)
    region = spec.regions[0].name
    silent = spec.regions[1].name

    async def body() -> None:
        async with on_bus(rt, spec.nats_url) as nc:
            await _agent(nc, spec, region, _state(region, "gold", {instance_key(region, "x-1"): UP}))
            await nc.flush()
            rec.note_epoch(region, 7)  # not ready yet: remembered, not synced
            await asyncio.sleep(0.1)
            assert rec.region_syncs == 0 and rec.epochs == {region: 7}
            rt.ready = True
            rec.note_epoch(region, 7)  # the same epoch again: nothing to do
            rec.note_epoch(region, 8)  # a restarted agent
            await until(lambda: rec.region_syncs == 1, 5, "a region sync")
            assert store.snapshot.entries[instance_key(region, "x-1")] == UP
            # Nobody listening (no responders): the next heartbeat asks again at once. An agent
            # subscribes before its first heartbeat, so waiting would only hold its slow state back.
            rec.note_epoch(silent, 3)
            await until(lambda: rec.region_syncs == 2, 5, "the unheard region's sync to give up")
            assert silent not in rec.epochs, "a region that did not answer must be asked again"
            rec.note_epoch(silent, 3)
            await until(lambda: rec.region_syncs == 3, 5, "the unheard region asked again at once")
            # Listening but never answering (a hung agent): asked again only after SYNC_RETRY.
            await nc.subscribe(agent_state_subject(spec.run_id, silent), cb=_never_answer)
            await nc.flush()
            rec.note_epoch(silent, 3)
            await until(lambda: rec.region_syncs == 4, 5, "the hung agent's sync to time out")
            assert silent not in rec.epochs
            rec.note_epoch(silent, 3)  # too soon: not asked again before SYNC_RETRY
            await asyncio.sleep(0.1)
            assert rec.region_syncs == 4 and silent not in rec.epochs

    run(body)
    assert rec.passes == 0
    assert [e["region"] for e in rt.events("agent_epoch")] == [region, silent, silent, silent]
    assert SYNC_RETRY > 1.0


async def _never_answer(msg: Any) -> None:
    """A subscribed agent that never replies."""


def test_the_loop_runs_a_pass_on_start_and_on_a_kick(nats_server: FederationSpec) -> None:
    spec = nats_server
    rt, _store, rec = _parts(spec)

    async def body() -> None:
        async with on_bus(rt, spec.nats_url):
            rec.kick()
            loop = asyncio.create_task(rec.loop())
            await until(lambda: rec.passes == 1, 10, "the start-up pass")
            rec.kick()
            await until(lambda: rec.passes == 2, 10, "the kicked pass")
            rt.stop.set()
            rec.kick()
            await asyncio.wait_for(loop, 5)

    run(body)
    assert [e["reason"] for e in rt.events("reconcile")] == ["start", "kick"]
