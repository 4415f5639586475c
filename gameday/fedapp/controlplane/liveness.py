"""Agents' heartbeats: region liveness (the global tier) and the re-sync of a restarted agent.

A region is marked alive (``region/<r>/alive``) while its agent was heard within
``region_timeout``, and not alive once it was not (or was never heard for that long since
the start or the last reconnect). The epoch a heartbeat carries goes to the reconciler,
which syncs a region whose agent is new or restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from gameday.fedapp.controlplane.bus import Runtime
from gameday.fedapp.controlplane.reconciler import Reconciler
from gameday.fedapp.controlplane.scope import Scope
from gameday.fedapp.controlplane.store import SnapshotStore
from gameday.fedapp.snapshot import Snapshot
from gameday.fedapp.wire import alive_key

ALIVE_CHECK = 0.1
"""Seconds between liveness checks when no heartbeat kicks one sooner."""


def region_alive(snap: Snapshot, region: str) -> bool:
    """Whether *snap* marks *region* alive."""
    return bool((snap.entries.get(alive_key(region)) or {}).get("alive"))


class Liveness:
    """When each region's agent was last heard, and the loop that marks regions alive."""

    def __init__(self, rt: Runtime, scope: Scope, store: SnapshotStore, reconciler: Reconciler, *,
                 timeout: float) -> None:
        self.rt = rt
        self.scope = scope
        self.store = store
        self.reconciler = reconciler
        self.timeout = timeout
        """``region_timeout``: seconds of silence after which a region is not alive."""
        self.last_heard: dict[str, float] = {}
        self._baseline = time.monotonic()
        self._kick = asyncio.Event()

    async def on_heartbeat(self, msg: Any) -> None:
        """One agent heartbeat (``...heartbeat.<region>``, JSON with its ``epoch``)."""
        region = msg.subject.rsplit(".", 1)[-1]
        if region not in self.scope.regions:
            return
        self.last_heard[region] = time.monotonic()
        try:
            epoch = int(json.loads(msg.data).get("epoch", 0))
        except (ValueError, TypeError, AttributeError):
            epoch = 0
        if self.scope.liveness and self.store.snapshot.entries.get(alive_key(region)) != {"alive": True}:
            self._kick.set()
        self.reconciler.note_epoch(region, epoch)

    def restart_clocks(self) -> None:
        """Silence while we were cut off from the bus says nothing about the regions."""
        now = time.monotonic()
        self._baseline = now
        for r in self.last_heard:
            self.last_heard[r] = now

    def alive_changes(self, now: float) -> dict[str, bool]:
        """Regions whose ``alive`` entry must change now."""
        out: dict[str, bool] = {}
        for r in self.scope.regions:
            heard = self.last_heard.get(r)
            if heard is None:
                if now - self._baseline <= self.timeout:
                    continue  # never heard, but we have not waited long enough to say
                alive = False
            else:
                alive = now - heard <= self.timeout
            if self.store.snapshot.entries.get(alive_key(r)) != {"alive": alive}:
                out[r] = alive
        return out

    async def loop(self) -> None:
        while not self.rt.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), timeout=ALIVE_CHECK)
            self._kick.clear()
            if not self.rt.connected:
                continue  # our own disconnection is no evidence about the regions
            changes = self.alive_changes(time.monotonic())
            if not changes:
                continue

            def fn(s: Snapshot, changes: dict[str, bool] = changes) -> None:
                for r, alive in changes.items():
                    s.set_entry(alive_key(r), {"alive": alive})

            await self.store.mutate(fn)
            for r, alive in changes.items():
                self.rt.log("region_alive", region=r, alive=alive)

    def regions_alive(self) -> dict[str, bool]:
        """Each region's ``alive`` entry (the global tier; empty elsewhere)."""
        if not self.scope.liveness:
            return {}
        return {r: region_alive(self.store.snapshot, r) for r in self.scope.regions}
