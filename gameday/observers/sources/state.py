"""Role state: the federation's write path and read-back (DESIGN.md section 9).

A federation with a state layer exposes a way to write a record by a unique id and a way to
read records back by id. :class:`StateSource` is the seam: the drill's writer
(:mod:`gameday.observers.writes`) calls :meth:`StateSource.write` for each write, from many
threads, and :meth:`StateSource.lookup` once the federation is steady again after the
restore, to find the acknowledged writes that were lost.

:class:`HttpState` is the built-in, as a client of the federation would write: it resolves
the service name through the federation's DNS server (honouring the TTL, one cache per
writer client, so clients move at their own moments as real ones do) and sends
``POST <path>/<id>`` to the address it got; the read-back is ``POST <lookup path>`` with
``{"ids": [...]}`` answered ``{"found": {id: seq}, "failed": [...]}``, through the same
global entry. The reference app serves both (:mod:`gameday.fedapp.app`).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol, runtime_checkable
from urllib.parse import quote

import dns.exception
import dns.message
import dns.query
import dns.rdatatype
import httpx

from gameday.model.timeline import WriteOutcome
from gameday.observers.sources._common import _MISSING, _as_int, _path
from gameday.verdicts.state import StatedReplication

READ_BACK_PATIENCE = 10.0
"""Seconds the read-back keeps trying (a store electing a new leader after the restore answers
nothing for a few seconds); past it the read-back failed, and data loss is not known."""


@dataclass(frozen=True)
class WriteAnswer:
    """How the federation answered one write."""

    outcome: WriteOutcome
    region: str | None = None
    seq: int | None = None
    error: str | None = None
    entry: str | None = None
    epoch: int | None = None
    """The primary's epoch that acknowledged it, where the store says (the fencing verdict)."""


@dataclass(frozen=True)
class ReadAnswer:
    """How the federation answered one read of one id through its global entry: ``found``
    True (served), False (it answered that it does not hold it), None (no answer: the read
    path was down or the answer does not say)."""

    found: bool | None
    region: str | None = None
    """The region that served it, where the answer says."""
    error: str | None = None
    entry: str | None = None


@dataclass(frozen=True)
class LookupAnswer:
    """The read-back of a set of ids: those found (id -> sequence), those whose read failed;
    the rest were read and are not stored. ``error``: the read-back could not be made."""

    found: dict[str, int] = field(default_factory=dict)
    failed: tuple[str, ...] = ()
    error: str | None = None
    where: str = ""


@dataclass(frozen=True)
class ProcessedAnswer:
    """How many times each task was processed (absent: never); ``error``: not known."""

    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None


@runtime_checkable
class TaskQueue(Protocol):
    """A state source that can also add tasks to the federation's background workers' queue and
    say how often each was processed (the duplicates verdict's input)."""

    def enqueue(self, tid: str, client: int) -> WriteAnswer:
        """Add task *tid* now as client *client*; never raises (that is an outcome)."""

    def processed(self, ids: list[str]) -> ProcessedAnswer:
        """Times each of *ids* was processed; never raises."""


@runtime_checkable
class ReadsOwnWrites(Protocol):
    """A state source that can read one record back as a given writer client would (its own
    DNS cache, through the global entry): the stale-reads verdict's input. A source that also
    has a ``reads_back`` attribute reads only where it is true."""

    def read(self, wid: str, client: int) -> ReadAnswer:
        """Read record *wid* now as writer client *client*; never raises (that is an outcome)."""


@runtime_checkable
class StateSource(Protocol):
    """The federation's write path and read-back. Called from several threads at once."""

    def write(self, wid: str, client: int) -> WriteAnswer:
        """Write record *wid* now as writer client *client*; never raises for a federation
        that does not answer (that is an outcome)."""

    def lookup(self, ids: list[str]) -> LookupAnswer:
        """Which of *ids* the federation holds now; never raises."""

    def describe(self) -> str: ...

    def close(self) -> None: ...


def read_json_field(url: str, field: str, timeout: float) -> object:
    """The value at dotted path *field* of the JSON document at *url* (None where the path
    is not there).

    Raises:
        httpx.HTTPError, ValueError: no answer, not a 2xx, or not JSON.
    """
    with httpx.Client(timeout=timeout, trust_env=False) as client:
        r = client.get(url)
        r.raise_for_status()
        value: object = r.json()
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


class HttpState:
    """The write path over HTTP through the service's DNS name (see the module docstring)."""

    def __init__(self, *, dns_server: tuple[str, int], fqdn: str, port: int, write_path: str = "/data",
                 lookup_path: str = "/data/_lookup", timeout: float = 1.0, scheme: str = "http",
                 stated: StatedReplication | None = None, task_path: str | None = None) -> None:
        self.stated = stated
        """How the federation states it replicates (None: not stated; the RPO prediction is n/a)."""
        self.task_path = task_path.rstrip("/") if task_path else None
        """``POST <task_path>/<id>`` adds a task, ``POST <task_path>/_processed`` counts; None: no queue."""
        self.dns_server = dns_server
        self.fqdn = fqdn
        self.port = port
        self.write_path = write_path.rstrip("/")
        self.lookup_path = lookup_path
        self.timeout = timeout
        self.scheme = scheme
        self._cache: dict[int, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._http = httpx.Client(timeout=timeout, trust_env=False,
                                  limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))

    def describe(self) -> str:
        stated = f"; stated replication {self.stated.shown()}" if self.stated is not None else ""
        return (f"writes POST {self.scheme}://<{self.fqdn} via {self.dns_server[0]}:{self.dns_server[1]}>:"
                f"{self.port}{self.write_path}/<id>, read-back POST {self.lookup_path}{stated}")

    def close(self) -> None:
        self._http.close()

    def seed_cache(self, client: int, age: float) -> None:
        """Start *client* with an answer already *age* seconds old at its first resolution:
        the clients' caches expire at their own moments, not all at once."""
        with self._lock:
            self._cache[client] = ("", time.monotonic() - age)

    def resolve(self, client: int) -> str:
        """*client*'s address for the service: cached for the answer's TTL.

        Raises:
            dns.exception.DNSException, OSError: no answer.
        """
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(client)
        if cached is not None and cached[0] and now < cached[1]:
            return cached[0]
        q = dns.message.make_query(self.fqdn, dns.rdatatype.A)
        resp = dns.query.udp(q, self.dns_server[0], port=self.dns_server[1], timeout=self.timeout)
        for rrset in resp.answer:
            for rr in rrset:
                if rr.rdtype == dns.rdatatype.A:
                    addr = str(rr.address)
                    ttl = float(rrset.ttl)
                    if cached is not None and not cached[0]:  # seeded: the first answer is already aged
                        ttl = max(0.0, ttl - (now - cached[1]) % max(ttl, 1e-9))
                    with self._lock:
                        self._cache[client] = (addr, now + ttl)
                    return addr
        raise dns.exception.DNSException(f"no A record for {self.fqdn}")  # type: ignore[no-untyped-call]

    @property
    def has_tasks(self) -> bool:
        return self.task_path is not None

    def write(self, wid: str, client: int) -> WriteAnswer:
        return self._post(self.write_path, wid, client)

    def enqueue(self, tid: str, client: int) -> WriteAnswer:
        if self.task_path is None:
            return WriteAnswer("refused", error="the federation has no task queue")
        return self._post(self.task_path, tid, client)

    def processed(self, ids: list[str]) -> ProcessedAnswer:
        if self.task_path is None:
            return ProcessedAnswer(error="the federation has no task queue")
        errors: list[str] = []
        deadline = time.monotonic() + READ_BACK_PATIENCE
        for attempt in range(100):  # bounded by the deadline too
            if attempt and time.monotonic() > deadline:
                break
            try:
                addr = self.resolve(-10 - attempt % 4)
                r = self._http.post(f"{self.scheme}://{addr}:{self.port}{self.task_path}/_processed",
                                    json={"ids": ids}, timeout=max(self.timeout, 5.0))
                r.raise_for_status()
                return ProcessedAnswer(counts={str(k): int(v) for k, v in (r.json().get("processed") or {}).items()})
            except (httpx.HTTPError, dns.exception.DNSException, OSError, ValueError, TypeError,
                    AttributeError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}"[:160])
                time.sleep(0.5)
        return ProcessedAnswer(error="; ".join(errors[-3:]))

    def _post(self, path: str, wid: str, client: int) -> WriteAnswer:
        try:
            addr = self.resolve(client)
        except (dns.exception.DNSException, OSError) as exc:
            return WriteAnswer("refused", error=f"dns: {type(exc).__name__}")
        url = f"{self.scheme}://{addr}:{self.port}{path}/{wid}"
        try:
            r = self._http.post(url, content=b"{}")
        except httpx.ConnectError as exc:  # nothing was reached: nothing was stored
            return WriteAnswer("refused", error=f"connect: {type(exc).__name__}", entry=addr)
        except httpx.HTTPError as exc:  # sent, no answer: it may have been stored
            return WriteAnswer("indeterminate", error=type(exc).__name__, entry=addr)
        return _answer(r, addr)

    @property
    def reads_back(self) -> bool:
        return True

    def read(self, wid: str, client: int) -> ReadAnswer:
        """``GET <write path>/<id>`` through *client*'s address: 200 found (the region the body
        names), 404 not found, anything else or no answer: not known."""
        return self._read(f"{self.write_path}/{quote(wid, safe='')}", client, "region")

    def _read(self, path: str, client: int, region_at: str | None) -> ReadAnswer:
        try:
            addr = self.resolve(client)
        except (dns.exception.DNSException, OSError) as exc:
            return ReadAnswer(None, error=f"dns: {type(exc).__name__}")
        try:
            r = self._http.get(f"{self.scheme}://{addr}:{self.port}{path}")
        except httpx.HTTPError as exc:
            return ReadAnswer(None, error=f"GET: {type(exc).__name__}", entry=addr)
        body = _json_body(r)
        by = _path(body, region_at) if region_at else _MISSING
        region = None if by is _MISSING or by is None or isinstance(by, dict | list) else str(by)[:63]
        if r.status_code == 200:
            return ReadAnswer(True, region=region, entry=addr)
        if r.status_code == 404:
            return ReadAnswer(False, region=region, entry=addr)
        return ReadAnswer(None, region=region, error=f"HTTP {r.status_code}", entry=addr)

    def lookup(self, ids: list[str]) -> LookupAnswer:
        errors: list[str] = []
        deadline = time.monotonic() + READ_BACK_PATIENCE
        attempt = 0
        while True:  # bounded: READ_BACK_PATIENCE s, 0.5 s apart
            attempt += 1
            try:
                addr = self.resolve(-1 - attempt % 4)  # fresh resolutions, apart from the writers'
                url = f"{self.scheme}://{addr}:{self.port}{self.lookup_path}"
                found: dict[str, int] = {}
                failed: list[str] = []
                for i in range(0, len(ids), 2000):
                    r = self._http.post(url, json={"ids": ids[i:i + 2000]}, timeout=max(self.timeout, 5.0))
                    r.raise_for_status()
                    body = r.json()
                    found |= {str(k): int(v) for k, v in (body.get("found") or {}).items()}
                    failed += [str(x) for x in body.get("failed") or []]
            except (httpx.HTTPError, dns.exception.DNSException, OSError, ValueError, TypeError,
                    AttributeError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}"[:160])
                if time.monotonic() > deadline:
                    return LookupAnswer(error=f"{attempt} attempts in {READ_BACK_PATIENCE:g} s: " + "; ".join(
                        errors[-3:]))
                time.sleep(0.5)
                continue
            return LookupAnswer(found=found, failed=tuple(failed), where=addr)


def _answer(r: httpx.Response, addr: str) -> WriteAnswer:
    """An HTTP answer to a write: 2xx acknowledged (with the region and sequence it names);
    503 or another 4xx refused (the app's 503 says nothing was stored, a gateway's 503 that no
    instance took it); anything else (502, 504, other 5xx) indeterminate: a gateway may have
    given up on an upstream that stored it."""
    try:
        body = r.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    error = str(body.get("error") or f"HTTP {r.status_code}")[:160]
    if 200 <= r.status_code < 300:
        seq, epoch = body.get("seq"), body.get("epoch")
        return WriteAnswer("ack", region=str(body["region"]) if body.get("region") else None,
                           seq=int(seq) if isinstance(seq, int) else None, entry=addr,
                           epoch=epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None)
    if r.status_code == 503 or 400 <= r.status_code < 500:
        return WriteAnswer("refused", error=f"HTTP {r.status_code}: {error}", entry=addr)
    return WriteAnswer("indeterminate", error=f"HTTP {r.status_code}: {error}", entry=addr)


# -- a federation gameday did not build: the profile's ``state:`` (kind ``http``) ------------------
ID_PLACEHOLDER = "{id}"
"""Where a write's id goes in a path template (``/data/{id}``)."""


class HttpJsonState(HttpState):
    """The write path as a federation's profile describes it (its ``state:``, kind ``http``).

    A write is ``METHOD <scheme>://<address DNS answered>:<port><path>`` with the id in the
    path (``/data/{id}``), the service's ``Host`` header and the JSON body ``{"id": ...}``;
    a 2xx answer acknowledges it, and names the acknowledging region or node and the
    epoch/sequence at dotted field paths (*acked_by*, *seq*; None: the answer does not say).
    503 or another 4xx is refused (nothing stored), a connection never made too; no answer in
    time, a 502, 504 or other 5xx is indeterminate (it may have been stored).

    The read-back goes through the global entry as the writes do, on fresh resolutions:
    either ``GET <get path>`` per id, at most *concurrency* at once (200: stored, 404: not
    stored, anything else: not read, and tried again 0.5 s later for up to *read_patience*
    seconds in all), or ``POST <lookup path>`` as :class:`HttpState`'s (``{"ids": [...]}`` ->
    ``{"found": ..., "failed": ...}``).
    """

    def __init__(self, *, dns_server: tuple[str, int], fqdn: str, port: int, scheme: str = "http",
                 host: str | None = None, timeout: float = 1.0, method: str = "POST",
                 write_path: str = "/data/{id}", acked_by: str | None = "region", seq: str | None = "seq",
                 get_path: str | None = "/data/{id}", lookup_path: str | None = None,
                 concurrency: int = 8, stated: StatedReplication | None = None,
                 read_patience: float = READ_BACK_PATIENCE) -> None:
        if (get_path is None) == (lookup_path is None):
            raise ValueError("give exactly one of get_path or lookup_path (the read-back)")
        super().__init__(dns_server=dns_server, fqdn=fqdn, port=port, write_path=write_path,
                         lookup_path=lookup_path or "", timeout=timeout, scheme=scheme, stated=stated)
        self.method = method
        self.write_template = write_path
        self.get_template = get_path
        self.acked_by = acked_by
        self.seq = seq
        self.concurrency = max(1, concurrency)
        self.read_patience = read_patience
        if host:  # every request, the lookup's too, as the service's clients send it
            self._http.headers["Host"] = host

    def describe(self) -> str:
        entry = f"{self.scheme}://<{self.fqdn} via {self.dns_server[0]}:{self.dns_server[1]}>:{self.port}"
        read = (f"GET {self.get_template} per id ({self.concurrency} at once)" if self.get_template is not None
                else f"POST {self.lookup_path}")
        stated = f"; stated replication {self.stated.shown()}" if self.stated is not None else ""
        return f"writes {self.method} {entry}{self.write_template}, read-back {read}{stated}"

    @property
    def reads_back(self) -> bool:
        return self.get_template is not None

    def read(self, wid: str, client: int) -> ReadAnswer:
        if self.get_template is None:
            return ReadAnswer(None, error="no per-id read (the profile's state read_back gives a lookup, not a get)")
        return self._read(self.get_template.replace(ID_PLACEHOLDER, quote(wid, safe="")), client, self.acked_by)

    def _url(self, addr: str, template: str, wid: str) -> str:
        return f"{self.scheme}://{addr}:{self.port}{template.replace(ID_PLACEHOLDER, quote(wid, safe=''))}"

    def write(self, wid: str, client: int) -> WriteAnswer:
        try:
            addr = self.resolve(client)
        except (dns.exception.DNSException, OSError) as exc:
            return WriteAnswer("refused", error=f"dns: {type(exc).__name__}")
        try:
            r = self._http.request(self.method, self._url(addr, self.write_template, wid), json={"id": wid})
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # never sent: nothing was stored
            return WriteAnswer("refused", error=f"connect: {type(exc).__name__}", entry=addr)
        except httpx.HTTPError as exc:  # sent, no answer: it may have been stored
            return WriteAnswer("indeterminate", error=type(exc).__name__, entry=addr)
        return _answer_at(r, addr, self.acked_by, self.seq)

    def lookup(self, ids: list[str]) -> LookupAnswer:
        if self.get_template is None:
            return super().lookup(ids)
        found: dict[str, int] = {}
        pending = list(dict.fromkeys(ids))
        errors: list[str] = []
        where: list[str] = []
        deadline = time.monotonic() + self.read_patience
        for attempt in range(1000):  # bounded by the patience: 0.5 s apart
            if not pending or (attempt and time.monotonic() > deadline):
                break
            if attempt:
                time.sleep(0.5)
            try:
                addr = self.resolve(-1 - attempt % 4)  # fresh resolutions, apart from the writers'
            except (dns.exception.DNSException, OSError) as exc:
                error = f"dns: {type(exc).__name__}: {exc}"[:160]
                if error not in errors and len(errors) < 5:
                    errors.append(error)
                continue
            where.append(addr)
            with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="gameday-readback") as pool:
                answers = list(pool.map(partial(self._get, addr), pending))
            still: list[str] = []
            for wid, (stored, seq, error) in zip(pending, answers, strict=True):
                if stored is None:
                    still.append(wid)
                    if error not in errors and len(errors) < 5:
                        errors.append(error)
                elif stored:
                    found[wid] = seq
            pending = still
        if not where:
            return LookupAnswer(error="; ".join(errors) or "no read-back")
        if pending and len(pending) == len(set(ids)):
            return LookupAnswer(error=f"no id could be read back in {self.read_patience:g} s ({'; '.join(errors)})")
        return LookupAnswer(found=found, failed=tuple(pending), where=", ".join(dict.fromkeys(where)))

    def _get(self, addr: str, wid: str) -> tuple[bool | None, int, str]:
        """``(stored, seq, error)`` of one id: stored None when it could not be read."""
        url = self._url(addr, self.get_template or "", wid)
        try:
            r = self._http.get(url, timeout=max(self.timeout, 2.0))
        except httpx.HTTPError as exc:
            return None, 0, f"GET {url}: {type(exc).__name__}"
        if r.status_code == 404:
            return False, 0, ""
        if r.status_code != 200:
            return None, 0, f"GET {url}: HTTP {r.status_code}"
        seq = _seq_at(_json_body(r), self.seq)
        return True, seq if seq is not None else 0, ""


def _json_body(r: httpx.Response) -> dict[str, object]:
    try:
        body = r.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _seq_at(body: dict[str, object], path: str | None) -> int | None:
    """The whole number at *path* (an integer, or a string or float holding one), else None."""
    value = _path(body, path) if path else _MISSING
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return _as_int(value, "seq")
    except (TypeError, ValueError):
        return None


def _answer_at(r: httpx.Response, addr: str, acked_by: str | None, seq: str | None) -> WriteAnswer:
    """An HTTP answer to a write, as :func:`_answer` judges it, with the acknowledging region or
    node and the sequence read at dotted field paths."""
    body = _json_body(r)
    if 200 <= r.status_code < 300:
        by = _path(body, acked_by) if acked_by else _MISSING
        region = None if by is _MISSING or by is None or isinstance(by, dict | list) else str(by)[:63]
        return WriteAnswer("ack", region=region, seq=_seq_at(body, seq), entry=addr)
    error = str(body.get("error") or f"HTTP {r.status_code}")[:160]
    if r.status_code == 503 or 400 <= r.status_code < 500:
        return WriteAnswer("refused", error=f"HTTP {r.status_code}: {error}", entry=addr)
    return WriteAnswer("indeterminate", error=f"HTTP {r.status_code}: {error}", entry=addr)
