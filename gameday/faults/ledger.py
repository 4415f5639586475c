"""The fault ledger: every injection is written to disk *before* it happens.

If the runner is killed (``kill -9``, a CI timeout), ``gameday restore`` reads the
ledger, re-attaches to each target from its recorded reference and reverts what is
there. An entry is removed only after its revert succeeded (or ``gameday restore
--forget ID`` drops it, saying why). A file lock makes the ledger safe for several
pytest-xdist workers; writes are atomic and fsynced (:mod:`gameday.runtime.statefile`).

Every ledger that ever recorded a fault is also listed, by absolute path, in a small
per-user index (:func:`index_path`), so ``gameday restore`` run from any directory
still finds a ledger that a run elsewhere left behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from gameday.runtime.statefile import CorruptFile, quarantine, read_json_object, state_dir, write_json_atomic

log = logging.getLogger(__name__)

_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,), "kind": (str,), "region": (str, type(None)), "params": (dict,), "target": (str,),
    "target_ref": (dict,), "runner_pid": (int,), "created": (int, float), "attach": (str, type(None)),
    "session_pid": (int, type(None)),
}
_OPTIONAL = ("created", "attach", "session_pid")  # absent in ledgers written before they existed


PROBE_BYTES = 64 * 1024
"""What :meth:`Ledger.unwritable` writes to prove there is room: a ledger of many entries, and
the run's other files (figures, steps) written around an injection."""


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
    attach: str | None = None
    """Import path of the target's ``attach`` (``"mypkg.targets:MyTarget.attach"``) for a
    target that is not built in; None: the registry finds it by :attr:`target` name."""
    session_pid: int | None = None
    """The pytest run's main process: :attr:`runner_pid` itself, or the pytest-xdist controller
    of the worker that wrote the entry. ``gameday drill`` knows only that pid, so after a
    ``kill -9`` it finds a worker's pending faults by it. None in ledgers written before it."""

    @property
    def what(self) -> str:
        """``gateway_down b`` (for messages)."""
        return f"{self.kind} {self.region or ''}".strip()

    @classmethod
    def parse(cls, raw: object, where: str) -> LedgerEntry:
        """Validate one entry as read from disk.

        Raises:
            ValueError, TypeError: naming *where*, the field and what was expected.
        """
        if not isinstance(raw, dict):
            raise TypeError(f"{where}: expected an object, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(_FIELDS))
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))[:80]}")
        for name, types in _FIELDS.items():
            if name not in raw:
                if name in _OPTIONAL:
                    continue
                raise ValueError(f"{where}: missing field {name!r}")
            value = raw[name]
            if isinstance(value, bool) or not isinstance(value, types):
                raise TypeError(f"{where}.{name}: expected {' or '.join(t.__name__ for t in types)}, "
                                 f"got {type(value).__name__}")
        return cls(**raw)


def index_path() -> Path:
    """The per-user list of ledgers: ``$GAMEDAY_STATE_DIR`` or ``$XDG_STATE_HOME/gameday``
    (default ``~/.local/state/gameday``), file ``ledgers.json``."""
    return state_dir() / "ledgers.json"


def known_ledgers() -> list[Path]:
    """Every ledger recorded in the index that still exists (a corrupt index is moved aside)."""
    path = index_path()
    try:
        data = read_json_object(path) or {}
    except CorruptFile as exc:
        log.warning("ledger index %s; moved aside to %s", exc, quarantine(path))
        return []
    paths = data.get("ledgers", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        log.warning("ledger index %s: 'ledgers' must be a list of paths; moved aside to %s", path, quarantine(path))
        return []
    return [Path(p) for p in paths if Path(p).exists()]


def _register(ledger: Path) -> None:
    path = index_path()
    try:
        with FileLock(str(path) + ".lock"):
            known = [str(p) for p in known_ledgers()]
            if str(ledger) not in known:
                write_json_atomic(path, {"ledgers": [*known, str(ledger)]})
    except OSError as exc:  # a read-only home must not stop a drill: the ledger itself is written
        log.warning("cannot record ledger %s in the index %s: %s", ledger, path, exc)


class Ledger:
    """A JSON file of pending (injected, not yet reverted) faults."""

    def __init__(self, path: Path, *, session_pid: int | None = None) -> None:
        self.path = path.absolute()
        self._lock_path = str(self.path) + ".lock"
        self.session_pid = session_pid
        """What :meth:`record` writes as :attr:`LedgerEntry.session_pid` (None: this process)."""

    @property
    def _lock(self) -> FileLock:
        # Created on use: reading an absent ledger (`gameday restore` elsewhere) writes nothing.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(self._lock_path)

    def _read_strict(self) -> list[LedgerEntry]:
        """The entries on disk. Raises :class:`CorruptFile` (with the path and the problem)."""
        data = read_json_object(self.path)
        if data is None:
            return []
        if set(data) != {"pending"}:
            missing = "" if "pending" in data else "no 'pending' list"
            extra = sorted(set(data) - {"pending"})
            raise CorruptFile(self.path, "; ".join(
                p for p in (missing, f"unknown key(s) {extra}"[:80] if extra else "") if p))
        raw = data["pending"]
        if not isinstance(raw, list):
            raise CorruptFile(self.path, f"'pending' must be a list, got {type(raw).__name__}")
        try:
            return [LedgerEntry.parse(e, f"pending[{i}]") for i, e in enumerate(raw)]
        except (ValueError, TypeError) as exc:
            raise CorruptFile(self.path, str(exc)) from exc

    def _read(self) -> list[LedgerEntry]:
        """For a running drill: a corrupt ledger is moved aside (and said so), never fatal;
        the runner still reverts its own faults from memory."""
        try:
            return self._read_strict()
        except CorruptFile as exc:
            log.warning("fault ledger %s; moved aside to %s", exc.problem, quarantine(self.path))
            return []

    def _write(self, entries: list[LedgerEntry]) -> None:
        write_json_atomic(self.path, {"pending": [asdict(e) for e in entries]})

    def record(self, kind: str, region: str | None, params: dict[str, Any], target: str,
               target_ref: dict[str, Any], *, attach: str | None = None) -> LedgerEntry:
        """Write a pending entry; call this before injecting. *attach*: see :attr:`LedgerEntry.attach`."""
        entry = LedgerEntry(uuid.uuid4().hex[:12], kind, region, dict(params), target, dict(target_ref),
                            os.getpid(), attach=attach, session_pid=self.session_pid or os.getpid())
        with self._lock:
            self._write([*self._read(), entry])
        _register(self.path)
        return entry

    def unwritable(self) -> str | None:
        """Why the ledger could not be written now (a full or read-only filesystem, a
        directory without write permission), or None: it can. Proven by writing
        :data:`PROBE_BYTES` beside it, synced, then removed: asked before any fault is injected
        (a fault whose ledger entry cannot be written must not be injected)."""
        probe = self.path.parent / f".probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, b"\0" * PROBE_BYTES)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            return f"{exc.strerror or exc} ({self.path.parent})"
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()
        return None

    def update_params(self, entry_id: str, params: dict[str, Any]) -> None:
        """Record parameters learnt during injection (e.g. the value a revert restores)."""
        with self._lock:
            entries = [LedgerEntry(**{**asdict(e), "params": dict(params)}) if e.id == entry_id else e
                       for e in self._read()]
            self._write(entries)

    def remove(self, entry_id: str) -> None:
        """Drop an entry; call this after its revert succeeded."""
        with self._lock:
            entries = self._read()
            kept = [e for e in entries if e.id != entry_id]
            if len(kept) != len(entries) or self.path.exists():
                self._write(kept)

    def pending(self) -> list[LedgerEntry]:
        """The pending entries.

        Raises:
            CorruptFile: the ledger cannot be read; ``gameday restore`` reports it and moves it aside.
        """
        if not self.path.exists():
            return []
        with self._lock:
            return self._read_strict()

    def quarantine(self) -> Path | None:
        """Move a corrupt ledger aside; returns its new path."""
        with self._lock:
            return quarantine(self.path)
