"""The snapshot store: commits, hooks, durable load and compare-and-set against a real JetStream KV."""

from __future__ import annotations

import json

from gameday.fedapp.controlplane import ensure_jetstream
from gameday.fedapp.controlplane.store import SnapshotStore
from gameday.fedapp.snapshot import Snapshot
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import instance_key
from tests.fedapp.controlplane.parts import LoggedRuntime, on_bus
from tests.fedapp.helpers import run

A1, A2 = instance_key("a", "a-1"), instance_key("a", "a-2")
UP = {"healthy": True, "weight": 1}
DOWN = {"healthy": False, "weight": 1}


def test_ephemeral_commits_bump_once_per_change_and_call_the_hooks() -> None:
    rt = LoggedRuntime()
    store = SnapshotStore(rt, "global", durable=False)
    bumps: list[tuple[int, bytes]] = []
    store.on_bump.append(lambda snap, data: bumps.append((snap.version, data)))

    async def body() -> None:
        assert await store.mutate(lambda s: s.set_entry(A1, UP))
        assert await store.mutate(lambda s: s.set_entry(A2, UP))
        assert not await store.mutate(lambda s: s.set_entry(A1, UP)), "a no-op change must not bump"

    run(body)
    assert store.snapshot.version == 2 and store.snapshot.entries == {A1: UP, A2: UP}
    assert [v for v, _ in bumps] == [1, 2]
    assert Snapshot.from_json(bumps[-1][1]).entries == store.snapshot.entries
    assert store.last_change_at is not None and store.revision == 0 and store.mode == "ephemeral"
    assert [(e["version"], e["key"]) for e in rt.events("version")] == [(1, A1), (2, A2)]


def test_a_stopped_store_commits_nothing() -> None:
    rt = LoggedRuntime()
    store = SnapshotStore(rt, "global", durable=False)
    rt.stop.set()

    async def body() -> None:
        assert not await store.mutate(lambda s: s.set_entry(A1, UP))

    run(body)
    assert store.snapshot.version == 0 and store.snapshot.entries == {}


def test_durable_writes_survive_a_restart_and_a_missing_key_loads_empty(nats_server: FederationSpec) -> None:
    spec = nats_server

    async def body() -> None:
        rt = LoggedRuntime()
        async with on_bus(rt, spec.nats_url):
            kv = await ensure_jetstream(rt.js, spec.run_id)
            first = SnapshotStore(rt, "global", durable=True)
            first.kv = kv
            assert not await first.load() and not first.loaded
            assert await first.mutate(lambda s: s.set_entry(A1, UP))
            assert await first.mutate(lambda s: s.set_entry(A1, DOWN))
            assert first.revision > 0
            stored = await kv.get("global")
            assert json.loads(stored.value)["version"] == 2

            again = SnapshotStore(rt, "global", durable=True)  # the next incarnation
            again.kv = kv
            assert await again.load() and again.loaded
            assert again.snapshot.version == 2 and again.snapshot.entries == {A1: DOWN}
            assert again.revision == first.revision
            # another key of the bucket (a regional snapshot) is independent
            other = SnapshotStore(rt, "region.a", durable=True)
            other.kv = kv
            assert not await other.load()

    run(body)


def test_a_deleted_stored_snapshot_is_written_afresh_without_regressing(nats_server: FederationSpec) -> None:
    """A bus that lost the key: the CAS write fails, the reload finds nothing, ours is written again."""
    spec = nats_server

    async def body() -> None:
        rt = LoggedRuntime()
        async with on_bus(rt, spec.nats_url):
            kv = await ensure_jetstream(rt.js, spec.run_id)
            store = SnapshotStore(rt, "global", durable=True)
            store.kv = kv
            await store.load()
            assert await store.mutate(lambda s: s.set_entry(A1, UP))
            await kv.delete("global")
            assert await store.mutate(lambda s: s.set_entry(A2, UP))
            assert store.snapshot.version == 2
            assert json.loads((await kv.get("global")).value)["version"] == 2
            assert store.cas_conflicts == 1
            assert rt.events("stored_state_missing"), "the store did not notice the key was gone"

    run(body)
