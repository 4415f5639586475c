"""The snapshot store: the one way the control plane's snapshot changes.

``durable`` mode keeps the snapshot in the JetStream KV bucket under the scope's key and
writes every change with compare-and-set on the KV revision: on a conflict (another
replica wrote) the store reloads, re-applies the change and retries, so replicas cannot
fork the version, and a restart resumes from the stored version. ``ephemeral`` mode keeps
it in memory only (version 0 on every start: the misconfiguration the negative controls
use).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import nats.js.errors

from gameday.fedapp.controlplane.bus import BUS_ERRORS, RETRY_PAUSE, Runtime
from gameday.fedapp.snapshot import Snapshot

OnBump = Callable[[Snapshot, bytes], None]
"""Called after a committed change raised the version: the new snapshot and its JSON bytes."""


class SnapshotStore:
    """The current snapshot, its stored revision, and :meth:`mutate`."""

    def __init__(self, rt: Runtime, key: str, *, durable: bool) -> None:
        self.rt = rt
        self.key = key
        """The KV key of the snapshot (``global`` or ``region.<r>``)."""
        self.durable = durable
        self.kv: Any = None
        """The KV bucket handle; set before the first :meth:`load` or durable :meth:`mutate`."""
        self.snapshot = Snapshot()
        self.data = self.snapshot.to_json()
        self.revision = 0
        """The KV revision :attr:`data` was read or written at (0: nothing stored yet)."""
        self.cas_conflicts = 0
        self.last_change_at: float | None = None
        self.on_bump: list[OnBump] = []
        self._lock = asyncio.Lock()

    @property
    def mode(self) -> str:
        return "durable" if self.durable else "ephemeral"

    @property
    def loaded(self) -> bool:
        """Whether anything was loaded or written yet (a retried set-up does not load twice)."""
        return self.snapshot.version != 0 or self.revision != 0

    async def load(self) -> bool:
        """Load the durable snapshot from KV; return whether the key existed (else stay empty)."""
        try:
            entry = await self.kv.get(self.key)
        except nats.js.errors.KeyNotFoundError as exc:
            gone = getattr(exc, "entry", None)
            self.revision = int(getattr(gone, "revision", 0) or 0)
            self.rt.log("state_loaded", version=0, revision=self.revision, found=False)
            return False
        snap = Snapshot.from_json(entry.value)
        self.snapshot, self.data, self.revision = snap, entry.value, int(entry.revision)
        self.rt.log("state_loaded", version=snap.version, revision=self.revision, found=True,
                    entries=len(snap.entries))
        return True

    async def mutate(self, fn: Callable[[Snapshot], object]) -> bool:
        """Apply *fn* to a copy of the snapshot and commit it (durably, with CAS, if so configured).

        Returns:
            True if the version increased. Retries on CAS conflicts and bus errors
            until it succeeds or the component stops (then False, nothing committed).
        """
        async with self._lock:
            while not self.rt.stop.is_set():
                work = Snapshot.from_json(self.data)
                fn(work)
                data = work.to_json()
                if data == self.data:
                    return False
                if self.durable:
                    try:
                        rev = await self.kv.update(self.key, data, last=self.revision)
                    except nats.js.errors.KeyWrongLastSequenceError:
                        self.cas_conflicts += 1
                        self.rt.log("cas_conflict", revision=self.revision, version=self.snapshot.version)
                        await self._reload_quietly()
                        continue
                    except BUS_ERRORS as exc:
                        self.rt.log("persist_failed", error=repr(exc), version=self.snapshot.version)
                        await self.rt.pause(RETRY_PAUSE)
                        await self._reload_quietly()
                        continue
                    self.revision = int(rev)
                old = self.snapshot.version
                self._commit(work, data)
                return work.version > old
            return False

    async def _reload_quietly(self) -> None:
        """Reload the snapshot from KV after a conflict; on a bus error keep what we have."""
        try:
            entry = await self.kv.get(self.key)
        except nats.js.errors.KeyNotFoundError as exc:
            # The stored snapshot is gone (a bus that lost its store): write ours afresh.
            gone = getattr(exc, "entry", None)
            self.revision = int(getattr(gone, "revision", 0) or 0)
            self.rt.log("stored_state_missing", version=self.snapshot.version, revision=self.revision)
            return
        except BUS_ERRORS as exc:
            self.rt.log("reload_failed", error=repr(exc))
            return
        if int(entry.revision) == self.revision:
            return
        self.revision = int(entry.revision)
        self._commit(Snapshot.from_json(entry.value), entry.value)

    def _commit(self, snap: Snapshot, data: bytes) -> None:
        old = self.snapshot.version
        self.snapshot, self.data = snap, data
        if snap.version <= old:
            return
        self.last_change_at = time.time()
        for key, at in sorted(snap.changed_at.items(), key=lambda kv: kv[1]):
            if at > old:
                self.rt.log("version", version=at, key=key, value=snap.entries.get(key))
        for hook in self.on_bump:
            hook(snap, data)
