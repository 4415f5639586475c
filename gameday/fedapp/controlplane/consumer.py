"""The event consumer: agents' health-change events from JetStream into the snapshot.

A durable pull consumer (the scope's, explicit ack) is fetched in batches; each event is
applied with :meth:`Snapshot.apply_event` through the store (duplicates and stale events
are no-ops, R5) and acked only after the change is committed, so an event that was not is
redelivered. A message that is not an event is terminated.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
from nats.js.api import AckPolicy, ConsumerConfig

from gameday.fedapp.common import Histogram
from gameday.fedapp.controlplane.bus import BUS_ERRORS, RETRY_PAUSE, Runtime
from gameday.fedapp.controlplane.scope import Scope
from gameday.fedapp.controlplane.store import SnapshotStore
from gameday.fedapp.wire import Event

BACKLOG_POLL = 0.5
FETCH_BATCH = 128
FETCH_TIMEOUT = 0.5
REBIND_AFTER = 5
"""Failed fetches in a row after which the stream and consumer are set up again."""


class EventConsumer:
    """The pull subscription, its loops, and the consumption counters of ``/status``."""

    def __init__(self, rt: Runtime, scope: Scope, store: SnapshotStore,
                 ensure_stream: Callable[[], Awaitable[object]], *, event_delay: float = 0.0) -> None:
        self.rt = rt
        self.event_delay = event_delay
        """Seconds waited before applying each event: 0, or a negative control's consumer falling behind (R13)."""
        self.scope = scope
        self.store = store
        self.ensure_stream = ensure_stream
        """Creates the stream and bucket again (a server that lost its store)."""
        self.events_consumed = 0
        self.events_ignored = 0
        self.events_bad = 0
        self.backlog = 0
        self.ack_pending = 0
        self.latency = Histogram()
        """Seconds from an event's ``observed_at`` to its change committed (R13)."""
        self._sub: Any = None

    async def bind(self) -> None:
        """Bind (or create) the durable pull consumer."""
        self._sub = await self.rt.js.pull_subscribe(
            self.scope.consume,
            durable=self.scope.durable,
            stream=self.scope.stream,
            config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=10.0, max_ack_pending=10_000),
        )

    async def consume_loop(self) -> None:
        failures = 0
        while not self.rt.stop.is_set():
            try:
                msgs = await self._sub.fetch(batch=FETCH_BATCH, timeout=FETCH_TIMEOUT)
            except nats.errors.TimeoutError:
                failures = 0
                continue
            except BUS_ERRORS as exc:
                failures += 1
                self.rt.log("fetch_failed", error=repr(exc), failures=failures)
                await self.rt.pause(RETRY_PAUSE)
                if failures >= REBIND_AFTER:  # the consumer may be gone (a server that lost its store)
                    with contextlib.suppress(*BUS_ERRORS):
                        await self.ensure_stream()
                        await self.bind()
                        failures = 0
                continue
            failures = 0
            for m in msgs:
                await self.handle(m)

    async def handle(self, msg: Any) -> None:
        """Apply one JetStream message and ack it (or terminate it if it is not an event)."""
        try:
            ev = Event.from_bytes(msg.data)
        except (ValueError, KeyError, TypeError) as exc:
            self.events_bad += 1
            self.rt.log("bad_event", error=repr(exc), data=msg.data[:200].decode(errors="replace"))
            with contextlib.suppress(*BUS_ERRORS):
                await msg.term()
            return
        if self.rt.stop.is_set():
            return
        if self.event_delay > 0:  # R13 broken: a consumer falling behind
            await self.rt.pause(self.event_delay)
            if self.rt.stop.is_set():
                return
        bumped = await self.store.mutate(lambda s: s.apply_event(ev))
        if self.rt.stop.is_set():
            return  # not committed for sure: leave it unacked, it is redelivered
        self.latency.observe(max(0.0, time.time() - ev.observed_at))
        self.events_consumed += 1
        if not bumped:
            self.events_ignored += 1
        try:
            await msg.ack()
        except BUS_ERRORS as exc:
            self.rt.log("ack_failed", error=repr(exc))

    async def backlog_loop(self) -> None:
        while not self.rt.stop.is_set():
            try:
                info = await self._sub.consumer_info()
            except BUS_ERRORS:
                pass
            else:
                self.backlog = int(info.num_pending or 0)
                self.ack_pending = int(info.num_ack_pending or 0)
            await self.rt.pause(BACKLOG_POLL)
