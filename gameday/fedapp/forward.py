"""Forwarding requests upstream: the pooled client shared by gateways and local proxies.

An entry node (gateway or proxy) turns a request into an ordered list of
:class:`Target` s and calls :meth:`Forwarder.forward`, which tries at most two of them
within the request budget (R7): the first attempt gets a deadline that leaves room for
the one retry, and only a *failure* is retried (no response, a timeout, 502, 504, or a
503 without ``Retry-After``). An overload answer (503 with ``Retry-After``) belongs to
the client and is passed through, as is every other response.

A target that is another region's gateway gets ``X-Gameday-Hop: 1`` so that gateway
serves only locally (no second hop).

Also here: :func:`follow`, which connects an entry node's :class:`Follower` to NATS in
the background so that a down bus never delays the HTTP server (R1), and
:func:`serve_entry_node`, the start/run/clean-up skeleton both entry nodes share.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from gameday.fedapp.common import Histogram, JsonLog, connect_nats, every, json_response
from gameday.fedapp.follower import Follower
from gameday.fedapp.skeleton import HttpComponent, start_http
from gameday.fedapp.spec import Endpoint, FederationSpec, RegionSpec
from gameday.fedapp.wire import HOP, ROUTE_VERSION, SERVED_BY, Json

FIRST_SHARE = 0.6
"""Share of the request budget the first attempt may use when a retry is possible."""

_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE", "Trailer",
        "Transfer-Encoding", "Upgrade", "Host", "Content-Length",
    )
)


def _margin(budget: float) -> float:
    """Time kept back from the budget for writing our own response."""
    return min(0.02, budget * 0.05)


@dataclass(frozen=True)
class Target:
    """Where one attempt goes: an app instance directly, or a region's gateway (one hop)."""

    region: str
    instance: str | None
    """Instance name, or None for the region's gateway."""
    url: str
    """Base URL, e.g. ``http://127.0.0.11:4711``."""

    @property
    def via_gateway(self) -> bool:
        return self.instance is None

    @property
    def label(self) -> str:
        return f"{self.region}/{self.instance or 'gateway'}"


@dataclass
class Outcome:
    """The result of one attempt."""

    target: Target
    elapsed: float
    """Seconds the attempt took."""
    status: int | None = None
    """HTTP status, or None when no response arrived."""
    error: str | None = None
    """``connect`` (refused/reset/disconnected: nothing served) or ``timeout``; None on a response."""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    retry_after: bool = False

    @property
    def failed(self) -> bool:
        """True if this attempt is a failure worth one retry elsewhere."""
        if self.status is None:
            return True
        if self.status in (502, 504):
            return True
        return self.status == 503 and not self.retry_after

    def describe(self) -> dict[str, Any]:
        return {"target": self.target.label, "status": self.status, "error": self.error,
                "elapsed_ms": round(self.elapsed * 1000, 2)}


def gateway_target(region: RegionSpec) -> Target:
    return Target(region=region.name, instance=None, url=region.gateway.url)


def by_distance(spec: FederationSpec, home: RegionSpec, names: Iterable[str]) -> list[RegionSpec]:
    """The regions named by *names* ordered nearest-first: |index difference|, ties by name."""
    regions = [spec.region(n) for n in names]
    return sorted(regions, key=lambda r: (abs(r.index - home.index), r.name))


class Forwarder:
    """A keep-alive connection pool to upstreams and the try-at-most-twice logic."""

    def __init__(self, *, log: JsonLog, limit_per_host: int = 256) -> None:
        self.log = log
        self.limit_per_host = limit_per_host
        self.latency = Histogram()
        """Seconds per upstream attempt (responses and failures alike)."""
        self.attempts_total = 0
        self.retries_total = 0
        self.failures_total: dict[str, int] = {"connect": 0, "timeout": 0, "status": 0}
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(
            limit=0, limit_per_host=self.limit_per_host, keepalive_timeout=30, ttl_dns_cache=None,
        )
        # No decompression: bodies pass through byte for byte with their Content-Encoding.
        self._session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("Forwarder.start() was not called")
        return self._session

    async def probe(self, url: str, timeout: float) -> bool:
        """GET *url*; True iff it answered 2xx within *timeout* seconds."""
        try:
            async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                await resp.read()
                return 200 <= resp.status < 300
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def send(self, target: Target, *, method: str, path_qs: str, headers: Mapping[str, str],
                   body: bytes, timeout: float) -> Outcome:
        """One attempt: *method* *path_qs* at *target* with *timeout* seconds for everything."""
        out_headers = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
        if target.via_gateway:
            out_headers[HOP] = "1"
        t0 = time.monotonic()
        self.attempts_total += 1
        try:
            async with self.session.request(
                method, target.url + path_qs, headers=out_headers, data=body or None,
                timeout=aiohttp.ClientTimeout(total=max(timeout, 0.001)), allow_redirects=False,
            ) as resp:
                data = await resp.read()
                hdrs = [(k, v) for k, v in resp.headers.items() if k.lower() not in _HOP_BY_HOP]
                out = Outcome(target=target, elapsed=time.monotonic() - t0, status=resp.status,
                              headers=hdrs, body=data, retry_after="Retry-After" in resp.headers)
        except TimeoutError:
            out = Outcome(target=target, elapsed=time.monotonic() - t0, error="timeout")
        except aiohttp.ClientError:
            # Refused, reset, disconnected, bad payload: the upstream did not serve this.
            out = Outcome(target=target, elapsed=time.monotonic() - t0, error="connect")
        self.latency.observe(out.elapsed)
        if out.failed:
            self.failures_total[out.error or "status"] += 1
        return out

    async def forward(
        self,
        candidates: list[Target],
        request: web.Request,
        path_qs: str,
        budget: float,
        on_failure: Callable[[Outcome], None] | None = None,
    ) -> tuple[Outcome | None, list[Outcome]]:
        """Try the first candidate, and on a failure the second, within *budget* seconds.

        Args:
            candidates: targets in preference order; only the first two are used.
            request: the incoming request (method, headers and body are forwarded).
            path_qs: path and query string to request upstream.
            budget: seconds for the whole exchange, retry included.
            on_failure: called with every failed attempt (e.g. passive ejection).

        Returns:
            ``(served, attempts)``: *served* is the outcome to pass to the client, or
            None if every attempt failed (or there was no candidate).
        """
        t0 = time.monotonic()
        end = t0 + budget - _margin(budget)
        body = await request.read() if request.body_exists else b""
        tries = candidates[:2]
        attempts: list[Outcome] = []
        for n, target in enumerate(tries):
            left = end - time.monotonic()
            if left <= 0:
                break
            timeout = min(left, budget * FIRST_SHARE) if n == 0 and len(tries) > 1 else left
            if n > 0:
                self.retries_total += 1
            out = await self.send(target, method=request.method, path_qs=path_qs, headers=request.headers,
                                  body=body, timeout=timeout)
            attempts.append(out)
            if not out.failed:
                return out, attempts
            if on_failure is not None:
                on_failure(out)
        return None, attempts


def regional_follower(spec: FederationSpec, region: RegionSpec, node: str, log: JsonLog,
                      on_change: Callable[[], None] | None = None) -> Follower | None:
    """The follower of *region*'s regional snapshot in the regional layout (R14), else None."""
    if not spec.regional:
        return None
    return Follower(run_id=spec.run_id, node=node, regions=[r.name for r in spec.regions],
                    stale_after=spec.topology.timing.stale_after, log=log, on_change=on_change,
                    region=region.name)


def scope_status(follower: Follower, regional: Follower | None, decisions: dict[str, str]) -> dict[str, Any]:
    """The ``/status`` fields saying which snapshots an entry node follows and which one
    each of its routing decisions uses (*decisions*: decision -> ``global``, ``regional``, ...)."""
    return {
        "snapshot_scope": "regional" if regional is not None else "global",
        "versions": {"global": follower.replica.version,
                     "regional": regional.replica.version if regional is not None else None},
        "decisions": decisions,
        "regional_snapshot": regional.status() if regional is not None else None,
    }


def relay(out: Outcome, route_version: int) -> web.Response:
    """The client response for a served outcome, with the route-version header set."""
    resp = web.Response(status=out.status or 502, body=out.body)
    for k, v in out.headers:
        resp.headers.add(k, v)
    if SERVED_BY not in resp.headers and out.target.instance is not None:
        resp.headers[SERVED_BY] = f"{out.target.region}/{out.target.instance}"
    resp.headers[ROUTE_VERSION] = str(route_version)
    return resp


def failure(status: int, error: str, route_version: int, attempts: list[Outcome],
            **extra: Any) -> web.Response:
    """A JSON error response listing the attempts made."""
    return json_response({"error": error, "attempts": [a.describe() for a in attempts], **extra},
                         status=status, headers={ROUTE_VERSION: str(route_version)})


async def follow(spec: FederationSpec, follower: Follower | list[Follower], log: JsonLog,
                 stop: asyncio.Event) -> None:
    """Connect to NATS (retrying forever) and keep *follower* (one, or several sharing the
    connection: the global and the regional snapshot) current until *stop*.

    Runs as a background task: the entry node serves from its last snapshot meanwhile (R1).
    While the first connection is pending the stale detector runs too: a node that has
    never heard a broadcast for ``stale_after`` raises the alarm like any other (R6).
    """
    followers = follower if isinstance(follower, list) else [follower]

    async def _check() -> None:
        for f in followers:
            f.check_stale()

    period = max(0.05, min(0.5, followers[0].stale_after / 10))
    watchdog = asyncio.create_task(every(period, _check, stop))
    try:
        nc = await connect_nats(spec.nats_url, followers[0].node, log)
    finally:
        watchdog.cancel()
        await asyncio.gather(watchdog, return_exceptions=True)
    try:
        await asyncio.gather(*(f.run(nc, stop) for f in followers))
    finally:
        with contextlib.suppress(Exception):  # best effort: the bus may already be gone
            await asyncio.wait_for(nc.close(), timeout=2)


async def run_until_stopped(stop: asyncio.Event, *tasks: asyncio.Task[Any]) -> None:
    """Wait for *stop*, then cancel *tasks* and wait for them to finish."""
    await stop.wait()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class EntryNode(HttpComponent):
    """What :func:`serve_entry_node` needs of a gateway or a local proxy: the HTTP skeleton,
    its snapshot followers and its forwarder."""

    follower: Follower
    regional: Follower | None
    """The regional snapshot's follower in the regional layout (R14), else None."""
    forwarder: Forwarder

    def follower_samples(self, labels: str) -> list[tuple[str, str, float]]:
        """The followers' metric samples (the regional one's with ``scope="regional"``)."""
        node = f'node="{self.follower.node}",{labels}'
        regional = self.regional.metric_samples(f'{node},scope="regional"') if self.regional is not None else []
        return [*self.follower.metric_samples(node), *regional]

    def configure_followers(self, body: Json) -> None:
        """Pass an admin fault body's follower hooks to both followers (cut off from
        broadcasts means from both)."""
        self.follower.configure(body)
        if self.regional is not None:
            self.regional.configure(body)


async def serve_entry_node(
    spec: FederationSpec,
    node: EntryNode,
    endpoint: Endpoint,
    log: JsonLog,
    stop: asyncio.Event,
    *,
    background: Iterable[Callable[[], Coroutine[Any, Any, None]]] = (),
    admin: Endpoint | None = None,
    **started: Any,
) -> None:
    """Serve *node* on *endpoint* until *stop* is set, then clean up.

    Starts the forwarder's pool and the HTTP server, logs ``started`` (with
    ``endpoint=`` and the *started* fields), runs :func:`follow` and each of
    *background* as tasks until *stop*, then cancels them, closes the server and the
    pool, and logs ``stopped``.

    Args:
        background: coroutine functions for further loops (e.g. readiness probes),
            started after the HTTP server is up.
        admin: the node's own admin listener (:attr:`FederationSpec.admin`), if any.
    """
    await node.forwarder.start()
    runner = await start_http(node, endpoint.host, endpoint.port, log, admin)
    log("started", endpoint=endpoint.url, **started)
    followers = [node.follower] + ([node.regional] if node.regional is not None else [])
    tasks = [asyncio.create_task(follow(spec, followers, log, stop))]
    tasks += [asyncio.create_task(fn()) for fn in background]
    try:
        await run_until_stopped(stop, *tasks)
    finally:
        await runner.cleanup()
        await node.forwarder.close()
        log("stopped")
