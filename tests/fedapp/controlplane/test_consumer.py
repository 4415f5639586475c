"""The event consumer against a real JetStream: events applied through the store, acked,
duplicates counted as ignored, a message that is not an event terminated, backlog read."""

from __future__ import annotations

import asyncio
import time

from gameday.fedapp.controlplane import ensure_jetstream, scope_for
from gameday.fedapp.controlplane.consumer import EventConsumer
from gameday.fedapp.controlplane.store import SnapshotStore
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import Event, events_subject, gateway_key, instance_key
from tests.fedapp.controlplane.parts import LoggedRuntime, on_bus
from tests.fedapp.helpers import run, until

A1 = instance_key("a", "a-1")


def _ev(key: str, seq: int, healthy: bool) -> Event:
    value = {"healthy": healthy, "weight": 1} if "/instance/" in key else {"healthy": healthy}
    return Event(region="a", epoch=1000, seq=seq, key=key, value=value, observed_at=time.time())


def _parts(spec: FederationSpec) -> tuple[LoggedRuntime, SnapshotStore, EventConsumer]:
    rt = LoggedRuntime()
    scope = scope_for(spec)
    store = SnapshotStore(rt, scope.kv_key, durable=False)

    async def ensure() -> None:
        await ensure_jetstream(rt.js, spec.run_id)

    return rt, store, EventConsumer(rt, scope, store, ensure)


def test_events_are_applied_acked_and_counted(nats_server: FederationSpec) -> None:
    spec = nats_server
    rt, store, consumer = _parts(spec)

    async def body() -> None:
        async with on_bus(rt, spec.nats_url):
            await ensure_jetstream(rt.js, spec.run_id)
            subject = events_subject(spec.run_id, "a")
            for e in (_ev(A1, 1, True), _ev(A1, 1, True), _ev(gateway_key("a"), 2, True), _ev(A1, 3, False)):
                await rt.js.publish(subject, e.to_bytes())
            await rt.js.publish(subject, b"not an event")
            await consumer.bind()
            loops = [asyncio.create_task(consumer.consume_loop()), asyncio.create_task(consumer.backlog_loop())]
            await until(lambda: consumer.events_consumed + consumer.events_bad >= 5, 10, "five messages handled")
            await until(lambda: consumer.backlog == 0 and consumer.ack_pending == 0, 5, "an empty backlog")
            rt.stop.set()
            await asyncio.gather(*loops)
            info = await rt.js.consumer_info(scope_for(spec).stream, scope_for(spec).durable)
            assert info.num_pending == 0 and info.num_ack_pending == 0, "something was left unacked"

    run(body)
    assert (consumer.events_consumed, consumer.events_ignored, consumer.events_bad) == (4, 1, 1)
    assert store.snapshot.version == 3
    assert store.snapshot.entries[A1] == {"healthy": False, "weight": 1}
    assert consumer.latency.n == 4
    assert rt.events("bad_event")


def test_the_backlog_counts_what_waits_unconsumed(nats_server: FederationSpec) -> None:
    spec = nats_server
    rt, _store, consumer = _parts(spec)

    async def body() -> None:
        async with on_bus(rt, spec.nats_url):
            await ensure_jetstream(rt.js, spec.run_id)
            await consumer.bind()
            for seq in range(1, 4):
                await rt.js.publish(events_subject(spec.run_id, "a"), _ev(A1, seq, seq % 2 == 1).to_bytes())
            loop = asyncio.create_task(consumer.backlog_loop())
            await until(lambda: consumer.backlog == 3, 5, "a backlog of 3")
            rt.stop.set()
            await loop

    run(body)
    assert consumer.events_consumed == 0
