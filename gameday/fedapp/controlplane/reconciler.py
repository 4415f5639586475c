"""The slow full reconciliation (R3).

It asks agents for their full state and folds it into the snapshot: on start, on a NATS
reconnect (a kick), when an agent with a new epoch is first heard (that region only),
every ``reconcile_interval`` and on ``POST /admin/reconcile``. It is the only path on which
slow state (quotas, labels) changes; on a label conflict the primary wins.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

import nats.errors

from gameday.fedapp.controlplane.bus import BUS_ERRORS, Runtime
from gameday.fedapp.controlplane.scope import Scope
from gameday.fedapp.controlplane.store import SnapshotStore
from gameday.fedapp.snapshot import Snapshot, merge_slow
from gameday.fedapp.wire import MERGED_SLOW_KEY, Json, agent_state_subject, slow_key

AGENT_STATE_TIMEOUT = 1.0
"""Seconds to wait for one agent's state reply during a reconciliation pass."""
SYNC_RETRY = 2.0
"""Seconds before a heartbeating agent that did not answer a state request is asked again.
Not after "no responders": nobody listened yet (an agent subscribes to state requests before
its first heartbeat), so that agent's first heartbeat asks at once. Waiting 2 s there held every
region's slow state back until 2 s after start-up, and the federation was ready (every entry
node at the version) 1.5 s before its control plane moved on by six versions."""


class Reconciler:
    """Reconciliation passes and region syncs, and their counters."""

    def __init__(self, rt: Runtime, scope: Scope, store: SnapshotStore, *, run_id: str, primary: str,
                 interval: float, auto_merge: bool = False) -> None:
        self.rt = rt
        self.scope = scope
        self.store = store
        self.run_id = run_id
        self.primary = primary
        self.interval = interval
        self.auto_merge = auto_merge
        """The ``slow_auto_merge`` defect: a conflict goes to a non-primary region (R3 broken)."""
        self.passes = 0
        self.region_syncs = 0
        self.last_at: float | None = None
        self.last: Json = {}
        self.epochs: dict[str, int] = {}
        """Each region's agent epoch last synced (or being synced)."""
        self._sync_not_before: dict[str, float] = {}
        self._unheard: set[str] = set()
        """Regions whose state request in the current pass found no responder."""
        self._lock = asyncio.Lock()
        self._kick = asyncio.Event()

    def kick(self) -> None:
        """Run a full pass now (the loop's next turn)."""
        self._kick.set()

    def note_epoch(self, region: str, epoch: int) -> None:
        """An agent heartbeat carried *epoch*: sync that region if the agent is new or restarted."""
        now = time.monotonic()
        if epoch and self.epochs.get(region) != epoch and now >= self._sync_not_before.get(region, 0.0):
            first = region not in self.epochs
            self.epochs[region] = epoch
            if self.rt.ready:
                self.rt.log("agent_epoch", region=region, epoch=epoch, first=first)
                self.rt.spawn(self._sync_region(region))

    async def _sync_region(self, region: str) -> None:
        await self.reconcile(reason="agent_epoch", regions=[region])

    async def loop(self) -> None:
        first = True
        while not self.rt.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), timeout=self.interval)
            kicked = self._kick.is_set()
            self._kick.clear()
            if self.rt.stop.is_set():
                return
            reason = "start" if first else ("kick" if kicked else "interval")
            first = False
            await self.reconcile(reason=reason)

    async def _ask_agent(self, region: str) -> Json | None:
        try:
            msg = await self.rt.nc.request(agent_state_subject(self.run_id, region), b"{}",
                                           timeout=AGENT_STATE_TIMEOUT)
            reply = json.loads(msg.data)
        except BUS_ERRORS as exc:
            self.rt.log("agent_state_failed", region=region, error=type(exc).__name__)
            if isinstance(exc, nats.errors.NoRespondersError):
                self._unheard.add(region)
            return None
        except ValueError as exc:
            self.rt.log("agent_state_bad", region=region, error=repr(exc))
            return None
        if not isinstance(reply, dict) or not isinstance(reply.get("slow"), dict) \
                or not isinstance(reply.get("health"), dict):
            self.rt.log("agent_state_bad", region=region, error="missing slow/health")
            return None
        return reply

    def _fold(self, got: dict[str, Json]) -> Callable[[Snapshot], None]:
        """The snapshot change that sets the replies' health entries and slow state."""
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
            known = {r: s.entries[slow_key(r)] for r in self.scope.regions if slow_key(r) in s.entries}
            if known and self.scope.slow:
                s.set_entry(MERGED_SLOW_KEY, merge_slow(known, self.primary, auto_merge=self.auto_merge))

        return fn

    async def reconcile(self, *, reason: str, regions: list[str] | None = None) -> Json:
        """Ask agents for their full state and fold it into the snapshot.

        Health entries are set directly (no event marks, so a later real event still
        applies); slow state is stored per region and merged with the primary winning.
        """
        targets = regions if regions is not None else list(self.scope.regions)
        async with self._lock:
            if self.rt.nc is None:
                return {"replied": [], "missing": targets}
            self._unheard = set()
            replies = await asyncio.gather(*(self._ask_agent(r) for r in targets))
            got = {r: rep for r, rep in zip(targets, replies, strict=True) if rep is not None}
            before = self.store.snapshot.version
            if got:
                await self.store.mutate(self._fold(got))
            for r in set(targets) - set(got):
                # forget the agent's epoch: a heartbeat retries this region (not too often,
                # unless nobody was listening yet: see SYNC_RETRY)
                self.epochs.pop(r, None)
                self._sync_not_before[r] = 0.0 if r in self._unheard else time.monotonic() + SYNC_RETRY
            full = regions is None
            if full:
                self.passes += 1
                self.last_at = time.time()
            else:
                self.region_syncs += 1
            result: Json = {
                "reason": reason,
                "full": full,
                "replied": sorted(got),
                "missing": sorted(set(targets) - set(got)),
                "version_before": before,
                "version": self.store.snapshot.version,
            }
            self.last = result
            self.rt.log("reconcile", **result)
            return result

    def status(self) -> Json:
        """The ``reconcile`` object of ``/status``."""
        return {"last_at": self.last_at, "passes": self.passes, "region_syncs": self.region_syncs,
                "last": self.last}
