"""What the control plane's parts share while the process runs: the log, the stop event, the
NATS connection and the background tasks (:class:`Runtime`); and the JetStream set-up.

Each part holds the one :class:`Runtime` and reads ``nc``/``js`` when it needs them, so the
parts can be built before the bus is connected (and tested without one where they do not
need it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

import nats.errors
import nats.js.errors
from nats.js.api import StorageType, StreamConfig

from gameday.fedapp.common import JsonLog
from gameday.fedapp.wire import events_stream, events_subject, snapshot_bucket

BUS_ERRORS: tuple[type[BaseException], ...] = (nats.errors.Error, TimeoutError, OSError)
"""What a NATS/JetStream call may raise when the bus is down, slow or restarting."""
RETRY_PAUSE = 0.2
"""Seconds a loop waits after a failed bus call before it tries again."""

T = TypeVar("T")


class Runtime:
    """One control-plane process's shared run state."""

    def __init__(self, log: JsonLog) -> None:
        self.log = log
        self.stop = asyncio.Event()
        """Set when the process stops; replaced by the caller's event in ``run``."""
        self.ready = False
        """Set once the bus is set up and the stored state loaded; cleared on the way out."""
        self.nc: Any = None
        """The ``nats.aio.client.Client`` (None until connected)."""
        self.js: Any = None
        """Its JetStream context."""
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def connected(self) -> bool:
        return bool(self.nc is not None and self.nc.is_connected)

    async def pause(self, seconds: float) -> None:
        """Sleep *seconds*, or less if the process stops first."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)

    async def until_stop(self, coro: Awaitable[T]) -> T | None:
        """Await *coro* unless *stop* is set first (then cancel it and return None)."""
        task = asyncio.ensure_future(coro)
        stopper = asyncio.ensure_future(self.stop.wait())
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            stopper.cancel()
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return None

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run *coro* in the background until it ends or :meth:`cancel_spawned` is called."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def spawned(self) -> list[asyncio.Task[None]]:
        """The background tasks still running."""
        return list(self._tasks)

    async def publish(self, subject: str, payload: bytes) -> None:
        """Core-NATS publish; a bus error is logged, not raised (the next heartbeat repeats it)."""
        try:
            await self.nc.publish(subject, payload)
        except BUS_ERRORS as exc:
            self.log("publish_failed", subject=subject, error=repr(exc))


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
