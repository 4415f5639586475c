"""The global snapshot: a versioned map of keys to values, and the routing view of it.

Pure data, no I/O: the control plane owns a :class:`Snapshot`; entry nodes hold a
:class:`Replica` they update from diffs. Both answer :func:`routable_regions`.

Version rule (R5): the version increases by exactly one for every *effective* change
(a key's value actually differs) and never for a duplicate, stale or no-op event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gameday.fedapp.wire import (
    MERGED_SLOW_KEY,
    Diff,
    Event,
    Json,
    alive_key,
    gateway_key,
    serving_key,
)


@dataclass
class Snapshot:
    """The control plane's global snapshot.

    Attributes:
        version: the global version; 0 means empty.
        entries: key -> value.
        changed_at: key -> version at which the key last changed (drives diffs).
        marks: key -> ``[epoch, seq]`` of the last applied agent event for the key.
    """

    version: int = 0
    entries: dict[str, Json] = field(default_factory=dict)
    changed_at: dict[str, int] = field(default_factory=dict)
    marks: dict[str, list[int]] = field(default_factory=dict)

    def set_entry(self, key: str, value: Json) -> bool:
        """Set *key* to *value*; bump the version if that changed anything.

        Returns:
            True if the version was bumped.
        """
        if self.entries.get(key) == value:
            return False
        self.version += 1
        self.entries[key] = dict(value)
        self.changed_at[key] = self.version
        return True

    def apply_event(self, ev: Event) -> bool:
        """Apply an agent event unless it is a duplicate or older than the last applied.

        Returns:
            True if the version was bumped.
        """
        mark = self.marks.get(ev.key)
        if mark is not None and (ev.epoch, ev.seq) <= (mark[0], mark[1]):
            return False
        self.marks[ev.key] = [ev.epoch, ev.seq]
        return self.set_entry(ev.key, ev.value)

    def diff_since(self, since: int) -> Diff:
        """Every entry changed after version *since*; all entries if a full copy is needed."""
        if since <= 0 or since > self.version:
            return Diff(version=self.version, full=True, entries={k: dict(v) for k, v in self.entries.items()})
        return Diff(
            version=self.version,
            full=False,
            entries={k: dict(self.entries[k]) for k, v in self.changed_at.items() if v > since},
        )

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": self.version,
                "entries": self.entries,
                "changed_at": self.changed_at,
                "marks": self.marks,
            },
            separators=(",", ":"),
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Snapshot:
        d = json.loads(data)
        return cls(
            version=int(d["version"]),
            entries={str(k): dict(v) for k, v in d["entries"].items()},
            changed_at={str(k): int(v) for k, v in d["changed_at"].items()},
            marks={str(k): [int(v[0]), int(v[1])] for k, v in d["marks"].items()},
        )


@dataclass
class Replica:
    """An entry node's copy of the snapshot, kept current from diffs."""

    version: int = 0
    entries: dict[str, Json] = field(default_factory=dict)

    def apply(self, diff: Diff) -> None:
        """Apply a diff; a full diff replaces everything (also when the version regressed)."""
        if diff.full:
            self.entries = {k: dict(v) for k, v in diff.entries.items()}
        else:
            for k, v in diff.entries.items():
                self.entries[k] = dict(v)
        self.version = diff.version


def _healthy(entries: dict[str, Json], key: str, flag: str) -> bool:
    v = entries.get(key)
    return bool(v and v.get(flag))


def healthy_instances(entries: dict[str, Json], region: str) -> list[str]:
    """Names of the instances of *region* the snapshot marks healthy, sorted."""
    prefix = f"region/{region}/instance/"
    return sorted(
        k[len(prefix):] for k, v in entries.items() if k.startswith(prefix) and v.get("healthy")
    )


def region_serving(entries: dict[str, Json], region: str) -> bool:
    """The region has a healthy instance: by its ``serving`` entry where the snapshot has one
    (the global snapshot of the regional layout, which holds no instance entries), else by
    its instance entries."""
    summary = entries.get(serving_key(region))
    if summary is not None:
        return bool(summary.get("serving"))
    return bool(healthy_instances(entries, region))


def region_routable(entries: dict[str, Json], region: str) -> bool:
    """A region takes traffic iff it is alive, its gateway is healthy, and it has a healthy instance."""
    return (
        _healthy(entries, alive_key(region), "alive")
        and _healthy(entries, gateway_key(region), "healthy")
        and region_serving(entries, region)
    )


def routable_regions(entries: dict[str, Json], regions: list[str]) -> list[str]:
    """The regions of *regions* (in that order) that take traffic by this snapshot."""
    return [r for r in regions if region_routable(entries, r)]


def merge_slow(slow: dict[str, Json], primary: str, *, auto_merge: bool = False) -> Json:
    """Merge regions' labels; on a conflict the primary's value wins, never an auto-merge (R3).

    Args:
        slow: region -> ``{"quota": {...}, "labels": {...}}``.
        primary: the designated primary region.
        auto_merge: the ``slow_auto_merge`` defect (negative controls only): the conflict goes
            to the first region in name order whose value differs from the primary's.

    Returns:
        ``{"labels": {...}, "conflicts": [{"key", "values", "winner"}...]}`` where a
        conflict lists every region's value for a label that regions disagree on.
        A conflicting label the primary does not have is left out (no merge).
    """
    values: dict[str, dict[str, Any]] = {}
    for region in sorted(slow):
        for k, v in slow[region].get("labels", {}).items():
            values.setdefault(k, {})[region] = v
    labels: dict[str, Any] = {}
    conflicts: list[Json] = []
    for k in sorted(values):
        seen = values[k]
        if len(set(map(str, seen.values()))) <= 1:
            labels[k] = next(iter(seen.values()))
            continue
        winner = primary if primary in seen else None
        if auto_merge and winner is not None:
            winner = next(r for r in sorted(seen) if str(seen[r]) != str(seen[primary]))
        if winner is not None:
            labels[k] = seen[winner]
        conflicts.append({"key": k, "values": dict(sorted(seen.items())), "winner": winner})
    return {"labels": labels, "conflicts": conflicts}


__all__ = [
    "MERGED_SLOW_KEY",
    "Replica",
    "Snapshot",
    "healthy_instances",
    "merge_slow",
    "region_routable",
    "region_serving",
    "routable_regions",
]
