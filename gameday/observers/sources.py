"""Observation sources: where the observer reads a federation from, one observation at a time.

A federation is known to the harness only through what it exposes (DESIGN.md §7): an entry
node's route version and routable regions over HTTP JSON, the control plane's version over
HTTP JSON or Prometheus, the GSLB's answers over DNS, stale-snapshot alarms in a log file or
a command's output. Each kind is one small protocol whose one method takes one observation
now; the observer polls them on one monotonic clock and stamps each answer when it arrived.
The reference app is described with the same built-in sources as any other federation.

Protocols: :class:`EntryNodeSource`, :class:`VersionSource`, :class:`DnsSource`,
:class:`AlarmSource`, :class:`UtilisationSource` (polled) and :class:`VersionFeed` (push: the
control plane's version as it announces it). Built-ins: :class:`HttpJsonNode`,
:class:`HttpJsonVersion`, :class:`PrometheusVersion`, :class:`MetricsVersion`, :class:`UdpDns`,
:class:`LogFileAlarms`, :class:`CommandAlarms`, :class:`LineFeedAlarms`,
:class:`HttpJsonUtilisation`, :class:`NatsVersionFeed`. What a target gives the observer:
:class:`Sources`.

A source never raises for a federation that does not answer: "it did not answer" is an
observation (``NodeReading(ok=False)``, a ``None`` version or utilisation,
``DnsReading(ok=False)``, a feed that stays silent). Why the last read failed is kept in the
built-ins' ``last_error`` for the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import queue
import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import aiohttp
import dns.exception
import dns.message
import dns.rdatatype
import httpx
from prometheus_client.parser import text_string_to_metric_families

from gameday.errors import ConfigError, GamedayError, TransientError

log = logging.getLogger(__name__)

HttpClient = httpx.AsyncClient | aiohttp.ClientSession
"""What an HTTP source reads through: the observer passes one shared ``aiohttp.ClientSession``
(at 60 entry nodes x 10 Hz an httpx request costs the harness about 30x the CPU of an aiohttp
one, which a 2-core machine cannot give: bench/observer_rate.py); an ``httpx.AsyncClient``
works as well (contract A), for callers that have one."""

AlarmEventKind = Literal["stale_snapshot", "stale_snapshot_cleared"]
ALARM_EVENTS: tuple[AlarmEventKind, ...] = ("stale_snapshot", "stale_snapshot_cleared")


# -- readings -------------------------------------------------------------------------------
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


@dataclass(frozen=True)
class DnsReading:
    """What clients are answered, over all the samples of one read."""

    ok: bool
    """At least one query was answered (an empty answer counts: the server spoke)."""
    addresses: tuple[str, ...] = ()
    """Every address of every answered query, repeated across samples (for answer shares)."""
    ttl: int | None = None
    """TTL of the last answer's record set, seconds."""


@dataclass(frozen=True)
class AlarmEvent:
    """A stale-snapshot alarm raised or cleared by a node."""

    t: float | None
    """When the node logged it, on the harness's monotonic clock, when the line says so;
    None: the observer stamps it when it read the line."""
    node: str
    event: AlarmEventKind
    detail: str = ""


@dataclass(frozen=True)
class UtilisationReading:
    """What one app instance reports about its load."""

    capacity: float
    """The load it declares it can serve, req/s."""
    utilisation: float
    """The share of :attr:`capacity` in use now (0.5: half; above 1 when overloaded)."""
    rejected: int
    """Overload responses (503/429) it has sent so far: a counter, compared between readings."""


# -- the seams ----------------------------------------------------------------------------------
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


@runtime_checkable
class VersionSource(Protocol):
    """The control plane's global route version."""

    async def read(self, http: HttpClient) -> int | None:
        """The version now; None when it could not be read."""
        ...

    def describe(self) -> str: ...


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


@runtime_checkable
class DnsSource(Protocol):
    """What the GSLB answers clients."""

    async def read(self) -> DnsReading: ...

    def describe(self) -> str: ...


@runtime_checkable
class AlarmSource(Protocol):
    """Stale-snapshot alarms. Synchronous: files and pipes are read without waiting."""

    def poll(self) -> list[AlarmEvent]:
        """New events since the last call (the first call: since the source was made)."""
        ...

    def describe(self) -> str: ...


@runtime_checkable
class UtilisationSource(Protocol):
    """One app instance's load against its capacity (the headroom verdict reads it)."""

    async def read(self, http: HttpClient) -> UtilisationReading | None:
        """Take one reading now; None when the instance did not answer (or not what it promises)."""
        ...

    def describe(self) -> str: ...


@runtime_checkable
class VersionFeed(Protocol):
    """The control plane's version as it announces it (push): heard when sent, not polled.

    A feed complements a :class:`VersionSource`: the announcement is stamped when it arrives,
    so the version verdict sees a new version the moment the control plane sends it.
    """

    async def start(self, heard: Callable[[int], None]) -> None:
        """Start listening in the caller's event loop; from then on call *heard* with every
        version announced. Returns once listening, or once it gave up. An unreachable feed is
        not an error (the polled version is still read): it is logged, ``last_error`` says why,
        and it may keep trying; the caller runs this as a task and cancels it when it stops."""
        ...

    async def close(self) -> None:
        """Stop listening; never raises. Idempotent."""
        ...

    def describe(self) -> str: ...


@runtime_checkable
class Closeable(Protocol):
    """A source holding a resource (a child process) the observer releases when it stops."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class Sources:
    """Everything the observer polls, as a target describes its federation."""

    entry_nodes: tuple[EntryNodeSource, ...]
    dns: DnsSource
    control_plane: VersionSource | None = None
    """None: the version verdict is not applicable."""
    alarms: tuple[AlarmSource, ...] = ()
    """Empty: the alarm verdict is not applicable."""
    utilisation: Mapping[str, tuple[UtilisationSource, ...]] = field(default_factory=dict)
    """Region -> one source per app instance; optional (empty: the headroom verdict judges
    only the static N-1 arithmetic), read at a lower rate."""
    regional_control_planes: Mapping[str, VersionSource] = field(default_factory=dict)
    """Region -> its own control plane's version (the regional layout, R14); read at the
    utilisation rate. The version verdict of a fault on a region's instances reads it."""
    broadcast: VersionFeed | None = None
    """The control plane's version as it announces it, where the harness may listen (the
    local target's bus); None: the version is polled only."""
    check_timeouts: CheckTimeoutSource | None = None
    """The federation's own timed-out health checks per region, read at the utilisation rate;
    None: only the observer's own rates tell a starved harness (gameday.verdicts.harness)."""

    def describe(self) -> list[str]:
        """One line per source, for the report."""
        lines = [f"entry node {n.name} (region {n.region}): {n.describe()}" for n in self.entry_nodes]
        lines.append(f"dns: {self.dns.describe()}")
        lines.append("control plane: " + (self.control_plane.describe() if self.control_plane
                                          else "none (version verdict not applicable)"))
        if self.broadcast is not None:
            lines.append(f"control plane broadcast: {self.broadcast.describe()}")
        lines += [f"regional control plane {r}: {s.describe()}" for r, s in self.regional_control_planes.items()]
        lines += [f"utilisation {r}: {s.describe()}" for r, srcs in self.utilisation.items() for s in srcs]
        lines += [f"alarms: {a.describe()}" for a in self.alarms] or ["alarms: none (alarm verdict not applicable)"]
        if self.check_timeouts is not None:
            lines.append(f"the federation's check timeouts: {self.check_timeouts.describe()}")
        return lines


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


# -- entry nodes ------------------------------------------------------------------------------
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


# -- control-plane versions ---------------------------------------------------------------------
class HttpJsonVersion:
    """The control plane's version from a JSON document over HTTP (dotted *field* path; the
    default is the profile format's documented name, as for :class:`HttpJsonNode`)."""

    def __init__(self, *, url: str, field: str = "version") -> None:
        self.url = url
        self.field = field
        self.last_error: str | None = None

    async def read(self, http: HttpClient) -> int | None:
        try:
            version = _as_int(_required(json.loads(await fetch(http, self.url)), self.field, self.url),
                              f"field {self.field!r}")
        except (TransientError, ValueError, TypeError) as exc:
            self.last_error = _error(exc)
            return None
        self.last_error = None
        return version

    def describe(self) -> str:
        return f"HTTP JSON {self.url} (version: {self.field})"


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


class PrometheusVersion:
    """The control plane's version from an instant query against a Prometheus HTTP API.

    Args:
        url: the Prometheus server (``http://prometheus:9090``); ``/api/v1/query`` is added
            unless the URL already ends with it.
        query: PromQL whose result is the version: a scalar, or a vector whose largest sample
            is taken (several replicas of a control plane may export it; the newest counts).

    A vector with no sample (the series is absent) reads as None.
    """

    def __init__(self, *, url: str, query: str) -> None:
        self.url = url if url.rstrip("/").endswith("/api/v1/query") else url.rstrip("/") + "/api/v1/query"
        self.query = query
        self.last_error: str | None = None

    async def read(self, http: HttpClient) -> int | None:
        try:
            version = self._version(json.loads(await fetch(http, self.url, {"query": self.query})))
        except (TransientError, ValueError, TypeError) as exc:
            self.last_error = _error(exc)
            return None
        self.last_error = None if version is not None else f"query {self.query!r} returned no sample"
        return version

    def _version(self, body: object) -> int | None:
        if _path(body, "status") != "success":
            raise ValueError(f"Prometheus answered {str(body)[:200]}")
        kind, result = _path(body, "data.resultType"), _path(body, "data.result")
        if kind == "scalar":
            return _as_int(_path(result, "1"), "scalar result")
        if kind != "vector" or not isinstance(result, list):
            raise ValueError(f"query {self.query!r} gave a {kind} result, expected a scalar or an instant vector")
        values = [_as_int(_path(s, "value.1"), "sample value") for s in result]
        return max(values) if values else None

    def describe(self) -> str:
        return f"Prometheus {self.url} query {self.query!r}"


class MetricsVersion:
    """The control plane's version from a scrape of a ``/metrics`` text endpoint.

    Args:
        url: the endpoint.
        metric: the sample name (``gameday_controlplane_version``).
        labels: labels a sample must carry (a subset match); the largest matching sample counts.

    Parsed with ``prometheus_client``'s parser: broken exposition text is an error reading
    (None, ``last_error`` says why), not a guess.
    """

    def __init__(self, *, url: str, metric: str, labels: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.metric = metric
        self.labels = dict(labels or {})
        self.last_error: str | None = None

    async def read(self, http: HttpClient) -> int | None:
        try:
            text = (await fetch(http, self.url)).decode(errors="replace")
            values = [_as_int(s.value, f"{self.metric} sample")
                      for fam in text_string_to_metric_families(text) for s in fam.samples
                      if s.name == self.metric and all(s.labels.get(k) == v for k, v in self.labels.items())]
        except (TransientError, ValueError, TypeError) as exc:  # the parser raises either on bad text
            self.last_error = _error(exc)
            return None
        self.last_error = None if values else f"no sample {self.metric}{self.labels or ''} at {self.url}"
        return max(values) if values else None

    def describe(self) -> str:
        sel = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        return f"metrics {self.url} ({self.metric}{{{sel}}})" if sel else f"metrics {self.url} ({self.metric})"


# -- utilisation ----------------------------------------------------------------------------------
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


# -- the version as announced (push) ---------------------------------------------------------------
class NatsVersionFeed:
    """The control plane's version broadcast on a NATS subject: a JSON message per
    announcement, the version at dotted path *field*.

    Args:
        url: the NATS server (``nats://host:port``).
        subject: the subject the control plane publishes its version on.
        field: dotted path of the version in each message.

    A message without a whole-number version at *field* is skipped (``last_error`` says why).
    While the server cannot be reached, :meth:`start` keeps trying (the bus may come back; cancel
    it to stop), and a server that goes away later is reconnected to; each is logged once, not
    per attempt.
    """

    def __init__(self, *, url: str, subject: str, field: str) -> None:
        self.url = url
        self.subject = subject
        self.field = field
        self.last_error: str | None = None
        self._nc: object | None = None

    async def start(self, heard: Callable[[int], None]) -> None:
        import nats  # noqa: PLC0415  (only a federation with a reachable bus needs nats-py)

        async def on_message(msg: object) -> None:
            try:
                doc = json.loads(msg.data)  # type: ignore[attr-defined]
                version = _as_int(_required(doc, self.field, self.subject), f"field {self.field!r}")
            except (ValueError, TypeError) as exc:
                self.last_error = _error(exc)
                return
            heard(version)

        # nats-py's default error callback logs every failed reconnect with its traceback (three
        # for a bus killed mid-drill, more the longer it stays down): say it once, in one line.
        down: list[bool] = [False]

        async def on_error(exc: Exception) -> None:
            self.last_error = f"{type(exc).__name__}: {exc}"
            if not down[0]:
                down[0] = True
                log.warning("the bus at %s went away (%s): the control plane's version is read by polling only "
                            "until it answers again", self.url, type(exc).__name__)

        async def on_reconnected() -> None:
            if down[0]:
                down[0] = False
                log.info("the bus at %s answers again: the version broadcast is heard again", self.url)

        try:
            nc = await nats.connect(self.url, connect_timeout=1, max_reconnect_attempts=-1,
                                    reconnect_time_wait=0.2, allow_reconnect=True,
                                    error_cb=on_error, reconnected_cb=on_reconnected)
        except Exception as exc:  # noqa: BLE001  (the bus may be down: polling still works)
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("broadcast subscription unavailable (%s); polling only", exc)
            return
        self._nc = nc
        await nc.subscribe(self.subject, cb=on_message)

    async def close(self) -> None:
        nc, self._nc = self._nc, None
        if nc is not None:
            with contextlib.suppress(Exception):  # a bus already gone: nothing left to release
                await nc.close()  # type: ignore[attr-defined]

    def describe(self) -> str:
        return f"NATS {self.url} subject {self.subject} (version: {self.field})"


# -- DNS ------------------------------------------------------------------------------------------
class UdpDns:
    """The GSLB's answers to *fqdn* over UDP (dnspython), *samples* queries per read.

    Several samples per read because a weighted GSLB answers one address at random: a region
    with a 20 % weight needs several queries to be seen.
    """

    def __init__(self, *, server: str, port: int = 53, fqdn: str, rdtype: str = "A", samples: int = 16,
                 timeout: float = 0.5) -> None:
        try:
            self._rdtype = dns.rdatatype.from_text(rdtype)
        except dns.rdatatype.UnknownRdatatype as exc:
            raise ConfigError(f"DNS source: record type {rdtype!r} is not one dnspython knows "
                              f"(expected A or AAAA)", field="rdtype") from exc
        if self._rdtype not in (dns.rdatatype.A, dns.rdatatype.AAAA):
            raise ConfigError(f"DNS source: record type {rdtype!r} carries no address (expected A or AAAA)",
                              field="rdtype")
        if samples < 1:
            raise ConfigError(f"DNS source: samples {samples} must be at least 1", field="samples")
        self.server = server
        self.port = port
        self.fqdn = fqdn if fqdn.endswith(".") else fqdn + "."
        self.rdtype = rdtype.upper()
        self.samples = samples
        self.timeout = timeout
        self.last_error: str | None = None

    async def read(self) -> DnsReading:
        # One socket per read, not one per query: the samples go out together and their
        # answers are matched by message id (dnspython's query.udp opened and closed 16
        # endpoints per read, at 10 Hz a fifth of the observer's CPU in a drill).
        queries: dict[int, dns.message.Message] = {}
        while len(queries) < self.samples:
            query = dns.message.make_query(self.fqdn, self._rdtype)
            queries.setdefault(query.id, query)
        loop = asyncio.get_running_loop()
        answers: dict[int, asyncio.Future[dns.message.Message]] = {i: loop.create_future() for i in queries}
        try:
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _DnsAnswers(queries, answers), remote_addr=(self.server, self.port))
        except OSError as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            return DnsReading(False, (), None)
        try:
            for q in queries.values():
                transport.sendto(q.to_wire())
            await asyncio.wait(answers.values(), timeout=self.timeout)
        finally:
            transport.close()
        addresses: list[str] = []
        ttl = None
        ok = False
        for f in answers.values():
            if not f.done():
                f.cancel()
                self.last_error = f"Timeout: no answer within {self.timeout} s"
                continue
            if (err := f.exception()) is not None:
                self.last_error = f"{type(err).__name__}: {err}"
                continue
            ok = True
            for rrset in f.result().answer:
                if rrset.rdtype == self._rdtype:
                    ttl = rrset.ttl
                    addresses += [rr.address for rr in rrset]
        if ok:
            self.last_error = None
        return DnsReading(ok, tuple(addresses), ttl)

    def describe(self) -> str:
        return f"DNS {self.rdtype} {self.fqdn} at {self.server}:{self.port} (UDP, {self.samples} queries per read)"


class _DnsAnswers(asyncio.DatagramProtocol):
    """One read's socket: each answer resolves the future of the query it answers."""

    def __init__(self, queries: dict[int, dns.message.Message],
                 answers: dict[int, asyncio.Future[dns.message.Message]]) -> None:
        self._queries = queries
        self._answers = answers

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        try:
            msg = dns.message.from_wire(data)
        except dns.exception.DNSException:
            return  # not an answer to us (the socket is connected, so from the server): ignore it
        fut = self._answers.get(msg.id)
        if fut is not None and not fut.done() and self._queries[msg.id].is_response(msg):
            fut.set_result(msg)

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable and the like: every query still waiting gets the error.
        for fut in self._answers.values():
            if not fut.done():
                fut.set_exception(exc)


# -- alarms ---------------------------------------------------------------------------------------
class _LineMatcher:
    """Turns log lines into alarm events: a JSON field naming the event, or regexes.

    JSON (*json_event_field*): the field's value must be one of :data:`ALARM_EVENTS`;
    *time_field* (optional) is the line's CLOCK_MONOTONIC stamp; *detail_field* its detail.
    Regex: a line matching *regex* raises the alarm, one matching *clear_regex* clears it; a
    named group ``node`` overrides the source's node (one log for several proxies).
    """

    def __init__(self, *, node: str, regex: str | None, clear_regex: str | None, json_event_field: str | None,
                 time_field: str | None, detail_field: str | None, where: str) -> None:
        if (regex is None) == (json_event_field is None):
            raise ConfigError(f"alarm source {where}: give exactly one of regex or json_event_field",
                              field="regex")
        try:
            self.regex = re.compile(regex) if regex is not None else None
            self.clear = re.compile(clear_regex) if clear_regex is not None else None
        except re.error as exc:
            raise ConfigError(f"alarm source {where}: invalid regular expression: {exc}", field="regex") from exc
        self.node = node
        self.event_field = json_event_field
        self.time_field = time_field
        self.detail_field = detail_field

    def match(self, line: str) -> AlarmEvent | None:
        if self.event_field is not None:
            return self._json(line)
        for pattern, event in ((self.regex, ALARM_EVENTS[0]), (self.clear, ALARM_EVENTS[1])):
            m = pattern.search(line) if pattern is not None else None
            if m is not None:
                node = m.groupdict().get("node") or self.node
                return AlarmEvent(None, node, event, line.strip()[:500])
        return None

    def _json(self, line: str) -> AlarmEvent | None:
        assert self.event_field is not None
        if not line.lstrip().startswith("{"):
            return None
        try:
            doc = json.loads(line)
        except ValueError:
            return None  # a log may interleave JSON with other lines
        event = _path(doc, self.event_field)
        if event not in ALARM_EVENTS:
            return None
        t: float | None = None
        if self.time_field is not None:
            raw = _path(doc, self.time_field)
            t = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
        detail = _path(doc, self.detail_field) if self.detail_field is not None else _MISSING
        return AlarmEvent(t, self.node, event, "" if detail is _MISSING else str(detail))


class LogFileAlarms:
    """Alarms from a log file a node appends to, read from where the last poll stopped.

    Args:
        path: the log file.
        node: the node whose alarms it holds.
        regex / clear_regex: see :class:`_LineMatcher`; or
        json_event_field (+ time_field, detail_field): JSON lines.
        from_start: read what the file already holds; default False: the first poll sees
            what was appended after the source was made (older lines are another drill's).

    A half-written last line is kept for the next poll; a file that shrank (rotated,
    truncated) is read again from its start.
    """

    def __init__(self, *, path: str | Path, node: str, regex: str | None = None, clear_regex: str | None = None,
                 json_event_field: str | None = None, time_field: str | None = None,
                 detail_field: str | None = None, from_start: bool = False) -> None:
        self.path = Path(path)
        self.node = node
        self._matcher = _LineMatcher(node=node, regex=regex, clear_regex=clear_regex,
                                     json_event_field=json_event_field, time_field=time_field,
                                     detail_field=detail_field, where=str(self.path))
        self._offset = 0 if from_start else self._size()
        self.last_error: str | None = None

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def poll(self) -> list[AlarmEvent]:
        try:
            with self.path.open("rb") as fh:
                size = fh.seek(0, 2)
                if size < self._offset:
                    self._offset = 0  # rotated or truncated: what it holds now is new
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            self.last_error = f"{self.path} does not exist (yet)"
            return []
        except OSError as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            return []
        self.last_error = None
        end = data.rfind(b"\n") + 1  # keep a half-written last line for next time
        self._offset += end
        return [e for line in data[:end].decode(errors="replace").splitlines()
                if (e := self._matcher.match(line)) is not None]

    def describe(self) -> str:
        how = (f"JSON field {self._matcher.event_field}" if self._matcher.event_field is not None
               else f"regex {self._matcher.regex.pattern if self._matcher.regex else ''!r}")
        return f"log file {self.path} of {self.node} ({how})"


class CommandAlarms:
    """Alarms from the output of a command that follows a log (``journalctl -f``,
    ``kubectl logs -f``), started on the first poll and stopped by :meth:`close`.

    Args:
        argv: the command, run without a shell; its stdout lines are matched.
        node: the node whose alarms it prints.
        regex / clear_regex, json_event_field (+ time_field, detail_field): as for
            :class:`LogFileAlarms`.

    Lines are read by a thread as they come, so :meth:`poll` never waits. A command that
    exits is not restarted (it would print its history again); ``last_error`` says how it
    ended.
    """

    def __init__(self, *, argv: Sequence[str], node: str, regex: str | None = None, clear_regex: str | None = None,
                 json_event_field: str | None = None, time_field: str | None = None,
                 detail_field: str | None = None) -> None:
        if not argv:
            raise ConfigError(f"alarm command for {node}: argv is empty", field="argv")
        self.argv = tuple(argv)
        self.node = node
        self._matcher = _LineMatcher(node=node, regex=regex, clear_regex=clear_regex,
                                     json_event_field=json_event_field, time_field=time_field,
                                     detail_field=detail_field, where=" ".join(self.argv))
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._reader: threading.Thread | None = None
        self.last_error: str | None = None

    def _start(self) -> None:
        try:
            self._proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL)
        except OSError as exc:
            self.last_error = f"cannot run {' '.join(self.argv)}: {exc}"
            self._proc = None
            return
        self._reader = threading.Thread(target=self._read, args=(self._proc,), daemon=True,
                                        name=f"gameday-alarms-{self.node}")
        self._reader.start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            self._lines.put(raw.decode(errors="replace"))
        code = proc.wait()
        self.last_error = f"{' '.join(self.argv)} exited with code {code}; its later output is not seen"

    def poll(self) -> list[AlarmEvent]:
        if self._proc is None and self._reader is None and self.last_error is None:
            self._start()
        out: list[AlarmEvent] = []
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return out
            if (e := self._matcher.match(line)) is not None:
                out.append(e)

    def close(self) -> None:
        """Stop the command (SIGTERM, then SIGKILL after 2 s). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(2)

    def describe(self) -> str:
        how = (f"JSON field {self._matcher.event_field}" if self._matcher.event_field is not None
               else f"regex {self._matcher.regex.pattern if self._matcher.regex else ''!r}")
        return f"command {' '.join(self.argv)} for {self.node} ({how})"


class LineFeedAlarms:
    """Alarms from a callable that returns new ``(node, line)`` pairs: a target that reads its
    nodes' logs through its own API (kube: pod logs through the Kubernetes client).

    The lines the feed holds when the source is made are discarded (another drill's); the
    node each line names is kept.

    Args:
        feed: returns the lines logged since its last call.
        name: what the feed is, for reports.
        regex / clear_regex, json_event_field (+ time_field, detail_field): as for
            :class:`LogFileAlarms`.
    """

    def __init__(self, *, feed: Callable[[], Iterable[tuple[str, str]]], name: str, regex: str | None = None,
                 clear_regex: str | None = None, json_event_field: str | None = None,
                 time_field: str | None = None, detail_field: str | None = None) -> None:
        self.feed = feed
        self.name = name
        self._args = {"regex": regex, "clear_regex": clear_regex, "json_event_field": json_event_field,
                      "time_field": time_field, "detail_field": detail_field}
        _LineMatcher(node=name, where=name, **self._args)  # a bad pattern fails here, not at the first poll
        self._matchers: dict[str, _LineMatcher] = {}
        self.last_error: str | None = None
        for _ in feed():
            pass

    def poll(self) -> list[AlarmEvent]:
        try:
            lines = list(self.feed())
        except (GamedayError, OSError) as exc:  # a flapping API: no lines this time
            self.last_error = f"{type(exc).__name__}: {exc}"
            return []
        self.last_error = None
        out = []
        for node, line in lines:
            m = self._matchers.get(node)
            if m is None:
                m = self._matchers[node] = _LineMatcher(node=node, where=self.name, **self._args)
            if (e := m.match(line)) is not None:
                out.append(e)
        return out

    def describe(self) -> str:
        how = self._args["json_event_field"] or self._args["regex"]
        return f"{self.name} ({'JSON field' if self._args['json_event_field'] else 'regex'} {how})"
