"""The app's data path: writes and reads on the federation's store (DESIGN.md section 9).

The store is a JetStream cluster of one real ``nats-server`` per region (``RegionSpec.store``,
on ``127.0.N.5``), apart from the control plane's bus. The app's data is one stream,
``DATA-<run id>``, one subject per write id (``gd.<run id>.data.<id>``), with the replicas,
storage and placement of :class:`~gameday.fedapp.spec.AppState`:

- ``sync``: one replica per region (Raft, at most 3): JetStream acknowledges a write once a
  quorum of nodes stored it, so a node lost loses no acknowledged write;
- ``none``, or the ``store_unreplicated`` defect: one replica, on the primary region's node
  (the defect keeps it in memory): what that node held is gone with it.

Each app instance connects to its own region's node first (the others are its fallbacks),
creates the stream if it is not there (every instance asks for the same configuration, so
the first one wins and the rest find it), and then:

- ``write(id, body)``: publishes with ``Nats-Msg-Id: <id>`` (a retried write, by the client
  or a gateway's retry in another region, is stored once: JetStream's duplicate window) and
  returns the store's acknowledgement: stream sequence and whether it was a duplicate;
- ``lookup(ids)``: which ids are stored, read from the stream's leader (its per-subject counts,
  one request however many ids; not a direct get from a replica that may lag).

Background work: a task queue (stream ``TASKS-<run id>``, work-queue retention: a task is
given to one consumer at a time and gone once acknowledged) that every app instance, in every
region, consumes through one shared durable consumer, as a region's background workers would.
Processing a task records it in ``DONE-<run id>`` with ``Nats-Msg-Id: <task id>``: the record is
the task's effect and its claim at once, so a task redelivered after a worker stalled (a region
frozen past the ack wait) and processed again elsewhere is stored once (processing is
idempotent by task id). ``enqueue(id)`` adds a task; ``processed(ids)`` counts each task's
records. The ``consumers_per_region`` defect gives each region a consumer of its own on a
plain stream and drops the claim: every region processes every task (cron jobs running in
every region, the article's warning).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import nats
import nats.errors
import nats.js.errors
from nats.js.api import AckPolicy, ConsumerConfig, Placement, RetentionPolicy, StorageType, StreamConfig

from gameday.fedapp.common import JsonLog
from gameday.fedapp.spec import AppState, FederationSpec, RegionSpec
from gameday.fedapp.storetiming import LEASE, MAX_OUTSTANDING_PINGS, PING_INTERVAL, RECONNECT_WAIT
from gameday.fedapp.wire import Json

STORE_ERRORS: tuple[type[BaseException], ...] = (nats.errors.Error, TimeoutError, OSError)
"""What a store call may raise while the store is down, electing or unreachable."""
_ANY_STORE_ERROR: tuple[type[BaseException], ...] = (*STORE_ERRORS, nats.js.errors.Error)
PUBLISH_TIMEOUT = 0.4
"""Seconds a write waits for the store's acknowledgement: inside the gateway's default
request budget (0.5 s), so the answer is the app's, not a gateway's timeout."""
LOOKUP_TIMEOUT = 1.0
INFO_INTERVAL = 2.0
"""Seconds between reads of the stream's placement (leader and replicas) for ``/status``."""
DUPLICATE_WINDOW = 120.0
"""Seconds JetStream remembers a write id (a retried write is stored once)."""
REGION_TAG = "region:{region}"
"""The server tag each region's node carries (the ``none`` replica is placed by it)."""


def stream_name(run_id: str) -> str:
    return f"DATA-{run_id}"


def subject_prefix(run_id: str) -> str:
    return f"gd.{run_id}.data"


TASK_WORK = 0.05
"""Seconds of work a task takes (inside which a stalled worker holds it unacknowledged)."""
ACK_WAIT = 2.0
"""Seconds the queue waits for a worker's acknowledgement before giving the task to another."""


def stream_config(spec: FederationSpec, state: AppState, kind: str = "data", region: str | None = None,
                  primary: str | None = None) -> StreamConfig:
    """The stream of *kind* (``data``, ``tasks``, ``done``) every instance asks for (all ask for
    the same); with ``async`` replication the data stream of store region *region*, taking
    clients' writes and the store controller's copies (:func:`async_subjects`); *primary* is
    accepted for the callers' sake and changes nothing: promoting a standby changes no stream."""
    per_region = spec.topology.defects.consumers_per_region
    if kind == "data" and state.mode == "async":
        assert region is not None, "an async federation has a data stream per store region"
        return StreamConfig(
            name=f"{stream_name(spec.run_id)}-{region}",
            subjects=async_subjects(spec.run_id, region),
            num_replicas=1, storage=StorageType.FILE, duplicate_window=DUPLICATE_WINDOW,
            placement=Placement(tags=[REGION_TAG.format(region=region)]))
    data = kind == "data"
    return StreamConfig(
        name={"data": stream_name(spec.run_id), "tasks": f"TASKS-{spec.run_id}", "done": f"DONE-{spec.run_id}"}[kind],
        subjects=[{"data": subject_prefix(spec.run_id), "tasks": f"gd.{spec.run_id}.tasks",
                   "done": f"gd.{spec.run_id}.done"}[kind] + ".>"],
        num_replicas=state.replicas if data else state.queue_replicas,
        storage=StorageType.MEMORY if data and state.storage == "memory" else StorageType.FILE,
        placement=(Placement(tags=[REGION_TAG.format(region=state.placement)]) if data and state.placement
                   else None),
        duplicate_window=DUPLICATE_WINDOW,
        retention=RetentionPolicy.WORK_QUEUE if kind == "tasks" and not per_region else RetentionPolicy.LIMITS,
    )


def async_subjects(run_id: str, region: str) -> list[str]:
    """An ``async`` store region's stream listens for clients' writes to that region
    (``gd.<run>.data.<region>.<id>``) and for the store controller's copies
    (``gd.<run>.repl.<region>.<id>``), whether it is the primary or not: a promotion changes no
    stream, so it needs nothing of JetStream's metadata leader (whose Raft election, 4-9 s, a
    promotion by stream update waited for whenever the lost node held it). Which stream takes
    clients' writes is the announcement's: an app writes only to the announced primary, under a
    lease (:data:`~gameday.fedapp.storetiming.LEASE`); an old primary back is purged before it
    is a standby (:mod:`gameday.fedapp.storectl`)."""
    return [f"{subject_prefix(run_id)}.{region}.>", f"gd.{run_id}.repl.{region}.>"]


def announce_subject(run_id: str) -> str:
    """Where the store controller announces the primary and its epoch (``async``)."""
    return f"gd.{run_id}.store.primary"


class StoreUnavailable(Exception):
    """The store did not take the write (not connected, no stream, refused): nothing stored."""


_INFO_ERRORS: tuple[type[BaseException], ...] = (*_ANY_STORE_ERROR, StoreUnavailable)


class DataStore:
    """One app instance's connection to the store."""

    def __init__(self, spec: FederationSpec, region: RegionSpec, log: JsonLog) -> None:
        state = spec.topology.state
        if state is None:
            raise ValueError("the federation has no state layer")
        self.spec = spec
        self.state = state
        self.region = region
        self.log = log
        self.stream = stream_name(spec.run_id)
        self.prefix = subject_prefix(spec.run_id)
        # Its own region's node first, where there is one (a large federation runs the store in
        # three regions only); the others are where it reconnects.
        nodes = sorted((r for r in spec.regions if r.store is not None), key=lambda r: r.name != region.name)
        self.servers = [f"nats://{r.store.host}:{r.store.port}" for r in nodes if r.store is not None]
        self.nc: Any = None
        self.js: Any = None
        self.ready = False
        self.error: str | None = "not connected yet"
        self.leader: str | None = None
        self.replicas: list[dict[str, Any]] = []
        self.writes_total = self.writes_acked = self.writes_failed = 0
        self.tasks_done = self.tasks_already_done = 0
        self.primary: str | None = None
        """``async``: the primary region as the store controller last announced it."""
        self.epoch = 0
        self.lease_until = 0.0
        """``async``: until when (wall clock) the announced primary may be written to (:data:`LEASE`)."""
        self.pinned = spec.topology.defects.unfenced_old_primary and region.name == state.primary
        """The ``unfenced_old_primary`` defect: the primary region's own apps keep writing to it
        at the epoch they started with (their connection pool points there), whatever is announced."""

    async def _announced(self, msg: Any) -> None:
        try:
            body = json.loads(msg.data)
            raw, epoch = body["primary"], int(body["epoch"])
            primary = None if raw is None else str(raw)  # None: the primary failed, no successor yet
            lease = float(body.get("lease_until") or 0.0)
        except (ValueError, KeyError, TypeError):
            return
        if epoch >= self.epoch:
            if (primary, epoch) != (self.primary, self.epoch):
                self.log("store_primary", primary=primary, epoch=epoch)
            self.primary, self.epoch = primary, epoch
            self.lease_until = lease if primary is not None else 0.0

    def _target(self) -> tuple[str, str]:
        """``(stream, subject prefix)`` writes go to and reads come from now.

        Raises:
            StoreUnavailable: ``async`` and no primary announced yet.
        """
        if self.state.mode != "async":
            return self.stream, self.prefix
        if self.pinned:  # the defect: this region's apps keep writing to the primary they started with
            return f"{self.stream}-{self.state.primary}", f"{self.prefix}.{self.state.primary}"
        if self.primary is None:
            raise StoreUnavailable("no primary: none announced yet, or the primary failed and no standby is "
                                   "promoted yet")
        if time.time() >= self.lease_until:
            raise StoreUnavailable(f"the primary's lease expired (region {self.primary}, epoch {self.epoch}): no "
                                   f"announcement of it heard within {LEASE:g} s")
        return f"{self.stream}-{self.primary}", f"{self.prefix}.{self.primary}"

    async def run(self, stop: asyncio.Event) -> None:
        """Connect, make sure the stream exists, then keep its placement fresh until *stop*."""
        try:
            while not stop.is_set() and self.nc is None:
                try:
                    self.nc = await nats.connect(servers=self.servers, dont_randomize=True, max_reconnect_attempts=-1,
                                                 reconnect_time_wait=RECONNECT_WAIT, connect_timeout=1,
                                                 allow_reconnect=True,
                                                 ping_interval=PING_INTERVAL,
                                                 max_outstanding_pings=MAX_OUTSTANDING_PINGS,
                                                 name=f"app-{self.region.name}")
                except STORE_ERRORS as exc:  # the nodes are starting beside this process
                    self.error = f"connecting: {type(exc).__name__}: {exc}"[:200]
                    await _pause(stop, 0.1)
            if self.nc is None:
                return
            self.js = self.nc.jetstream(timeout=LOOKUP_TIMEOUT)
            if self.state.mode == "async":
                await self.nc.subscribe(announce_subject(self.spec.run_id), cb=self._announced)
            while not stop.is_set() and not self.ready:
                try:
                    kinds = ("tasks", "done") if self.state.mode == "async" else ("data", "tasks", "done")
                    for kind in kinds:  # async: the store controller makes the data streams
                        await self.js.add_stream(stream_config(self.spec, self.state, kind))
                    self.ready, self.error = True, None
                    self.log("store_ready", stream=self.stream, replicas=self.state.replicas,
                             storage=self.state.storage, placement=self.state.placement)
                except _ANY_STORE_ERROR as exc:
                    self.error = f"creating the stream: {type(exc).__name__}: {exc}"[:200]
                    await _pause(stop, 0.1)
            worker = asyncio.create_task(self._work(stop))
            try:
                while not stop.is_set():
                    await self._refresh_info()
                    await _pause(stop, INFO_INTERVAL)
            finally:
                await asyncio.gather(worker, return_exceptions=True)
        finally:
            if self.nc is not None:
                with contextlib.suppress(*STORE_ERRORS):
                    await self.nc.close()

    async def _refresh_info(self) -> None:
        try:
            info = await self.js.stream_info(self._target()[0])
        except _INFO_ERRORS as exc:
            self.error = f"stream info: {type(exc).__name__}: {exc}"[:200]
            return
        cluster = info.cluster
        self.leader = cluster.leader if cluster is not None else None
        self.replicas = [{"name": p.name, "current": p.current, "offline": p.offline, "lag": p.lag}
                         for p in (cluster.replicas or [])] if cluster is not None else []
        self.error = None

    async def write(self, wid: str, body: bytes) -> Json:
        """Store write *wid*; the store's acknowledgement.

        Raises:
            StoreUnavailable: nothing was stored (not connected, the store refused).
            TimeoutError: no acknowledgement within :data:`PUBLISH_TIMEOUT`: the write may or
                may not have been stored (indeterminate).
        """
        self.writes_total += 1
        if not self.ready or self.nc is None or not self.nc.is_connected:
            self.writes_failed += 1
            raise StoreUnavailable(self.error or "not connected to the store")
        try:
            stream, prefix = self._target()
        except StoreUnavailable:
            self.writes_failed += 1
            raise
        epoch = 1 if self.pinned else self.epoch
        try:
            ack = await self.js.publish(f"{prefix}.{wid}", body, timeout=PUBLISH_TIMEOUT,
                                        headers={"Nats-Msg-Id": wid, "Nats-Expected-Stream": stream})
        except (nats.errors.TimeoutError, TimeoutError) as exc:
            self.writes_failed += 1
            raise TimeoutError(f"no acknowledgement from the store within {PUBLISH_TIMEOUT:g} s") from exc
        except nats.errors.NoRespondersError as exc:
            self.writes_failed += 1
            raise StoreUnavailable("no store node took the write (no responders)") from exc
        except _ANY_STORE_ERROR as exc:
            self.writes_failed += 1
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}"[:200]) from exc
        self.writes_acked += 1
        out: Json = {"seq": ack.seq, "stream": ack.stream, "duplicate": bool(ack.duplicate)}
        if self.state.mode == "async":
            out |= {"primary": self.state.primary if self.pinned else self.primary, "epoch": epoch}
        return out

    async def lookup(self, ids: list[str]) -> tuple[dict[str, int], list[str]]:
        """``(id -> times stored (1), ids whose read failed)`` for *ids*; an id in neither was
        read and is not stored.

        Raises:
            StoreUnavailable: not connected to the store, or it did not answer.
        """
        if not self.ready or self.nc is None or not self.nc.is_connected:
            raise StoreUnavailable(self.error or "not connected to the store")
        # One request, answered by the stream's leader: the count of every stored id's subject.
        stream, prefix = self._target()
        if self.state.mode == "async":  # the clients' writes and the controller's copies
            prefix = f"gd.{self.spec.run_id}.*.{prefix.rsplit('.', 1)[-1]}"
        try:
            info = await self.js.stream_info(stream, subjects_filter=f"{prefix}.>")
        except _ANY_STORE_ERROR as exc:  # electing a leader, say: the caller asks again
            raise StoreUnavailable(f"reading the stream: {type(exc).__name__}: {exc}"[:200]) from exc
        stored = {str(k).rsplit(".", 1)[-1]: int(v) for k, v in (info.state.subjects or {}).items()}
        return {w: stored[w] for w in ids if w in stored}, []

    async def read(self, wid: str) -> int | None:
        """Write *wid*'s times stored (None: not stored), read as :meth:`lookup` reads: from the
        primary's stream (``sync``: the stream's leader). The ``reads_from_local_replica`` defect
        reads an ``async`` store's own-region copy instead, which trails by the replication lag.

        Raises:
            StoreUnavailable: not connected to the store, or it did not answer.
        """
        local = self.spec.topology.defects.reads_from_local_replica and self.state.mode == "async" \
            and self.region.store is not None
        if not local:
            found, _ = await self.lookup([wid])
            return found.get(wid)
        if not self.ready or self.nc is None or not self.nc.is_connected:
            raise StoreUnavailable(self.error or "not connected to the store")
        run, region = self.spec.run_id, self.region.name
        try:  # this region's copy: the clients' writes (while it is the primary) and the controller's copies
            info = await self.js.stream_info(f"{self.stream}-{region}", subjects_filter=f"gd.{run}.*.{region}.{wid}")
        except _ANY_STORE_ERROR as exc:
            raise StoreUnavailable(f"reading the local copy: {type(exc).__name__}: {exc}"[:200]) from exc
        counts = [int(v) for v in (info.state.subjects or {}).values()]
        return sum(counts) if counts else None

    # -- the task queue --------------------------------------------------------------------
    async def enqueue(self, tid: str) -> Json:
        """Add task *tid* to the queue (stored once, however often it is sent); raises as :meth:`write`."""
        if not self.ready or self.nc is None or not self.nc.is_connected:
            raise StoreUnavailable(self.error or "not connected to the store")
        try:
            ack = await self.js.publish(f"gd.{self.spec.run_id}.tasks.{tid}", b"", timeout=PUBLISH_TIMEOUT,
                                        headers={"Nats-Msg-Id": tid})
        except (nats.errors.TimeoutError, TimeoutError) as exc:
            raise TimeoutError(f"no acknowledgement from the queue within {PUBLISH_TIMEOUT:g} s") from exc
        except _ANY_STORE_ERROR as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}"[:200]) from exc
        return {"seq": ack.seq, "stream": ack.stream, "duplicate": bool(ack.duplicate)}

    async def processed(self, ids: list[str]) -> dict[str, int]:
        """How many times each of *ids* was processed (absent: never).

        Raises:
            StoreUnavailable: the store did not answer.
        """
        if not self.ready or self.js is None:
            raise StoreUnavailable(self.error or "not connected to the store")
        try:
            run = self.spec.run_id
            info = await self.js.stream_info(f"DONE-{run}", subjects_filter=f"gd.{run}.done.>")
        except _ANY_STORE_ERROR as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}"[:200]) from exc
        counts = {str(k).rsplit(".", 1)[-1]: int(v) for k, v in (info.state.subjects or {}).items()}
        wanted = set(ids)
        return {k: v for k, v in counts.items() if k in wanted}

    async def _work(self, stop: asyncio.Event) -> None:
        """This instance's background worker: take a task, work on it, record it, acknowledge it."""
        per_region = self.spec.topology.defects.consumers_per_region
        durable = f"workers-{self.region.name}" if per_region else "workers"
        sub = None
        while not stop.is_set() and sub is None:
            try:
                sub = await self.js.pull_subscribe(
                    f"gd.{self.spec.run_id}.tasks.>", durable=durable, stream=f"TASKS-{self.spec.run_id}",
                    config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT, max_ack_pending=64))
            except _ANY_STORE_ERROR as exc:
                self.error = f"task consumer: {type(exc).__name__}: {exc}"[:200]
                await _pause(stop, 0.2)
        while not stop.is_set() and sub is not None:
            try:
                msgs = await sub.fetch(1, timeout=1.0)
            except (nats.errors.TimeoutError, TimeoutError):
                continue
            except _ANY_STORE_ERROR:
                await _pause(stop, 0.2)
                continue
            for msg in msgs:
                tid = msg.subject.rsplit(".", 1)[-1]
                await asyncio.sleep(TASK_WORK)
                headers = None if per_region else {"Nats-Msg-Id": f"done-{tid}"}
                try:
                    ack = await self.js.publish(f"gd.{self.spec.run_id}.done.{tid}",
                                                f'{{"region":"{self.region.name}"}}'.encode(),
                                                timeout=PUBLISH_TIMEOUT, headers=headers)
                    await msg.ack()
                except _ANY_STORE_ERROR as exc:  # not acknowledged: the queue gives it out again
                    self.log("task_not_recorded", task=tid, error=f"{type(exc).__name__}")
                    continue
                self.tasks_done += 0 if ack.duplicate else 1
                self.tasks_already_done += 1 if ack.duplicate else 0

    def status(self) -> Json:
        return {"ready": self.ready and (self.state.mode != "async" or self.primary is not None),
                "mode": self.state.mode, "primary": self.primary, "epoch": self.epoch,
                "error": self.error, "stream": self.stream, "leader": self.leader,
                "replicas": self.replicas, "configured_replicas": self.state.replicas,
                "storage": self.state.storage, "writes_total": self.writes_total,
                "writes_acked": self.writes_acked, "writes_failed": self.writes_failed,
                "tasks_done": self.tasks_done, "tasks_already_done": self.tasks_already_done,
                "connected": bool(self.nc is not None and self.nc.is_connected),
                "at": time.time()}


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
