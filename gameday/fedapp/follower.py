"""Keeping an entry node's snapshot current: listen to broadcasts, pull only diffs (R4).

Used by gateways, local proxies and the GSLB. Also the stale-snapshot detector (R6):
the node is *stale* when it has lagged the latest broadcast version for longer than
``stale_after``, or heard no broadcast (heartbeats included) for that long. Entering
that state logs ``{"event": "stale_snapshot", ...}`` and counts an alarm; leaving it
logs ``stale_snapshot_cleared``.

A follower has a *scope*: ``global`` follows the global snapshot (routable regions);
a region's name follows that region's regional snapshot (regional layout, R14: its
healthy instances), on the region's own broadcast and diff subjects.

Fault hooks (``configure``): ``drop_broadcasts`` (cut off from broadcasts) and
``never_refresh`` (hears broadcasts but never pulls: a broken proxy).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from gameday.fedapp.common import Histogram, JsonLog
from gameday.fedapp.snapshot import Replica, healthy_instances, routable_regions
from gameday.fedapp.wire import (
    Diff,
    Json,
    broadcast_subject,
    diff_subject,
    regional_broadcast_subject,
    regional_diff_subject,
)

PULL_TIMEOUT = 1.0
"""Seconds to wait for a diff reply before trying again."""


class Follower:
    """A snapshot replica kept current from the control plane's broadcasts."""

    def __init__(
        self,
        *,
        run_id: str,
        node: str,
        regions: list[str],
        stale_after: float,
        log: JsonLog,
        on_change: Callable[[], None] | None = None,
        region: str | None = None,
    ) -> None:
        """*region*: follow that region's regional snapshot instead of the global one."""
        self.run_id = run_id
        self.node = node
        self.regions = regions
        self.region = region
        self.scope = "global" if region is None else "regional"
        if region is None:
            self.broadcast, self.diff = broadcast_subject(run_id), diff_subject(run_id)
        else:
            self.broadcast = regional_broadcast_subject(run_id, region)
            self.diff = regional_diff_subject(run_id, region)
        self.stale_after = stale_after
        self.log = log
        self.on_change = on_change
        self.replica = Replica()
        self.last_broadcast_version = 0
        now = time.monotonic()
        self.last_heard = now
        self.confirmed_at = now
        self.lag_since: float | None = None
        self.stale = False
        self.alarms_total = 0
        self.drop_broadcasts = False
        self.never_refresh = False
        self.full_pulls = False
        """A negative-control defect (R4): every pull asks for the whole snapshot."""
        self.silent = False
        """A negative-control defect (R6): the stale-snapshot alarm is never raised."""
        self.pulls: dict[str, int] = {"diff": 0, "full": 0, "failed": 0}
        self.pulled_bytes: dict[str, int] = {"diff": 0, "full": 0}
        self.pulled_entries: dict[str, int] = {"diff": 0, "full": 0}
        self.last_pull: Json = {}
        self.pull_latency = Histogram()
        self._want = asyncio.Event()
        self._nc: Any = None
        self.routable: list[str] = []

    # -- wiring -------------------------------------------------------------------
    async def run(self, nc: Any, stop: asyncio.Event) -> None:
        """Subscribe and keep the replica current until *stop* is set."""
        self._nc = nc
        await nc.subscribe(self.broadcast, cb=self._on_broadcast)
        self._want.set()  # initial full pull
        tasks = [asyncio.create_task(self._puller(stop)), asyncio.create_task(self._watchdog(stop))]
        await stop.wait()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _on_broadcast(self, msg: Any) -> None:
        if self.drop_broadcasts:
            return
        try:
            v = int(json.loads(msg.data)["version"])
        except (ValueError, KeyError, TypeError):
            self.log("bad_broadcast", data=msg.data[:200].decode(errors="replace"))
            return
        self.last_heard = time.monotonic()
        self.last_broadcast_version = v
        if v == self.replica.version:
            self.confirmed_at = self.last_heard
        elif not self.never_refresh:
            self._want.set()

    async def _puller(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(self._want.wait(), timeout=1.0)
            except TimeoutError:
                # Behind but no new broadcast (e.g. the control plane is down): retry slowly.
                if self.replica.version == self.last_broadcast_version and self.replica.version > 0:
                    continue
                if self.never_refresh and self.replica.version > 0:
                    continue
            self._want.clear()
            await self.pull()

    async def pull(self) -> bool:
        """Request the diff since our version and apply it. Returns True on success."""
        since = 0 if self.full_pulls else self.replica.version
        t0 = time.monotonic()
        try:
            msg = await self._nc.request(
                self.diff,
                json.dumps({"since": since, "node": self.node}).encode(),
                timeout=PULL_TIMEOUT,
            )
            diff = Diff.from_bytes(msg.data)
        except Exception as exc:  # noqa: BLE001  (nats timeouts/no-responders/disconnects: retried)
            self.pulls["failed"] += 1
            self.log("pull_failed", since=since, error=type(exc).__name__, scope=self.scope)
            return False
        kind = "full" if diff.full else "diff"
        self.pulls[kind] += 1
        self.pulled_bytes[kind] += len(msg.data)
        self.pulled_entries[kind] += len(diff.entries)
        self.pull_latency.observe(time.monotonic() - t0)
        if diff.version < since:
            self.log("version_regressed", had=since, got=diff.version, scope=self.scope)
        before = self.routable
        self.replica.apply(diff)
        self.confirmed_at = time.monotonic()
        self.last_pull = {"kind": kind, "since": since, "version": diff.version,
                          "entries": len(diff.entries), "bytes": len(msg.data)}
        # One line per applied version (pulls happen on new versions only): when each node
        # had each version, for the propagation benchmarks and a reader of the logs.
        self.log("snapshot_applied", scope=self.scope, version=diff.version, kind=kind,
                 entries=len(diff.entries))
        if self.region is None:
            self.routable = routable_regions(self.replica.entries, self.regions)
            if self.routable != before:
                self.log("routes_changed", version=diff.version, routable=self.routable)
        else:
            self.routable = healthy_instances(self.replica.entries, self.region)
            if self.routable != before:
                self.log("local_routes_changed", version=diff.version, healthy=self.routable)
        if self.on_change is not None:
            self.on_change()
        return True

    async def _watchdog(self, stop: asyncio.Event) -> None:
        period = max(0.05, min(0.5, self.stale_after / 10))
        while not stop.is_set():
            self.check_stale()
            await asyncio.sleep(period)

    def check_stale(self, now: float | None = None) -> bool:
        """Update and return the stale state, logging the alarm on a transition."""
        now = time.monotonic() if now is None else now
        behind = self.last_broadcast_version > self.replica.version
        if behind and self.lag_since is None:
            self.lag_since = now
        elif not behind:
            self.lag_since = None
        lag = now - self.lag_since if self.lag_since is not None else 0.0
        silent = now - self.last_heard
        stale = (lag > self.stale_after or silent > self.stale_after) and not self.silent
        if stale and not self.stale:
            self.alarms_total += 1
            self.log("stale_snapshot", node=self.node, version=self.replica.version,
                     broadcast_version=self.last_broadcast_version,
                     lag_s=round(lag, 3), silent_s=round(silent, 3),
                     reason="lagging broadcast" if lag > self.stale_after else "no broadcast heard",
                     scope=self.scope)
        elif not stale and self.stale:
            self.log("stale_snapshot_cleared", node=self.node, version=self.replica.version, scope=self.scope)
        self.stale = stale
        return stale

    # -- faults and reporting ------------------------------------------------------
    def configure(self, body: Json) -> None:
        """Apply fault hooks from an admin request body."""
        if "drop_broadcasts" in body:
            self.drop_broadcasts = bool(body["drop_broadcasts"])
        if "never_refresh" in body:
            self.never_refresh = bool(body["never_refresh"])

    def status(self) -> Json:
        now = time.monotonic()
        view: Json = ({"routable_regions": self.routable,
                       "excluded_regions": [r for r in self.regions if r not in self.routable]}
                      if self.region is None else {"region": self.region, "healthy_instances": self.routable})
        return {
            "version": self.replica.version,
            **view,
            "snapshot_age_s": round(now - self.confirmed_at, 3),
            "last_broadcast_version": self.last_broadcast_version,
            "last_broadcast_age_s": round(now - self.last_heard, 3),
            "stale": self.stale,
            "stale_alarms_total": self.alarms_total,
            "pulls": dict(self.pulls),
            "last_pull": self.last_pull,
            "faults": {"drop_broadcasts": self.drop_broadcasts, "never_refresh": self.never_refresh},
        }

    def metric_samples(self, labels: str) -> list[tuple[str, str, float]]:
        out: list[tuple[str, str, float]] = [
            ("gameday_snapshot_version", labels, self.replica.version),
            ("gameday_snapshot_age_seconds", labels, round(time.monotonic() - self.confirmed_at, 3)),
            ("gameday_stale_snapshot", labels, 1 if self.stale else 0),
            ("gameday_stale_snapshot_alarms_total", labels, self.alarms_total),
        ]
        for kind in ("diff", "full"):
            kl = f'{labels},kind="{kind}"' if labels else f'kind="{kind}"'
            out.append(("gameday_snapshot_pulls_total", kl, self.pulls[kind]))
            out.append(("gameday_snapshot_pulled_bytes_total", kl, self.pulled_bytes[kind]))
        return out
