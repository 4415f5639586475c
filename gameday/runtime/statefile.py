"""Small JSON files that must survive a crash: the fault ledger, a federation's state.

Writes are atomic and durable: write a temporary file beside the target, ``fsync`` it,
``rename`` it over the target, then ``fsync`` the directory, so a reader (or a runner
killed mid-write) only ever sees the old file or the new one.

Reads never raise a traceback at a user: a file that is not valid JSON of the expected
shape is a :class:`CorruptFile` naming the path and what is wrong, and
:func:`quarantine` moves it aside (``<name>.corrupt-<time>``) so that the next run
starts clean while the evidence is kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from gameday.errors import GamedayError


def state_dir() -> Path:
    """The per-user state directory: ``$GAMEDAY_STATE_DIR``, else ``$XDG_STATE_HOME/gameday``
    (default ``~/.local/state/gameday``). It holds the ledger index and the drill locks; it
    is not created here."""
    base = os.environ.get("GAMEDAY_STATE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "gameday"


MAX_STATE_BYTES = 16 * 1024 * 1024
"""A ledger or state file larger than this is not one we wrote (16 MiB: ~50,000 entries)."""


class CorruptFile(GamedayError):
    """A state file exists but cannot be read as what it should be."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


def write_json_atomic(path: Path, data: object) -> None:
    """Replace *path* with *data* as JSON, atomically and durably (see the module docstring)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:6]}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    # The rename itself is durable only once the directory entry is on disk.
    with contextlib.suppress(OSError):
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def read_json_object(path: Path) -> dict[str, Any] | None:
    """Read *path* as a JSON object; ``None`` if it does not exist.

    Raises:
        CorruptFile: the file is unreadable, too large, not UTF-8, not JSON, or not an object.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptFile(path, f"cannot be read ({exc.strerror})") from exc
    if path.is_dir():
        raise CorruptFile(path, "is a directory, expected a JSON file")
    if size > MAX_STATE_BYTES:
        raise CorruptFile(path, f"is {size} bytes, larger than any file gameday writes ({MAX_STATE_BYTES})")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptFile(path, f"cannot be read ({exc.strerror})") from exc
    if not raw.strip():
        raise CorruptFile(path, "is empty (truncated?), expected a JSON object")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CorruptFile(path, f"is not UTF-8 text (byte {exc.start})") from exc
    except RecursionError as exc:
        raise CorruptFile(path, "is nested too deeply to be a gameday file") from exc
    except ValueError as exc:
        raise CorruptFile(path, f"is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise CorruptFile(path, f"holds a JSON {type(data).__name__}, expected an object")
    return data


def quarantine(path: Path) -> Path | None:
    """Move a corrupt *path* aside (kept as evidence); returns where it went, or ``None``
    if it had already gone."""
    dest = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}")
    try:
        os.replace(path, dest)
    except FileNotFoundError:
        return None
    return dest
