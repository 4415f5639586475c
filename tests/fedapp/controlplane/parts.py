"""Shared by the control-plane part tests: a run state whose log the test can read, and a
connection of it to the test's real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import nats

from gameday.fedapp.common import JsonLog
from gameday.fedapp.controlplane import Runtime


class LoggedRuntime(Runtime):
    """A :class:`Runtime` logging to memory; :meth:`events` reads it back."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        super().__init__(JsonLog("cp-test", stream=self.buffer))

    def events(self, name: str) -> list[dict[str, Any]]:
        """The log lines of event *name*, oldest first."""
        lines = [json.loads(line) for line in self.buffer.getvalue().splitlines()]
        return [line for line in lines if line["event"] == name]


@contextlib.asynccontextmanager
async def on_bus(rt: Runtime, url: str) -> AsyncIterator[Any]:
    """Connect *rt* to the nats-server at *url* (closed, and background tasks cancelled, at the end)."""
    rt.nc = await nats.connect(url)
    rt.js = rt.nc.jetstream()
    try:
        yield rt.nc
    finally:
        rt.stop.set()
        spawned = rt.spawned()
        for task in spawned:
            task.cancel()
        await asyncio.gather(*spawned, return_exceptions=True)
        await rt.nc.close()
