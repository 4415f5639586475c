"""A name -> entry table that a conftest or plugin extends: faults (:mod:`gameday.faults`),
source kinds (:mod:`gameday.observers.kinds`), each target's fault actions."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

from gameday.errors import ConfigError
from gameday.runtime.userinput import shown

T = TypeVar("T")


class Table(Mapping[str, T]):
    """A name -> entry table that a conftest or plugin can extend (:meth:`register`)."""

    def __init__(self, what: str, entries: Mapping[str, T] | None = None) -> None:
        self._what = what
        self._entries: dict[str, T] = dict(entries or {})

    def register(self, name: str, entry: T, *, replace: bool = False) -> T:
        """Add *entry* under *name*; returns it.

        Raises:
            ConfigError: *name* is taken and *replace* is false (two plugins, one name).
        """
        if name in self._entries and not replace:
            raise ConfigError(f"{self._what} {shown(name)} is already registered; pass replace=True to "
                              "override it on purpose")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        return sorted(self._entries)
