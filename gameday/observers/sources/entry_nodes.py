"""Role *entry node*: an entry node's route version, routable regions and stale flag
(:class:`EntryNodeSource`; built-in: :class:`HttpJsonNode`; profile kind ``entry_node``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gameday.errors import TransientError
from gameday.observers.sources._common import HttpClient, _as_int, _error, _required, fetch


# -- the reading ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeReading:
    """What an entry node reports."""

    ok: bool
    """It answered at all (and its answer carried the fields its source promises)."""
    version: int | None = None
    """The route version it routes by (None: the source has no version)."""
    routable: tuple[str, ...] | None = None
    """The regions it routes to (None: not known)."""
    stale: bool | None = None
    """Its own stale flag (None: not known)."""


# -- the seam -------------------------------------------------------------------------------------
@runtime_checkable
class EntryNodeSource(Protocol):
    """An entry node (gateway, proxy): the route version and regions it routes by."""

    name: str
    """E.g. ``gateway-a``: the name figures and messages use."""
    region: str
    """The region the node belongs to (it does not survive its region's failure)."""

    async def read(self, http: HttpClient) -> NodeReading:
        """Take one reading now; ``ok=False`` when the node did not answer."""
        ...

    def describe(self) -> str:
        """One line for reports: what is read, from where."""
        ...


# -- the built-in ---------------------------------------------------------------------------------
class HttpJsonNode:
    """An entry node whose status is a JSON document over HTTP, read through field paths.

    Args:
        name: the node's name (``gateway-a``).
        region: its region.
        url: the JSON document's URL.
        version: dotted path of the route version (an integer); None: not provided.
        routable: dotted path of the list of regions it routes to; None: not provided.
        stale: dotted path of its stale flag (a boolean); None: not provided.

    A provided field missing from an answer makes the reading not ok (the node answered, but
    not what its description promises); ``last_error`` says which field. The default paths are
    the profile format's documented names (:class:`~gameday.observers.kinds.HttpJsonNodeSpec`),
    kept for callers that build sources by hand; the reference app's sources name theirs.
    """

    def __init__(self, *, name: str, region: str, url: str, version: str | None = "version",
                 routable: str | None = "routable_regions", stale: str | None = "stale") -> None:
        self.name = name
        self.region = region
        self.url = url
        self.version_path = version
        self.routable_path = routable
        self.stale_path = stale
        self.last_error: str | None = None

    async def read(self, http: HttpClient) -> NodeReading:
        try:
            doc = json.loads(await fetch(http, self.url))
            reading = NodeReading(True, self._version(doc), self._routable(doc), self._stale(doc))
        except (TransientError, ValueError, TypeError) as exc:
            self.last_error = _error(exc)
            return NodeReading(False)
        self.last_error = None
        return reading

    def _field(self, doc: object, path: str) -> object:
        return _required(doc, path, self.url)

    def _version(self, doc: object) -> int | None:
        if self.version_path is None:
            return None
        return _as_int(self._field(doc, self.version_path), f"field {self.version_path!r}")

    def _routable(self, doc: object) -> tuple[str, ...] | None:
        if self.routable_path is None:
            return None
        value = self._field(doc, self.routable_path)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError(f"field {self.routable_path!r} is {value!r}, not a list of region names")
        return tuple(value)

    def _stale(self, doc: object) -> bool | None:
        if self.stale_path is None:
            return None
        value = self._field(doc, self.stale_path)
        if not isinstance(value, bool):
            raise TypeError(f"field {self.stale_path!r} is {value!r}, not true or false")
        return value

    def describe(self) -> str:
        fields = ", ".join(f"{k}: {v}" for k, v in (("version", self.version_path),
                                                      ("routable", self.routable_path),
                                                      ("stale", self.stale_path)) if v is not None)
        return f"HTTP JSON {self.url} ({fields or 'answers only'})"
