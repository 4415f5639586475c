"""The fault ledger: every injection is written to disk *before* it happens.

If the runner is killed (``kill -9``, a CI timeout), ``gameday restore`` reads the
ledger, re-attaches to each target from its recorded reference and reverts what is
there. An entry is removed only after its revert succeeded. A file lock makes the
ledger safe for several pytest-xdist workers.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock


@dataclass(frozen=True)
class LedgerEntry:
    id: str
    kind: str
    region: str | None
    params: dict[str, Any]
    target: str
    target_ref: dict[str, Any]
    runner_pid: int
    created: float = field(default_factory=time.time)
    """Unix time the entry was written (just before injection)."""


class Ledger:
    """A JSON file of pending (injected, not yet reverted) faults."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_path = str(path) + ".lock"

    @property
    def _lock(self) -> FileLock:
        # Created on use: reading an absent ledger (`gameday restore` elsewhere) writes nothing.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(self._lock_path)

    def _read(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        entries: list[dict[str, Any]] = data.get("pending", [])
        return entries

    def _write(self, entries: list[dict[str, Any]]) -> None:
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"pending": entries}, indent=2))
        os.replace(tmp, self.path)  # atomic: a reader never sees half a ledger
        # fsync the directory entry is overkill here; the replace is atomic on one filesystem.

    def record(self, kind: str, region: str | None, params: dict[str, Any], target: str,
               target_ref: dict[str, Any]) -> LedgerEntry:
        """Write a pending entry; call this before injecting."""
        entry = LedgerEntry(uuid.uuid4().hex[:12], kind, region, dict(params), target, dict(target_ref),
                            os.getpid())
        with self._lock:
            entries = self._read()
            entries.append(asdict(entry))
            self._write(entries)
        return entry

    def update_params(self, entry_id: str, params: dict[str, Any]) -> None:
        """Record parameters learnt during injection (e.g. the value a revert restores)."""
        with self._lock:
            entries = self._read()
            for e in entries:
                if e["id"] == entry_id:
                    e["params"] = dict(params)
            self._write(entries)

    def remove(self, entry_id: str) -> None:
        """Drop an entry; call this after its revert succeeded."""
        with self._lock:
            self._write([e for e in self._read() if e["id"] != entry_id])

    def pending(self) -> list[LedgerEntry]:
        if not self.path.exists():
            return []
        with self._lock:
            return [LedgerEntry(**e) for e in self._read()]
