"""The store controller of an ``async`` state layer: replicates, promotes, announces (DESIGN.md §9).

One global process (HTTP on ``spec.storectl``), the way Patroni or Orchestrator sit beside a
database. The store has one data stream per store node (``DATA-<run>-<region>``, one replica,
on that region's node, :func:`gameday.fedapp.store.stream_config`). The controller

* makes those streams and announces ``{"primary", "epoch"}`` on
  :func:`~gameday.fedapp.store.announce_subject` every :data:`ANNOUNCE_EVERY` s and at once on a
  change; the app instances write to the announced primary's stream, an acknowledgement
  meaning that one node stored it;
* **replicates**: every ``replication_interval`` it copies what the primary's stream holds
  beyond what each standby has (by sequence, each copy with the write's id as
  ``Nats-Msg-Id``, so a copy is stored once): a standby trails by at most the interval while
  the replicator runs. ``POST /admin/fault {"replication": "hold"}`` holds it back (the
  ``replication_lag`` fault, a stalled WAL sender), ``{"replication": "run"}`` releases it;
* **promotes**: it checks the primary's stream every ``probe_interval``; after ``fall``
  failed checks in a row it declares the primary failed and announces *no* primary (a new
  epoch: the apps refuse writes, 503, nothing stored), then promotes the standby that has
  replicated the most as soon as the store lets it, raises the epoch and announces it. The
  halt comes first so that an old primary answering again before the promotion went through
  (its node back before the lease ran out) takes no acknowledged write that
  the promotion would then discard: a CI run at load ~30 saw 17 acknowledged writes lost that
  way, acknowledged by the returned old primary 0.1 s before the promotion. Once declared
  failed, the old primary rejoins as a standby (``pg_rewind``'s way), unless there is no
  standby to promote at all: then it resumes. What the old primary had not yet copied is lost (the RPO), exactly
  as with an asynchronous database replica;
* **leases**: each announcement of a primary carries ``lease_until`` (now + :data:`~gameday.fedapp.storetiming.LEASE`);
  an app writes to (and reads from) the primary only while its lease holds, and a standby is
  promoted only once the last lease granted on the old primary ran out. An old primary frozen
  or partitioned and back later (``store_isolated``) then finds its apps' leases expired: they
  wait for the next announcement, which names the new primary;
* **fences**: an app writes only to the announced primary, and only under a lease, so the
  promotion is the announcement: no stream changes (every region's stream listens for its own
  region's writes, :func:`~gameday.fedapp.store.async_subjects`), and nothing waits for
  JetStream's metadata leader. (Promotion by stream update did: whenever the lost node held the
  metadata leader, the promotion failed until its Raft election, 4-9 s, was over: writes came
  back after 7.35 s instead of the 1.2-5.2 s the stated timing predicts.) Once the old primary's
  node is back its stream is purged and becomes a standby of the new primary (what only it held,
  never replicated, is discarded, as a rewound old primary's WAL is). The
  ``unfenced_old_primary`` defect leaves it as it is, and its region's apps writing to it.
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

from gameday.fedapp.common import JsonLog, ReadyzFault, every, render_metrics
from gameday.fedapp.skeleton import HttpComponent, start_http
from gameday.fedapp.spec import AppState, FederationSpec
from gameday.fedapp.store import STORE_ERRORS, announce_subject, stream_config, stream_name
from gameday.fedapp.storetiming import ANNOUNCE_EVERY, LEASE, MAX_OUTSTANDING_PINGS, PING_INTERVAL, RECONNECT_WAIT
from gameday.fedapp.wire import Json

_ERRORS: tuple[type[BaseException], ...] = (*STORE_ERRORS, nats.js.errors.Error)
_CHECK_ERRORS: tuple[type[BaseException], ...] = (*_ERRORS, TimeoutError)


class StoreController(HttpComponent):
    """The controller's state and handlers."""

    def __init__(self, spec: FederationSpec, state: AppState, log: JsonLog) -> None:
        self.spec = spec
        self.state = state
        self.log = log
        self.ready_fault = ReadyzFault()
        self.timing = spec.topology.timing
        self.regions = [r.name for r in spec.regions if r.store is not None]
        self.primary = state.primary or self.regions[0]
        self.epoch = 1
        self.replicating = True
        self.copied: dict[str, int] = {r: 0 for r in self.regions if r != self.primary}
        """Standby -> the primary's last sequence copied to it."""
        self.failures = 0
        self.halted = False
        self.halted_at = 0.0
        """When (wall clock) the primary was last declared failed."""
        self.granted_until = 0.0
        """The latest lease (wall clock) announced on the current primary: no promotion before it."""
        """The primary was declared failed and no standby is promoted yet: writes are refused."""
        self.down: set[str] = set()
        """Store regions whose stream did not answer the last check."""
        self.fenced: set[str] = set()
        """Old primaries to purge and turn into standbys once they answer again."""
        self.promotions: list[Json] = []
        self.copies_total = 0
        self.ready = False
        self.nc: Any = None
        self.js: Any = None

    # -- the loops ---------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        servers = [f"nats://{r.store.host}:{r.store.port}" for r in self.spec.regions if r.store is not None]
        while not stop.is_set() and self.nc is None:
            try:
                self.nc = await nats.connect(servers=servers, max_reconnect_attempts=-1,
                                             reconnect_time_wait=RECONNECT_WAIT,
                                             connect_timeout=1, ping_interval=PING_INTERVAL,
                                             max_outstanding_pings=MAX_OUTSTANDING_PINGS, name="storectl")
            except STORE_ERRORS:
                await _pause(stop, 0.1)
        if self.nc is None:
            return
        self.js = self.nc.jetstream(timeout=max(0.2, self.timing.probe_timeout))
        while not stop.is_set() and not self.ready:
            try:
                for r in self.regions:
                    await self.js.add_stream(stream_config(self.spec, self.state, "data", r, self.primary))
                self.ready = True
                self.log("store_streams_ready", primary=self.primary, epoch=self.epoch, regions=self.regions)
            except _ERRORS as exc:
                self.log("store_streams_not_ready", error=f"{type(exc).__name__}: {exc}"[:200])
                await _pause(stop, 0.2)
        try:
            await asyncio.gather(
                every(ANNOUNCE_EVERY, self.announce, stop),
                every(self.state.replication_interval, self.replicate, stop),
                every(self.timing.probe_interval, self.check, stop))
        finally:
            with contextlib.suppress(*STORE_ERRORS):
                await self.nc.close()

    async def announce(self) -> None:
        primary = None if self.halted else self.primary
        body: dict[str, Any] = {"primary": primary, "epoch": self.epoch}
        if primary is not None:  # a lease on writing to it (store.LEASE); granted before it is sent
            body["lease_until"] = self.granted_until = time.time() + LEASE
        with contextlib.suppress(*STORE_ERRORS):
            await self.nc.publish(announce_subject(self.spec.run_id), json.dumps(body).encode())

    def _stream(self, region: str) -> str:
        return f"{stream_name(self.spec.run_id)}-{region}"

    async def _last_seq(self, region: str) -> int:
        info = await self.js.stream_info(self._stream(region))
        return int(info.state.last_seq)

    async def check(self) -> None:
        """Check every store region's stream; promote after ``fall`` failures of the primary's;
        fence an old primary that answers again."""
        for region in self.regions:
            try:
                await asyncio.wait_for(self._last_seq(region), self.timing.probe_timeout)
            except _CHECK_ERRORS:
                self.down.add(region)
            else:
                self.down.discard(region)
                if region in self.fenced:
                    await self._fence(region)
        if self.primary in self.down:
            self.failures += 1
            if self.failures >= self.timing.fall:
                if not self.halted and not self.spec.topology.defects.unfenced_old_primary:
                    self.halted, self.epoch, self.halted_at = True, self.epoch + 1, time.time()
                    self.log("store_primary_failed", primary=self.primary, epoch=self.epoch)
                    await self.announce()
                await self._promote()
        else:
            self.failures = 0
            if self.halted and not [r for r in self.copied if r not in self.down]:
                # declared failed, but nobody can be promoted and it answers again: it resumes
                self.halted, self.epoch = False, self.epoch + 1
                self.log("store_primary_resumed", primary=self.primary, epoch=self.epoch)
                await self.announce()
            elif self.halted:
                await self._promote()  # committed to the failover: the old primary becomes a standby

    async def _promote(self) -> None:
        standbys = [r for r in self.copied if r not in self.down]
        if not standbys:
            return  # nobody to promote: writes wait for the primary
        defects = self.spec.topology.defects
        if time.time() < self.granted_until and not defects.unfenced_old_primary:
            return  # an app may still hold a lease on the old primary: the next check tries again
        if defects.slow_promotion and time.time() < self.halted_at + defects.slow_promotion:
            return  # the slow_promotion defect: a failover slower than the stated timing
        best = max(standbys, key=lambda r: (self.copied[r], -self.regions.index(r)))
        # Every stream listens for its own region's writes: the announcement below is the promotion
        # (no stream update, so nothing waits for JetStream's metadata leader).
        old, self.primary, self.epoch = self.primary, best, self.epoch + 1
        self.failures, self.halted = 0, False
        if not self.spec.topology.defects.unfenced_old_primary:
            self.fenced.add(old)
        # The new primary's own stream is now the source; each other standby restarts from what
        # the new primary holds (its sequences are its own).
        self.copied = {r: 0 for r in self.regions if r not in (best, old)}
        event = {"old": old, "new": best, "epoch": self.epoch, "t": time.time(), "mono": time.monotonic()}
        self.promotions.append(event)
        self.log("store_promoted", **event)
        await self.announce()

    async def _fence(self, region: str) -> None:
        """The old primary *region* answers again: what only it held is purged, and it becomes a
        standby (no app writes to it: none holds a lease on it)."""
        try:
            await self.js.purge_stream(self._stream(region))
        except _ERRORS as exc:
            self.log("store_fence_failed", region=region, error=f"{type(exc).__name__}"[:80])
            return
        self.fenced.discard(region)
        self.copied[region] = 0
        self.log("store_fenced", region=region, epoch=self.epoch)

    async def replicate(self) -> None:
        if not self.replicating or not self.ready or self.primary in self.down:
            return
        source = self._stream(self.primary)
        try:
            last = await self._last_seq(self.primary)  # copy up to what the primary held now
        except _ERRORS:
            return
        for standby in [r for r in self.copied if r not in self.down and r not in self.fenced]:
            seq = self.copied[standby]
            while seq < min(last, self.copied[standby] + 500):  # bounded per round: the next goes on
                try:
                    msg = await self.js.get_msg(source, seq=seq + 1)
                except nats.js.errors.NotFoundError:  # below the last sequence: deleted or purged
                    seq += 1
                    continue
                except _ERRORS:
                    break
                wid = str(msg.subject).rsplit(".", 1)[-1]
                try:
                    await self.js.publish(f"gd.{self.spec.run_id}.repl.{standby}.{wid}", msg.data,
                                          headers={"Nats-Msg-Id": wid})
                except _ERRORS:
                    break
                seq += 1
                self.copies_total += 1
            self.copied[standby] = seq

    # -- HTTP --------------------------------------------------------------------------------
    def unready_reason(self) -> str | None:
        return None if self.ready else "the store's streams are not made yet"

    def status(self) -> Json:
        return {"role": "storectl", "primary": self.primary, "epoch": self.epoch,
                "replication": "running" if self.replicating else "held", "copied": dict(self.copied),
                "down": sorted(self.down), "fenced": sorted(self.fenced), "promotions": self.promotions,
                "copies_total": self.copies_total, "ready": self.ready}

    def metrics(self) -> str:
        return render_metrics([("gameday_storectl_epoch", "", self.epoch),
                               ("gameday_storectl_copies_total", "", self.copies_total),
                               ("gameday_storectl_promotions_total", "", len(self.promotions))],
                              {"gameday_storectl_epoch": "The primary's epoch (raised by each promotion)",
                               "gameday_storectl_copies_total": "Writes copied to a standby",
                               "gameday_storectl_promotions_total": "Standbys promoted"})

    def apply_fault(self, body: Json) -> None:
        mode = body.get("replication")
        if mode not in (None, "hold", "run"):
            raise ValueError(f"replication: got {mode!r}, expected 'hold' or 'run'")
        if mode is not None:
            self.replicating = mode == "run"

    def fault_state(self) -> Json:
        return {"readyz": self.ready_fault.describe(), "replication": "running" if self.replicating else "held"}


async def serve(spec: FederationSpec, region: str | None, instance: str | None, stop: asyncio.Event) -> None:
    """Run the store controller until *stop* is set."""
    state = spec.topology.state
    if state is None or state.mode != "async" or spec.storectl is None:
        raise SystemExit("storectl: the federation has no async state layer")
    log = JsonLog("storectl")
    ctl = StoreController(spec, state, log)
    runner = await start_http(ctl, spec.storectl.host, spec.storectl.port, log, spec.admin.get("storectl"))
    log("started", endpoint=spec.storectl.url, primary=ctl.primary)
    task = asyncio.create_task(ctl.run(stop))
    try:
        await stop.wait()
    finally:
        await asyncio.gather(task, return_exceptions=True)
        await runner.cleanup()
        log("stopped")


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
