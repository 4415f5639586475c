"""Broadcasts and diffs (R4): announce every new version on the broadcast subject after
``broadcast_delay``, re-announce the last one every heartbeat, and answer diff requests from
the snapshot *as announced* (so a delayed broadcast cannot be bypassed by a puller)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from gameday.fedapp.controlplane.bus import BUS_ERRORS, Runtime
from gameday.fedapp.snapshot import Snapshot

DIFF_CACHE_SIZE = 64
"""Encoded diff answers kept per served version before the cache is emptied."""


class Broadcaster:
    """The announced version, the snapshot as announced, and the broadcast and diff counters."""

    def __init__(self, rt: Runtime, subject: str, *, delay: float) -> None:
        self.rt = rt
        self.subject = subject
        self.delay = delay
        """Seconds between a new version and its announcement (the ``broadcast_delay`` fault)."""
        self.announced_version = 0
        self.served = Snapshot()
        """The snapshot as last announced: what diff requests are answered from."""
        self.broadcasts = {"version": 0, "heartbeat": 0}
        self.diffs_served = {"diff": 0, "full": 0}
        self._diff_cache: dict[tuple[int, int, int], tuple[bool, bytes]] = {}

    def resume(self, data: bytes) -> None:
        """Take a stored snapshot as announced already (by the previous incarnation)."""
        self.served = Snapshot.from_json(data)
        self._diff_cache.clear()
        self.announced_version = self.served.version

    def schedule(self, snap: Snapshot, data: bytes) -> None:
        """Announce *snap* (its JSON *data*) now, or after the delay in force now."""
        delay = self.delay
        if delay <= 0:
            self._announce(snap.version, data)
            return
        self.rt.spawn(self._announce_later(snap.version, data, delay))

    async def _announce_later(self, version: int, data: bytes, delay: float) -> None:
        await asyncio.sleep(delay)
        self._announce(version, data)

    def _announce(self, version: int, data: bytes) -> None:
        if version <= self.announced_version:
            return
        self.announced_version = version
        self.served = Snapshot.from_json(data)
        self._diff_cache.clear()
        self._publish(heartbeat=False)
        self.rt.log("announced", version=version, delay=self.delay)

    def _publish(self, *, heartbeat: bool) -> None:
        if self.rt.nc is None:
            return
        body = json.dumps({"version": self.announced_version, "at": time.time(), "heartbeat": heartbeat})
        self.rt.spawn(self.rt.publish(self.subject, body.encode()))
        self.broadcasts["heartbeat" if heartbeat else "version"] += 1

    async def heartbeat(self) -> None:
        """Re-announce the last announced version."""
        self._publish(heartbeat=True)

    async def on_diff_request(self, msg: Any) -> None:
        """Answer ``{"since": N}`` with the diff from N to the announced snapshot."""
        try:
            since = int(json.loads(msg.data or b"{}").get("since", 0))
        except (ValueError, TypeError, AttributeError):
            since = 0
        # Every follower asks with the same ``since`` after a broadcast: encode each answer
        # once per served version (at 30 regions that is 60+ identical requests a version).
        key = (since, self.served.version, id(self.served))  # cleared whenever served is replaced
        cached = self._diff_cache.get(key)
        if cached is None:
            diff = self.served.diff_since(since)
            cached = (diff.full, diff.to_bytes())
            if len(self._diff_cache) > DIFF_CACHE_SIZE:
                self._diff_cache.clear()
            self._diff_cache[key] = cached
        self.diffs_served["full" if cached[0] else "diff"] += 1
        with contextlib.suppress(*BUS_ERRORS):
            await msg.respond(cached[1])
