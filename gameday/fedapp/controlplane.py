"""The federation control plane: consume agents' events, keep the versioned global snapshot.

One global process (HTTP on ``spec.control_plane``). It

* consumes health-change events from JetStream (durable pull consumer ``cp``, explicit
  ack) and applies them with :meth:`Snapshot.apply_event` (duplicates and stale events
  are no-ops, R5);
* marks regions alive/not alive from the agents' heartbeats (``region_timeout``);
* runs the slow full reconciliation (R3): on start, on a NATS reconnect, when an agent
  with a new epoch is first heard (that region only), every ``reconcile_interval`` and on
  ``POST /admin/reconcile``; it asks every agent for its full state and is the only path
  on which slow state (quotas, labels) changes; on a label conflict the primary wins;
* announces every new version on the broadcast subject after ``broadcast_delay`` and
  re-announces the last announced version every ``heartbeat_interval`` (R4);
* answers diff requests from the snapshot *as announced* (so a delayed broadcast cannot
  be bypassed by a puller).

State modes (``topology.control_plane.state``):

``durable``
    The snapshot lives in the JetStream KV bucket (key ``global``); every change is
    written with compare-and-set on the KV revision. On a CAS conflict (another replica
    wrote) the control plane reloads, re-applies and retries, so replicas cannot fork
    the version. A restart resumes from the stored version.
``ephemeral``
    Memory only, version 0 on every start: a real misconfiguration, kept on purpose
    for the negative controls (the version regresses after a restart).

Layouts (``topology.layout``, R14):

``global``
    The one process above, for everything.
``regional``
    One control plane per region (``--region``; HTTP on the region's ``control_plane``
    endpoint) consumes only its region's instance events (``gd.<run>.revents.<r>``,
    consumer ``cp-<r>``), keeps the regional snapshot under KV key ``region.<r>`` (the
    same CAS discipline) and broadcasts and serves diffs on the region's own subjects.
    When the region's count of healthy instances goes from 0 to more or back it publishes
    ``region/<r>/serving`` on the global events subject: the one regional fact that
    changes global routing. The global tier consumes the global subject only (gateway
    health, ``serving``), marks regions alive, runs the slow reconciliation and never
    holds an instance entry. Each process is described by a :class:`Scope`.

Fault hooks (``POST /admin/fault``): ``{"broadcast_delay": D}`` and the readiness
fault of :class:`~gameday.fedapp.common.ReadyzFault`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import nats.errors
import nats.js.errors
from aiohttp import web
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

from gameday.fedapp.common import Histogram, JsonLog, ReadyzFault, connect_nats, every, json_response, render_metrics
from gameday.fedapp.skeleton import HttpComponent, Route, start_http
from gameday.fedapp.snapshot import Snapshot, healthy_instances, merge_slow
from gameday.fedapp.spec import Endpoint, FederationSpec
from gameday.fedapp.wire import (
    MERGED_SLOW_KEY,
    SNAPSHOT_KEY,
    Event,
    Json,
    agent_state_subject,
    alive_key,
    broadcast_subject,
    diff_subject,
    events_stream,
    events_subject,
    heartbeat_subject,
    is_regional_key,
    regional_broadcast_subject,
    regional_diff_subject,
    regional_events_stream,
    regional_events_subject,
    regional_snapshot_key,
    serving_key,
    slow_key,
    snapshot_bucket,
)

CONSUMER = "cp"
"""Durable name of the control plane's pull consumer on the events stream."""
AGENT_STATE_TIMEOUT = 1.0
"""Seconds to wait for one agent's state reply during a reconciliation pass."""
SYNC_RETRY = 2.0
"""Seconds before a heartbeating agent that did not answer a state request is asked again."""
BACKLOG_POLL = 0.5
ALIVE_CHECK = 0.1
FETCH_BATCH = 128
FETCH_TIMEOUT = 0.5
RETRY_PAUSE = 0.2

BUS_ERRORS: tuple[type[BaseException], ...] = (nats.errors.Error, TimeoutError, OSError)
"""What a NATS/JetStream call may raise when the bus is down, slow or restarting."""

T = TypeVar("T")


@dataclass(frozen=True)
class Scope:
    """What one control-plane process is responsible for (see the module docstring)."""

    name: str
    """``global`` or the region's name."""
    region: str | None
    """The region of a regional control plane; None for the global tier."""
    endpoint: Endpoint
    kv_key: str
    stream: str
    stream_subjects: str
    """The stream's subjects (a wildcard over every region)."""
    consume: str
    """The subject the durable consumer takes (filter)."""
    durable: str
    broadcast: str
    diff: str
    heartbeats: str
    """Agents' heartbeats listened to (liveness, and the re-sync of a restarted agent)."""
    regions: tuple[str, ...]
    """Agents asked for their state on a reconciliation pass."""
    layout: str
    liveness: bool
    """Marks regions alive from heartbeats (the global tier)."""
    slow: bool
    """Runs the slow state of R3 (the global tier)."""

    def owns(self, key: str) -> bool:
        """Whether a health key from an agent's state belongs in this snapshot."""
        if self.layout == "global":
            return True
        return is_regional_key(key) if self.region is not None else not is_regional_key(key)


def scope_for(spec: FederationSpec, region: str | None = None) -> Scope:
    """The scope of the control plane of *region* (regional layout), or of the global tier.

    Raises:
        ValueError: *region* is given but the layout is global or the region unknown.
    """
    run = spec.run_id
    layout = spec.topology.layout
    if region is None:
        return Scope(name="global", region=None, endpoint=spec.control_plane, kv_key=SNAPSHOT_KEY,
                     stream=events_stream(run), stream_subjects=events_subject(run, "*"),
                     consume=events_subject(run, "*"), durable=CONSUMER, broadcast=broadcast_subject(run),
                     diff=diff_subject(run), heartbeats=heartbeat_subject(run, "*"),
                     regions=tuple(r.name for r in spec.regions), layout=layout, liveness=True, slow=True)
    ep = spec.region(region).control_plane
    if layout != "regional" or ep is None:
        raise ValueError(f"controlplane --region {region}: the topology's control-plane layout is {layout!r}; "
                         "regional control planes exist only in the 'regional' layout")
    return Scope(name=region, region=region, endpoint=ep, kv_key=regional_snapshot_key(region),
                 stream=regional_events_stream(run), stream_subjects=regional_events_subject(run, "*"),
                 consume=regional_events_subject(run, region), durable=f"{CONSUMER}-{region}",
                 broadcast=regional_broadcast_subject(run, region), diff=regional_diff_subject(run, region),
                 heartbeats=heartbeat_subject(run, region), regions=(region,), layout=layout,
                 liveness=False, slow=False)


async def ensure_jetstream(js: Any, run_id: str, *, stream: str | None = None, subjects: str | None = None) -> Any:
    """Create the events stream (default: the global one) and the snapshot KV bucket if
    missing; return the KV handle.

    Idempotent, and safe against a concurrent control plane creating them at the same
    time (an add that loses the race is followed by a lookup).
    """
    name = stream or events_stream(run_id)
    try:
        await js.stream_info(name)
    except nats.js.errors.NotFoundError:
        try:
            await js.add_stream(
                StreamConfig(name=name, subjects=[subjects or events_subject(run_id, "*")], storage=StorageType.FILE)
            )
        except nats.js.errors.BadRequestError:
            await js.stream_info(name)  # created concurrently; raises if it really is missing
    bucket = snapshot_bucket(run_id)
    try:
        return await js.key_value(bucket)
    except nats.js.errors.BucketNotFoundError:
        try:
            return await js.create_key_value(bucket=bucket, history=1, storage=StorageType.FILE)
        except nats.js.errors.BadRequestError:
            return await js.key_value(bucket)


class ControlPlane(HttpComponent):
    """The control plane's state and loops; :func:`serve` runs one."""

    def __init__(self, spec: FederationSpec, log: JsonLog, scope: Scope | None = None) -> None:
        self.spec = spec
        self.log = log
        self.scope = scope or scope_for(spec)
        self.run_id = spec.run_id
        self.timing = spec.topology.timing
        self.regions = list(self.scope.regions)
        self.epoch = time.time_ns()
        """Orders this incarnation's ``serving`` events (regional scope), like an agent's epoch."""
        self._serving_seq = 0
        self._serving_sent: bool | None = None
        self._serving_want: bool | None = None
        self._serving_observed_at = 0.0
        self._serving_kick = asyncio.Event()
        self.primary = spec.topology.primary_region
        self.durable = spec.topology.control_plane.state == "durable"
        self.broadcast_delay = float(spec.topology.control_plane.broadcast_delay)
        self.ready_fault = ReadyzFault()

        self.snapshot = Snapshot()
        self._data = self.snapshot.to_json()
        self._revision = 0
        self._served = Snapshot()
        self.announced_version = 0
        self.last_change_at: float | None = None

        self.ready = False
        self.events_consumed = 0
        self.events_ignored = 0
        self.events_bad = 0
        self.broadcasts = {"version": 0, "heartbeat": 0}
        self.diffs_served = {"diff": 0, "full": 0}
        self._diff_cache: dict[tuple[int, int, int], tuple[bool, bytes]] = {}
        self.cas_conflicts = 0
        self.consumer_backlog = 0
        self.consumer_ack_pending = 0
        self.latency = Histogram()
        self.reconcile_passes = 0
        self.region_syncs = 0
        self.reconcile_last_at: float | None = None
        self.reconcile_last: Json = {}

        now = time.monotonic()
        self._alive_baseline = now
        self.last_heard: dict[str, float] = {}
        self.epochs: dict[str, int] = {}
        self._sync_not_before: dict[str, float] = {}

        self._lock = asyncio.Lock()
        self._reconcile_lock = asyncio.Lock()
        self._reconcile_kick = asyncio.Event()
        self._alive_kick = asyncio.Event()
        self._stop = asyncio.Event()
        self._announcers: set[asyncio.Task[None]] = set()
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._nc: Any = None
        self._js: Any = None
        self._kv: Any = None
        self._sub: Any = None
        self._subscribed = False

    # -- lifecycle ------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        ep = self.scope.endpoint
        name = "controlplane" if self.scope.region is None else f"controlplane-{self.scope.region}"
        runner = await start_http(self, ep.host, ep.port, self.log, self.spec.admin.get(name))
        self.log("started", host=ep.host, port=ep.port, state_mode=self._mode(),
                 broadcast_delay=self.broadcast_delay, scope=self.scope.name, layout=self.scope.layout)
        tasks: list[asyncio.Task[None]] = []
        try:
            nc = await self._until_stop(connect_nats(
                self.spec.nats_url, f"controlplane-{self.scope.name}", self.log,
                reconnected_cb=self._on_reconnected, disconnected_cb=self._on_disconnected,
            ))
            if nc is None:
                return
            self._nc = nc
            self._js = nc.jetstream()
            if not await self._setup_with_retry():
                return
            self.ready = True
            self.log("ready", version=self.snapshot.version, state_mode=self._mode())
            self._reconcile_kick.set()  # start-up sync
            tasks = [
                asyncio.create_task(self._consume_loop()),
                asyncio.create_task(self._backlog_loop()),
                asyncio.create_task(self._reconcile_loop()),
                asyncio.create_task(every(self.timing.heartbeat_interval, self._broadcast_heartbeat, stop)),
            ]
            if self.scope.liveness:
                tasks.append(asyncio.create_task(self._alive_loop()))
            if self.scope.region is not None:
                self._note_serving(self.snapshot)  # a restarted one tells the global tier again
                tasks.append(asyncio.create_task(self._serving_loop()))
            await stop.wait()
        finally:
            self.ready = False
            for t in [*tasks, *self._announcers, *self._side_tasks]:
                t.cancel()
            await asyncio.gather(*tasks, *self._announcers, *self._side_tasks, return_exceptions=True)
            if self._nc is not None:
                with contextlib.suppress(*BUS_ERRORS):
                    await self._nc.close()
            await runner.cleanup()
            self.log("stopped", version=self.snapshot.version)

    async def _until_stop(self, coro: Awaitable[T]) -> T | None:
        """Await *coro* unless *stop* is set first (then cancel it and return None)."""
        task = asyncio.ensure_future(coro)
        stopper = asyncio.ensure_future(self._stop.wait())
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            stopper.cancel()
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return None

    async def _setup_with_retry(self) -> bool:
        while not self._stop.is_set():
            try:
                await self._setup()
            except BUS_ERRORS as exc:
                self.log("setup_failed", error=repr(exc))
                await self._pause(0.5)
            else:
                return True
        return False

    async def _setup(self) -> None:
        """Ensure the stream and bucket, load the state, bind the pull consumer."""
        self._kv = await self._ensure_jetstream()
        if self.durable and self.snapshot.version == 0 and self._revision == 0:
            await self._load()
        await self._bind_consumer()
        if not self._subscribed:
            await self._nc.subscribe(self.scope.heartbeats, cb=self._on_heartbeat)
            await self._nc.subscribe(self.scope.diff, cb=self._on_diff_request)
            self._subscribed = True

    async def _ensure_jetstream(self) -> Any:
        return await ensure_jetstream(self._js, self.run_id, stream=self.scope.stream,
                                      subjects=self.scope.stream_subjects)

    async def _bind_consumer(self) -> None:
        self._sub = await self._js.pull_subscribe(
            self.scope.consume,
            durable=self.scope.durable,
            stream=self.scope.stream,
            config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=10.0, max_ack_pending=10_000),
        )

    async def _load(self) -> None:
        """Load the durable snapshot from KV (empty if the key does not exist yet)."""
        try:
            entry = await self._kv.get(self.scope.kv_key)
        except nats.js.errors.KeyNotFoundError as exc:
            gone = getattr(exc, "entry", None)
            self._revision = int(getattr(gone, "revision", 0) or 0)
            self.log("state_loaded", version=0, revision=self._revision, found=False)
            return
        snap = Snapshot.from_json(entry.value)
        self.snapshot, self._data, self._revision = snap, entry.value, int(entry.revision)
        self._served = Snapshot.from_json(entry.value)
        self._diff_cache.clear()
        self.announced_version = snap.version  # announced by the previous incarnation
        self.log("state_loaded", version=snap.version, revision=self._revision, found=True,
                 entries=len(snap.entries))

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    async def _on_disconnected(self) -> None:
        self.log("nats_disconnected")

    async def _on_reconnected(self) -> None:
        self.log("nats_reconnected")
        now = time.monotonic()
        # Silence while we were cut off says nothing about the regions: restart the clocks.
        self._alive_baseline = now
        for r in self.last_heard:
            self.last_heard[r] = now
        self._reconcile_kick.set()

    # -- the one way the snapshot changes -------------------------------------------
    async def mutate(self, fn: Callable[[Snapshot], object]) -> bool:
        """Apply *fn* to a copy of the snapshot and commit it (durably, with CAS, if so configured).

        Returns:
            True if the version increased. Retries on CAS conflicts and bus errors
            until it succeeds or the component stops (then False, nothing committed).
        """
        async with self._lock:
            while not self._stop.is_set():
                work = Snapshot.from_json(self._data)
                fn(work)
                data = work.to_json()
                if data == self._data:
                    return False
                if self.durable:
                    try:
                        rev = await self._kv.update(self.scope.kv_key, data, last=self._revision)
                    except nats.js.errors.KeyWrongLastSequenceError:
                        self.cas_conflicts += 1
                        self.log("cas_conflict", revision=self._revision, version=self.snapshot.version)
                        await self._reload_quietly()
                        continue
                    except BUS_ERRORS as exc:
                        self.log("persist_failed", error=repr(exc), version=self.snapshot.version)
                        await self._pause(RETRY_PAUSE)
                        await self._reload_quietly()
                        continue
                    self._revision = int(rev)
                old = self.snapshot.version
                self._commit(work, data)
                return work.version > old
            return False

    async def _reload_quietly(self) -> None:
        """Reload the snapshot from KV after a conflict; on a bus error keep what we have."""
        try:
            entry = await self._kv.get(self.scope.kv_key)
        except nats.js.errors.KeyNotFoundError as exc:
            # The stored snapshot is gone (a bus that lost its store): write ours afresh.
            gone = getattr(exc, "entry", None)
            self._revision = int(getattr(gone, "revision", 0) or 0)
            self.log("stored_state_missing", version=self.snapshot.version, revision=self._revision)
            return
        except BUS_ERRORS as exc:
            self.log("reload_failed", error=repr(exc))
            return
        if int(entry.revision) == self._revision:
            return
        self._revision = int(entry.revision)
        self._commit(Snapshot.from_json(entry.value), entry.value)

    def _commit(self, snap: Snapshot, data: bytes) -> None:
        old = self.snapshot.version
        self.snapshot, self._data = snap, data
        if snap.version <= old:
            return
        self.last_change_at = time.time()
        for key, at in sorted(snap.changed_at.items(), key=lambda kv: kv[1]):
            if at > old:
                self.log("version", version=at, key=key, value=snap.entries.get(key))
        self._schedule_announce(snap.version, data)
        if self.scope.region is not None:
            self._note_serving(snap)

    # -- regional scope: the one regional fact the global tier needs ----------------------
    def _note_serving(self, snap: Snapshot, observed_at: float | None = None) -> None:
        """Queue ``region/<r>/serving`` for the global tier if it differs from what was sent."""
        region = self.scope.region
        if region is None or not any(is_regional_key(k) for k in snap.entries):
            return  # nothing known about the region's instances yet: say nothing
        serving = bool(healthy_instances(snap.entries, region))
        if serving != self._serving_sent or self._serving_want is not None:
            self._serving_want = serving
            self._serving_observed_at = observed_at or time.time()
            self._serving_kick.set()

    async def _serving_loop(self) -> None:
        """Publish the queued ``serving`` value on the global events subject until JetStream acks it."""
        region = self.scope.region
        assert region is not None
        while not self._stop.is_set():
            if self._serving_want is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._serving_kick.wait(), timeout=1.0)
                self._serving_kick.clear()
                continue
            want = self._serving_want
            self._serving_seq += 1
            ev = Event(region=region, epoch=self.epoch, seq=self._serving_seq, key=serving_key(region),
                       value={"serving": want}, observed_at=self._serving_observed_at)
            try:
                await self._js.publish(events_subject(self.run_id, region), ev.to_bytes(), timeout=1.0,
                                       headers={"Nats-Msg-Id": f"cp-{self.epoch}-{ev.seq}"})
            except BUS_ERRORS as exc:
                self.log("serving_publish_failed", error=type(exc).__name__, serving=want)
                await self._pause(RETRY_PAUSE)
                continue
            self._serving_sent = want
            if self._serving_want == want:
                self._serving_want = None
            self.log("serving_published", serving=want, seq=ev.seq)

    # -- broadcasts and diffs --------------------------------------------------------
    def _schedule_announce(self, version: int, data: bytes) -> None:
        delay = self.broadcast_delay
        if delay <= 0:
            self._announce(version, data)
            return
        task = asyncio.create_task(self._announce_later(version, data, delay))
        self._announcers.add(task)
        task.add_done_callback(self._announcers.discard)

    async def _announce_later(self, version: int, data: bytes, delay: float) -> None:
        await asyncio.sleep(delay)
        self._announce(version, data)

    def _announce(self, version: int, data: bytes) -> None:
        if version <= self.announced_version:
            return
        self.announced_version = version
        self._served = Snapshot.from_json(data)
        self._diff_cache.clear()
        self._publish_broadcast(heartbeat=False)
        self.log("announced", version=version, delay=self.broadcast_delay)

    def _publish_broadcast(self, *, heartbeat: bool) -> None:
        if self._nc is None:
            return
        body = json.dumps({"version": self.announced_version, "at": time.time(), "heartbeat": heartbeat})
        task = asyncio.create_task(self._publish(self.scope.broadcast, body.encode()))
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)
        self.broadcasts["heartbeat" if heartbeat else "version"] += 1

    async def _publish(self, subject: str, payload: bytes) -> None:
        try:
            await self._nc.publish(subject, payload)
        except BUS_ERRORS as exc:
            self.log("publish_failed", subject=subject, error=repr(exc))

    async def _broadcast_heartbeat(self) -> None:
        self._publish_broadcast(heartbeat=True)

    async def _on_diff_request(self, msg: Any) -> None:
        try:
            since = int(json.loads(msg.data or b"{}").get("since", 0))
        except (ValueError, TypeError, AttributeError):
            since = 0
        # Every follower asks with the same ``since`` after a broadcast: encode each answer
        # once per served version (at 30 regions that is 60+ identical requests a version).
        key = (since, self._served.version, id(self._served))  # cleared whenever _served is replaced
        cached = self._diff_cache.get(key)
        if cached is None:
            diff = self._served.diff_since(since)
            cached = (diff.full, diff.to_bytes())
            if len(self._diff_cache) > 64:
                self._diff_cache.clear()
            self._diff_cache[key] = cached
        self.diffs_served["full" if cached[0] else "diff"] += 1
        with contextlib.suppress(*BUS_ERRORS):
            await msg.respond(cached[1])

    # -- events ----------------------------------------------------------------------
    async def _consume_loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                msgs = await self._sub.fetch(batch=FETCH_BATCH, timeout=FETCH_TIMEOUT)
            except nats.errors.TimeoutError:
                failures = 0
                continue
            except BUS_ERRORS as exc:
                failures += 1
                self.log("fetch_failed", error=repr(exc), failures=failures)
                await self._pause(RETRY_PAUSE)
                if failures >= 5:  # the consumer may be gone (a server that lost its store)
                    with contextlib.suppress(*BUS_ERRORS):
                        await self._ensure_jetstream()
                        await self._bind_consumer()
                        failures = 0
                continue
            failures = 0
            for m in msgs:
                await self._handle(m)

    async def _handle(self, msg: Any) -> None:
        try:
            ev = Event.from_bytes(msg.data)
        except (ValueError, KeyError, TypeError) as exc:
            self.events_bad += 1
            self.log("bad_event", error=repr(exc), data=msg.data[:200].decode(errors="replace"))
            with contextlib.suppress(*BUS_ERRORS):
                await msg.term()
            return
        if self._stop.is_set():
            return
        bumped = await self.mutate(lambda s: s.apply_event(ev))
        if self._stop.is_set():
            return  # not committed for sure: leave it unacked, it is redelivered
        self.latency.observe(max(0.0, time.time() - ev.observed_at))
        self.events_consumed += 1
        if not bumped:
            self.events_ignored += 1
        try:
            await msg.ack()
        except BUS_ERRORS as exc:
            self.log("ack_failed", error=repr(exc))

    async def _backlog_loop(self) -> None:
        while not self._stop.is_set():
            try:
                info = await self._sub.consumer_info()
            except BUS_ERRORS:
                pass
            else:
                self.consumer_backlog = int(info.num_pending or 0)
                self.consumer_ack_pending = int(info.num_ack_pending or 0)
            await self._pause(BACKLOG_POLL)

    # -- heartbeats and liveness -----------------------------------------------------
    async def _on_heartbeat(self, msg: Any) -> None:
        region = msg.subject.rsplit(".", 1)[-1]
        if region not in self.regions:
            return
        self.last_heard[region] = time.monotonic()
        try:
            epoch = int(json.loads(msg.data).get("epoch", 0))
        except (ValueError, TypeError, AttributeError):
            epoch = 0
        if self.scope.liveness and self.snapshot.entries.get(alive_key(region)) != {"alive": True}:
            self._alive_kick.set()
        now = time.monotonic()
        if epoch and self.epochs.get(region) != epoch and now >= self._sync_not_before.get(region, 0.0):
            first = region not in self.epochs
            self.epochs[region] = epoch
            if self.ready:
                self.log("agent_epoch", region=region, epoch=epoch, first=first)
                task = asyncio.create_task(self._sync_region(region))
                self._side_tasks.add(task)
                task.add_done_callback(self._side_tasks.discard)

    async def _sync_region(self, region: str) -> None:
        await self.reconcile(reason="agent_epoch", regions=[region])

    def alive_changes(self, now: float) -> dict[str, bool]:
        """Regions whose ``alive`` entry must change now."""
        timeout = self.timing.region_timeout
        out: dict[str, bool] = {}
        for r in self.regions:
            heard = self.last_heard.get(r)
            if heard is None:
                if now - self._alive_baseline <= timeout:
                    continue  # never heard, but we have not waited long enough to say
                alive = False
            else:
                alive = now - heard <= timeout
            if self.snapshot.entries.get(alive_key(r)) != {"alive": alive}:
                out[r] = alive
        return out

    async def _alive_loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._alive_kick.wait(), timeout=ALIVE_CHECK)
            self._alive_kick.clear()
            if self._nc is None or not self._nc.is_connected:
                continue  # our own disconnection is no evidence about the regions
            changes = self.alive_changes(time.monotonic())
            if not changes:
                continue

            def fn(s: Snapshot, changes: dict[str, bool] = changes) -> None:
                for r, alive in changes.items():
                    s.set_entry(alive_key(r), {"alive": alive})

            await self.mutate(fn)
            for r, alive in changes.items():
                self.log("region_alive", region=r, alive=alive)

    # -- slow full reconciliation (R3) -----------------------------------------------
    async def _reconcile_loop(self) -> None:
        first = True
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reconcile_kick.wait(), timeout=self.timing.reconcile_interval)
            kicked = self._reconcile_kick.is_set()
            self._reconcile_kick.clear()
            if self._stop.is_set():
                return
            reason = "start" if first else ("kick" if kicked else "interval")
            first = False
            await self.reconcile(reason=reason)

    async def _ask_agent(self, region: str) -> Json | None:
        try:
            msg = await self._nc.request(agent_state_subject(self.run_id, region), b"{}",
                                         timeout=AGENT_STATE_TIMEOUT)
            reply = json.loads(msg.data)
        except BUS_ERRORS as exc:
            self.log("agent_state_failed", region=region, error=type(exc).__name__)
            return None
        except ValueError as exc:
            self.log("agent_state_bad", region=region, error=repr(exc))
            return None
        if not isinstance(reply, dict) or not isinstance(reply.get("slow"), dict) \
                or not isinstance(reply.get("health"), dict):
            self.log("agent_state_bad", region=region, error="missing slow/health")
            return None
        return reply

    async def reconcile(self, *, reason: str, regions: list[str] | None = None) -> Json:
        """Ask agents for their full state and fold it into the snapshot.

        Health entries are set directly (no event marks, so a later real event still
        applies); slow state is stored per region and merged with the primary winning.
        """
        targets = regions if regions is not None else self.regions
        async with self._reconcile_lock:
            if self._nc is None:
                return {"replied": [], "missing": targets}
            replies = await asyncio.gather(*(self._ask_agent(r) for r in targets))
            got = {r: rep for r, rep in zip(targets, replies, strict=True) if rep is not None}
            prefix_ok = {r: f"region/{r}/" for r in got}

            def fn(s: Snapshot) -> None:
                for r, rep in got.items():
                    for key, value in sorted(rep["health"].items()):
                        if isinstance(value, dict) and str(key).startswith(prefix_ok[r]) \
                                and self.scope.owns(str(key)):
                            s.set_entry(str(key), value)
                    if not self.scope.slow:
                        continue
                    slow = rep["slow"]
                    s.set_entry(slow_key(r), {"quota": dict(slow.get("quota") or {}),
                                              "labels": dict(slow.get("labels") or {})})
                known = {r: s.entries[slow_key(r)] for r in self.regions if slow_key(r) in s.entries}
                if known and self.scope.slow:
                    s.set_entry(MERGED_SLOW_KEY, merge_slow(known, self.primary))

            before = self.snapshot.version
            if got:
                await self.mutate(fn)
            for r in set(targets) - set(got):
                # forget the agent's epoch: a heartbeat retries this region (not too often)
                self.epochs.pop(r, None)
                self._sync_not_before[r] = time.monotonic() + SYNC_RETRY
            full = regions is None
            if full:
                self.reconcile_passes += 1
                self.reconcile_last_at = time.time()
            else:
                self.region_syncs += 1
            result: Json = {
                "reason": reason,
                "full": full,
                "replied": sorted(got),
                "missing": sorted(set(targets) - set(got)),
                "version_before": before,
                "version": self.snapshot.version,
            }
            self.reconcile_last = result
            self.log("reconcile", **result)
            return result

    # -- HTTP ------------------------------------------------------------------------
    def _mode(self) -> str:
        return "durable" if self.durable else "ephemeral"

    def status(self) -> Json:
        def q(v: float) -> float | None:
            return None if math.isnan(v) else round(v, 6)

        return {
            "version": self.snapshot.version,
            "scope": self.scope.name,
            "layout": self.scope.layout,
            "announced_version": self.announced_version,
            "last_change_at": self.last_change_at,
            "state_mode": self._mode(),
            "ready": self.ready,
            "nats_connected": bool(self._nc is not None and self._nc.is_connected),
            "broadcast_delay": self.broadcast_delay,
            "consumer_backlog": self.consumer_backlog,
            "consumer_ack_pending": self.consumer_ack_pending,
            "events_consumed": self.events_consumed,
            "events_ignored": self.events_ignored,
            "events_bad": self.events_bad,
            "processing_latency_p50_s": q(self.latency.quantile(0.5)),
            "processing_latency_p99_s": q(self.latency.quantile(0.99)),
            "full_snapshot_bytes": len(self.snapshot.diff_since(0).to_bytes()),
            "entries": len(self.snapshot.entries),
            "regions_alive": {
                r: bool((self.snapshot.entries.get(alive_key(r)) or {}).get("alive")) for r in self.regions
            } if self.scope.liveness else {},
            "reconcile": {
                "last_at": self.reconcile_last_at,
                "passes": self.reconcile_passes,
                "region_syncs": self.region_syncs,
                "last": self.reconcile_last,
            },
            "broadcasts": dict(self.broadcasts),
            "diffs_served": dict(self.diffs_served),
            "cas_conflicts": self.cas_conflicts,
            "revision": self._revision,
            "faults": self.fault_state(),
        }

    def metrics(self) -> str:
        samples: list[tuple[str, str, float]] = [
            ("gameday_cp_version", "", self.snapshot.version),
            ("gameday_cp_announced_version", "", self.announced_version),
            ("gameday_cp_events_consumed_total", "", self.events_consumed),
            ("gameday_cp_events_ignored_total", "", self.events_ignored),
            ("gameday_cp_backlog", "", self.consumer_backlog),
            ("gameday_cp_broadcasts_total", 'kind="version"', self.broadcasts["version"]),
            ("gameday_cp_broadcasts_total", 'kind="heartbeat"', self.broadcasts["heartbeat"]),
            ("gameday_cp_reconcile_passes_total", "", self.reconcile_passes),
            ("gameday_cp_cas_conflicts_total", "", self.cas_conflicts),
            ("gameday_cp_broadcast_delay_seconds", "", self.broadcast_delay),
        ]
        for r in self.regions if self.scope.liveness else ():
            alive = bool((self.snapshot.entries.get(alive_key(r)) or {}).get("alive"))
            samples.append(("gameday_cp_region_alive", f'region="{r}"', 1 if alive else 0))
        return render_metrics(
            samples,
            help_text={
                "gameday_cp_version": "Global snapshot version (R5).",
                "gameday_cp_announced_version": "Last version announced on the broadcast subject.",
                "gameday_cp_events_consumed_total": "Agent events consumed from JetStream.",
                "gameday_cp_events_ignored_total": (
                    "Consumed events that changed nothing (duplicate, stale, no-op)."
                ),
                "gameday_cp_backlog": "Events pending on the cp consumer (R13).",
                "gameday_cp_broadcasts_total": "Version broadcasts published.",
                "gameday_cp_processing_latency_seconds": "Event observed_at to applied (R13).",
            },
            histograms={"gameday_cp_processing_latency_seconds": self.latency},
        )

    def unready_reason(self) -> str | None:
        return None if self.ready else "starting"

    def ready_detail(self) -> Json:
        return {"version": self.snapshot.version}

    def apply_fault(self, body: Json) -> None:
        if "broadcast_delay" in body:
            try:
                delay = float(body["broadcast_delay"])
            except (ValueError, TypeError) as exc:
                raise ValueError(f"broadcast_delay: {exc}") from exc
            if not 0 <= delay <= 3600:
                raise ValueError(f"broadcast_delay: got {delay}, expected 0..3600 seconds")
            self.broadcast_delay = delay

    def fault_state(self) -> Json:
        return {"broadcast_delay": self.broadcast_delay, "readyz": self.ready_fault.describe()}

    async def _snapshot(self, _: web.Request) -> web.Response:
        s = self.snapshot
        return json_response({"version": s.version, "announced_version": self.announced_version,
                              "entries": s.entries, "changed_at": s.changed_at})

    async def _reconcile(self, _: web.Request) -> web.Response:
        if not self.ready:
            return json_response({"error": "not ready"}, status=503)
        return json_response(await self.reconcile(reason="admin"))

    def admin_routes(self) -> list[Route]:
        return [Route("POST", "/admin/reconcile", self._reconcile)]

    def public_routes(self) -> list[Route]:
        return [Route("GET", "/snapshot", self._snapshot)]


async def serve(spec: FederationSpec, region: str | None, instance: str | None, stop: asyncio.Event) -> None:
    """Run the federation control plane (the global tier), or with *region* that region's
    control plane (regional layout), until *stop* is set (*instance* unused)."""
    del instance
    try:
        scope = scope_for(spec, region)
    except (ValueError, KeyError) as exc:
        raise SystemExit(str(exc)) from exc
    await ControlPlane(spec, JsonLog("controlplane" if region is None else f"controlplane-{region}"), scope).run(stop)
