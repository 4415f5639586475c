"""What every source module shares: the HTTP client a source reads through and :func:`fetch`,
dotted field paths, the text of a failed read, and :class:`Closeable`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import aiohttp
import httpx

from gameday.errors import TransientError

HttpClient = httpx.AsyncClient | aiohttp.ClientSession
"""What an HTTP source reads through: the observer passes one shared ``aiohttp.ClientSession``
(at 60 entry nodes x 10 Hz an httpx request costs the harness about 30x the CPU of an aiohttp
one, which a 2-core machine cannot give: bench/observer_rate.py); an ``httpx.AsyncClient``
works as well (contract A), for callers that have one."""


@runtime_checkable
class Closeable(Protocol):
    """A source holding a resource (a child process) the observer releases when it stops."""

    def close(self) -> None: ...


# -- field paths ----------------------------------------------------------------------------------
_MISSING = object()


def _path(doc: object, path: str) -> object:
    """The value at dotted *path* (``status.route.version``; a numeric part indexes a list),
    or ``_MISSING``."""
    cur = doc
    for part in path.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def _required(doc: object, path: str, url: str) -> object:
    value = _path(doc, path)
    if value is _MISSING:
        raise ValueError(f"field {path!r} missing from {url}")
    return value


def _as_int(value: object, what: str) -> int:
    # JSON and Prometheus may carry a version as 7, 7.0 or "7"; anything else is not a version.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"{what} is {value!r}, not a number")
    f = float(value)
    if not math.isfinite(f) or f != int(f):
        raise ValueError(f"{what} is {value!r}, not a whole number")
    return int(f)


async def fetch(http: HttpClient, url: str, params: Mapping[str, str] | None = None) -> bytes:
    """The body of ``GET url`` through either client.

    Raises:
        TransientError: no answer (refused, timed out) or an HTTP error status; the message
            names the URL and what happened.
    """
    try:
        if isinstance(http, aiohttp.ClientSession):
            async with http.get(url, params=params) as r:
                body = await r.read()
                status = r.status
        else:
            resp = await http.get(url, params=params)
            body, status = resp.content, resp.status_code
    except (httpx.HTTPError, aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise TransientError(f"{type(exc).__name__}: {exc or 'no answer'} ({url})") from exc
    if status >= 400:
        raise TransientError(f"HTTP {status} from {url}")
    return body


def _error(exc: Exception) -> str:
    return str(exc) if isinstance(exc, TransientError) else f"{type(exc).__name__}: {exc}"
