"""The regional ``serving`` fact on a real JetStream: published when the region's healthy
instances go from none to some and back, never before anything is known, retried until acked."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gameday.fedapp.controlplane import ensure_jetstream
from gameday.fedapp.controlplane.serving import ServingReporter
from gameday.fedapp.snapshot import Snapshot
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import Event, events_subject, instance_key, serving_key
from tests.fedapp.controlplane.parts import LoggedRuntime, on_bus
from tests.fedapp.helpers import run, until


def _snap(**healthy: bool) -> Snapshot:
    s = Snapshot()
    for inst, up in healthy.items():
        s.set_entry(instance_key("a", inst.replace("_", "-")), {"healthy": up, "weight": 1})
    return s


def test_serving_is_published_on_each_change_only(
    make_spec: Callable[..., FederationSpec], nats_for: Callable[[FederationSpec], Any]
) -> None:
    spec = make_spec(control_plane={"layout": "regional"})
    nats_for(spec)

    async def body() -> None:
        rt = LoggedRuntime()
        async with on_bus(rt, spec.nats_url) as nc:
            await ensure_jetstream(rt.js, spec.run_id)
            heard: list[Event] = []

            async def cb(msg: Any) -> None:
                heard.append(Event.from_bytes(msg.data))

            await nc.subscribe(events_subject(spec.run_id, "a"), cb=cb)
            await nc.flush()
            rep = ServingReporter(rt, "a", run_id=spec.run_id)
            loop = asyncio.create_task(rep.loop())
            rep.note(Snapshot())  # nothing known about the instances: say nothing
            rep.note(_snap(a_1=True))
            await until(lambda: len(heard) == 1, 5, "serving: true")
            rep.on_bump(_snap(a_1=True, a_2=True), b"")  # still serving: nothing new
            rep.note(_snap(a_1=False, a_2=False))
            await until(lambda: len(heard) == 2, 5, "serving: false")
            await asyncio.sleep(0.3)
            rt.stop.set()
            await asyncio.wait_for(loop, 5)
            assert [(e.key, e.value, e.seq, e.epoch) for e in heard] == [
                (serving_key("a"), {"serving": True}, 1, rep.epoch),
                (serving_key("a"), {"serving": False}, 2, rep.epoch),
            ]

    run(body)
