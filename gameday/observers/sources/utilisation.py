"""Role *utilisation*: one app instance's load against its capacity, for the headroom verdict
(:class:`UtilisationSource`; built-in: :class:`HttpJsonUtilisation`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gameday.errors import TransientError
from gameday.observers.sources._common import HttpClient, _as_int, _error, _required, fetch


# -- the reading ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class UtilisationReading:
    """What one app instance reports about its load."""

    capacity: float
    """The load it declares it can serve, req/s."""
    utilisation: float
    """The share of :attr:`capacity` in use now (0.5: half; above 1 when overloaded)."""
    rejected: int
    """Overload responses (503/429) it has sent so far: a counter, compared between readings."""


# -- the seam -------------------------------------------------------------------------------------
@runtime_checkable
class UtilisationSource(Protocol):
    """One app instance's load against its capacity (the headroom verdict reads it)."""

    async def read(self, http: HttpClient) -> UtilisationReading | None:
        """Take one reading now; None when the instance did not answer (or not what it promises)."""
        ...

    def describe(self) -> str: ...


# -- the built-in ---------------------------------------------------------------------------------
class HttpJsonUtilisation:
    """One app instance's load from a JSON document over HTTP, read through field paths.

    Args:
        url: the JSON document's URL.
        capacity: dotted path of its declared capacity, req/s.
        utilisation: dotted path of the share of that capacity in use (0.5: half).
        rejected: dotted path of its counter of overload responses; None: it keeps none (0).

    No default paths: they are the federation's own names, given where its sources are built.
    A field missing from an answer makes the reading None; ``last_error`` says which.
    """

    def __init__(self, *, url: str, capacity: str, utilisation: str, rejected: str | None) -> None:
        self.url = url
        self.capacity_path = capacity
        self.utilisation_path = utilisation
        self.rejected_path = rejected
        self.last_error: str | None = None

    async def read(self, http: HttpClient) -> UtilisationReading | None:
        try:
            doc = json.loads(await fetch(http, self.url))
            reading = UtilisationReading(
                capacity=self._number(doc, self.capacity_path),
                utilisation=self._number(doc, self.utilisation_path),
                rejected=(_as_int(_required(doc, self.rejected_path, self.url), f"field {self.rejected_path!r}")
                          if self.rejected_path is not None else 0))
        except (TransientError, ValueError, TypeError) as exc:
            self.last_error = _error(exc)
            return None
        self.last_error = None
        return reading

    def _number(self, doc: object, path: str) -> float:
        value = _required(doc, path, self.url)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise TypeError(f"field {path!r} is {value!r}, not a number")
        return float(value)

    def describe(self) -> str:
        fields = f"capacity: {self.capacity_path}, utilisation: {self.utilisation_path}"
        return f"HTTP JSON {self.url} ({fields}, rejected: {self.rejected_path or 'not provided'})"
