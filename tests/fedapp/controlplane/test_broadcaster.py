"""The broadcaster against a real nats-server: announcements, their delay, heartbeats, and
diffs answered from the snapshot as announced."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from gameday.fedapp.controlplane.broadcaster import Broadcaster
from gameday.fedapp.snapshot import Snapshot
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import Diff, broadcast_subject, diff_subject, instance_key
from tests.fedapp.controlplane.parts import LoggedRuntime, on_bus
from tests.fedapp.helpers import run, until

A1, A2 = instance_key("a", "a-1"), instance_key("a", "a-2")
UP = {"healthy": True, "weight": 1}


def _versions(*entries: str) -> list[Snapshot]:
    """Snapshots 1..n, the i-th setting the first i of *entries* healthy."""
    out, snap = [], Snapshot()
    for key in entries:
        snap = Snapshot.from_json(snap.to_json())
        snap.set_entry(key, UP)
        out.append(snap)
    return out


async def _diff(nc: Any, spec: FederationSpec, since: int) -> Diff:
    reply = await nc.request(diff_subject(spec.run_id), json.dumps({"since": since}).encode(), timeout=2)
    return Diff.from_bytes(reply.data)


def test_announces_each_new_version_once_and_heartbeats_the_last(nats_server: FederationSpec) -> None:
    spec = nats_server

    async def body() -> None:
        rt = LoggedRuntime()
        async with on_bus(rt, spec.nats_url) as nc:
            heard: list[dict[str, Any]] = []

            async def cb(msg: Any) -> None:
                heard.append(json.loads(msg.data))

            await nc.subscribe(broadcast_subject(spec.run_id), cb=cb)
            await nc.flush()
            bc = Broadcaster(rt, broadcast_subject(spec.run_id), delay=0.0)
            v1, v2 = _versions(A1, A2)
            bc.schedule(v2, v2.to_json())
            bc.schedule(v1, v1.to_json())  # older than announced: not announced again
            await bc.heartbeat()
            await until(lambda: len(heard) >= 2, 5, "a version broadcast and a heartbeat")
            await asyncio.sleep(0.2)
            assert [(b["version"], b["heartbeat"]) for b in heard] == [(2, False), (2, True)]
            assert bc.announced_version == 2 and bc.broadcasts == {"version": 1, "heartbeat": 1}

    run(body)


def test_a_delayed_version_is_neither_broadcast_nor_served_before_its_delay(nats_server: FederationSpec) -> None:
    spec = nats_server

    async def body() -> None:
        rt = LoggedRuntime()
        async with on_bus(rt, spec.nats_url) as nc:
            bc = Broadcaster(rt, broadcast_subject(spec.run_id), delay=0.0)
            await nc.subscribe(diff_subject(spec.run_id), cb=bc.on_diff_request)
            await nc.flush()
            v1, v2 = _versions(A1, A2)
            bc.schedule(v1, v1.to_json())
            bc.delay = 0.6
            t0 = time.monotonic()
            bc.schedule(v2, v2.to_json())
            early = await _diff(nc, spec, 0)
            assert early.version == 1 and set(early.entries) == {A1}, "a puller bypassed the delay"
            await until(lambda: bc.announced_version == 2, 5, "the delayed announcement")
            assert time.monotonic() - t0 >= 0.55
            late = await _diff(nc, spec, 1)
            assert (late.version, late.full, set(late.entries)) == (2, False, {A2})
            assert bc.diffs_served == {"full": 1, "diff": 1}

    run(body)


def test_resume_takes_the_stored_snapshot_as_announced() -> None:
    rt = LoggedRuntime()
    bc = Broadcaster(rt, "unused", delay=0.0)
    (v1,) = _versions(A1)
    bc.resume(v1.to_json())
    assert bc.announced_version == 1 and bc.served.entries == {A1: UP}
    bc.schedule(v1, v1.to_json())  # the same version again: nothing to announce
    assert bc.broadcasts == {"version": 0, "heartbeat": 0} and not rt.events("announced")
