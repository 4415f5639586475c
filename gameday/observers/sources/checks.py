"""Role *check timeouts*: the federation's own timed-out health checks per region
(:class:`CheckTimeoutSource`; built-in: :class:`HttpJsonCheckTimeouts`), read at the
utilisation rate so that a starved federation makes a failing verdict inconclusive.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from gameday.errors import TransientError
from gameday.observers.sources._common import HttpClient, _as_int, _error, _required, fetch


@runtime_checkable
class CheckTimeoutSource(Protocol):
    """How many of the federation's own health checks of each region's gateway timed out so far
    (a counter per region). Optional: where it rises for a region the drill did not touch, the
    federation's checker (or that gateway) was starved of CPU, and a verdict that fails then is
    inconclusive (:mod:`gameday.verdicts.harness`)."""

    async def read(self, http: HttpClient) -> Mapping[str, int] | None:
        """Region -> timed-out checks so far; None when it could not be read."""
        ...

    def describe(self) -> str: ...


class HttpJsonCheckTimeouts:
    """The per-region count of timed-out health checks from one JSON document over HTTP; *field*
    holds ``{region}`` (``regions.{region}.probe_timeouts``, the reference GSLB's ``/status``)."""

    def __init__(self, *, url: str, regions: tuple[str, ...], field: str = "regions.{region}.probe_timeouts") -> None:
        self.url = url
        self.regions = regions
        self.field = field
        self.last_error: str | None = None

    async def read(self, http: HttpClient) -> Mapping[str, int] | None:
        try:
            doc = json.loads(await fetch(http, self.url))
            counts = {r: _as_int(_required(doc, self.field.format(region=r), self.url), f"field {self.field!r}")
                      for r in self.regions}
        except (TransientError, ValueError, TypeError) as exc:
            self.last_error = _error(exc)
            return None
        self.last_error = None
        return counts

    def describe(self) -> str:
        return f"HTTP JSON {self.url} (timed-out health checks: {self.field})"
