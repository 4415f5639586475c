"""A regional control plane's one message to the global tier: ``region/<r>/serving``.

When the region's count of healthy instances goes from 0 to more or back, the value is
published on the global events subject (retried until JetStream acks it), ordered by this
incarnation's epoch and a sequence number like an agent's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from gameday.fedapp.controlplane.bus import BUS_ERRORS, RETRY_PAUSE, Runtime
from gameday.fedapp.snapshot import Snapshot, healthy_instances
from gameday.fedapp.wire import Event, events_subject, is_regional_key, serving_key


class ServingReporter:
    """What was last published for the region, and what is queued to be."""

    def __init__(self, rt: Runtime, region: str, *, run_id: str) -> None:
        self.rt = rt
        self.region = region
        self.run_id = run_id
        self.epoch = time.time_ns()
        """Orders this incarnation's ``serving`` events, like an agent's epoch."""
        self._seq = 0
        self._sent: bool | None = None
        self._want: bool | None = None
        self._observed_at = 0.0
        self._kick = asyncio.Event()

    def note(self, snap: Snapshot, observed_at: float | None = None) -> None:
        """Queue ``region/<r>/serving`` for the global tier if it differs from what was sent."""
        if not any(is_regional_key(k) for k in snap.entries):
            return  # nothing known about the region's instances yet: say nothing
        serving = bool(healthy_instances(snap.entries, self.region))
        if serving != self._sent or self._want is not None:
            self._want = serving
            self._observed_at = observed_at or time.time()
            self._kick.set()

    def on_bump(self, snap: Snapshot, data: bytes) -> None:
        """The store's hook: a new version may change whether the region serves."""
        del data
        self.note(snap)

    async def loop(self) -> None:
        """Publish the queued value on the global events subject until JetStream acks it."""
        while not self.rt.stop.is_set():
            if self._want is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._kick.wait(), timeout=1.0)
                self._kick.clear()
                continue
            want = self._want
            self._seq += 1
            ev = Event(region=self.region, epoch=self.epoch, seq=self._seq, key=serving_key(self.region),
                       value={"serving": want}, observed_at=self._observed_at)
            try:
                await self.rt.js.publish(events_subject(self.run_id, self.region), ev.to_bytes(), timeout=1.0,
                                         headers={"Nats-Msg-Id": f"cp-{self.epoch}-{ev.seq}"})
            except BUS_ERRORS as exc:
                self.rt.log("serving_publish_failed", error=type(exc).__name__, serving=want)
                await self.rt.pause(RETRY_PAUSE)
                continue
            self._sent = want
            if self._want == want:
                self._want = None
            self.rt.log("serving_published", serving=want, seq=ev.seq)
