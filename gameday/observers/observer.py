"""Observers: watch a federation at 10 Hz or faster and record it on the timeline.

Each tick, concurrently: sample the GSLB's answers (dnspython, UDP), read every entry
node's ``/status`` and the control plane's ``/status`` (httpx), and - at a lower rate -
the apps' utilisation. Where the target allows, the control plane's version broadcast
is subscribed to as well (NATS). Alarm lines from the entry nodes' logs and the load
generator's request records are collected every tick, and so is every process's
liveness (the target's, where it has the capability, and the load generator's),
recorded on the timeline when it changes. Every observation is stamped with
``time.monotonic()`` when its answer arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import dns.asyncquery
import dns.exception
import dns.message
import dns.rdatatype
import httpx

from gameday.errors import GamedayError
from gameday.targets.base import ComponentState, Endpoints, RegionInfo
from gameday.timeline import AlarmObs, ComponentObs, CpObs, DnsObs, NodeObs, RequestRec, Timeline, UtilObs

log = logging.getLogger(__name__)

ALARM_EVENTS = ("stale_snapshot", "stale_snapshot_cleared")


class Observer:
    """A background thread recording the federation onto a :class:`Timeline`."""

    def __init__(
        self,
        endpoints: Endpoints,
        regions: list[RegionInfo],
        timeline: Timeline,
        *,
        interval: float = 0.1,
        dns_samples: int = 16,
        util_every: int = 5,
        alarm_source: Callable[[], Iterator[tuple[str, str]]] | None = None,
        request_source: Callable[[], list[RequestRec]] | None = None,
        on_tick: Callable[[float], None] | None = None,
        liveness: list[Callable[[], list[ComponentState]]] | None = None,
    ) -> None:
        """
        Args:
            interval: seconds between ticks (<= 0.1 keeps the DESIGN.md resolution).
            dns_samples: GSLB queries per tick; answers are weighted-random single
                addresses, so several samples are needed to see a 20 % region.
            util_every: read utilisation every this many ticks.
            alarm_source: yields new ``(node, log line)`` pairs (the target's logs).
            request_source: returns new load-generator request records.
            on_tick: called in the observer thread after every tick with its time.
            liveness: each returns every process it knows, alive or not (the target's
                liveness capability, the load generator's processes); read every tick.
        """
        if interval > 0.1:
            raise ValueError(f"observer interval {interval} s is slower than the 10 Hz DESIGN.md requires")
        self.ep = endpoints
        self.addr_region = {r.gateway_address: r.name for r in regions}
        self.capacity = {r.name: r.capacity for r in regions}
        self.tl = timeline
        self.interval = interval
        self.dns_samples = dns_samples
        self.util_every = util_every
        self.alarm_source = alarm_source
        self.request_source = request_source
        self.on_tick = on_tick
        self.liveness = liveness or []
        self._alive: dict[str, bool] = {}
        self._last_alive: dict[str, float] = {}
        self._liveness_failed: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ticks = 0
        self.error: BaseException | None = None
        self._inflight: dict[tuple[str, str], asyncio.Task[None]] = {}

    # -- thread -----------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gameday-observer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._collect_logs_and_requests()  # whatever arrived after the last tick

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception as exc:
            self.error = exc
            log.exception("observer stopped")

    async def _main(self) -> None:
        # Subscribing (importing nats-py, connecting) must not delay the first polls.
        sub = asyncio.create_task(self._subscribe())
        async with httpx.AsyncClient(timeout=max(0.5, self.interval * 5), trust_env=False) as http:
            next_tick = time.monotonic()
            while not self._stop.is_set():
                await self._tick(http)
                self.ticks += 1
                if self.on_tick is not None:
                    self.on_tick(time.monotonic())
                next_tick += self.interval
                delay = next_tick - time.monotonic()
                if delay < 0:  # fell behind: do not burst to catch up
                    next_tick = time.monotonic()
                    delay = 0
                await asyncio.sleep(delay)
        for task in self._inflight.values():
            task.cancel()
        await asyncio.gather(*self._inflight.values(), return_exceptions=True)
        nc = await sub
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()  # type: ignore[attr-defined]

    async def _subscribe(self) -> object | None:
        """Subscribe to the version broadcast when the target exposes NATS; else rely on polling."""
        if not self.ep.nats_url or not self.ep.broadcast_subject:
            return None
        import nats  # noqa: PLC0415  (only targets with a reachable bus need it)

        async def _on(msg: object) -> None:
            try:
                v = int(json.loads(msg.data)["version"])  # type: ignore[attr-defined]
            except (ValueError, KeyError, TypeError):
                return
            self.tl.add(CpObs(time.monotonic(), v, "broadcast"))

        try:
            nc = await nats.connect(self.ep.nats_url, connect_timeout=1, max_reconnect_attempts=-1,
                                    reconnect_time_wait=0.2, allow_reconnect=True)
        except Exception as exc:  # noqa: BLE001  (the bus may be down: polling still works)
            log.warning("broadcast subscription unavailable (%s); polling only", exc)
            return None
        await nc.subscribe(self.ep.broadcast_subject, cb=_on)
        return nc

    # -- one tick --------------------------------------------------------------------------
    async def _tick(self, http: httpx.AsyncClient) -> None:
        # Node and utilisation polls run on their own: a frozen region's hanging /status must
        # not slow the tick (and so the resolution) for every other node. A poll still in
        # flight is not doubled; its answer is stamped when it arrives.
        for n, u in self.ep.entry_nodes.items():
            self._spawn(("node", n), self._node(http, n, u))
        if self.ticks % self.util_every == 0:
            for r, urls in self.ep.utilisation.items():
                self._spawn(("util", r), self._util(http, r, urls))
        for i, source in enumerate(self.liveness):
            self._spawn(("liveness", str(i)), self._live(i, source))
        await asyncio.gather(self._dns(), self._cp(http))
        self._collect_logs_and_requests()

    def _spawn(self, key: tuple[str, str], coro: Coroutine[Any, Any, None]) -> None:
        task = self._inflight.get(key)
        if task is not None and not task.done():
            coro.close()
            return
        self._inflight[key] = asyncio.create_task(coro)

    def _collect_logs_and_requests(self) -> None:
        if self.alarm_source is not None:
            for node, line in self.alarm_source():
                if '"stale_snapshot' not in line:
                    continue
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                if d.get("event") in ALARM_EVENTS:
                    self.tl.add(AlarmObs(float(d.get("mono", time.monotonic())), node, d["event"],
                                         str(d.get("reason", ""))))
        if self.request_source is not None:
            recs = self.request_source()
            if recs:
                self.tl.extend_requests(recs)

    async def _live(self, index: int, source: Callable[[], list[ComponentState]]) -> None:
        # In a worker thread: a cluster target's liveness is an API call that may be slow;
        # local reads /proc and returns in about a millisecond.
        # Stamped when the read began: the state is true somewhere in [begun, returned], and a
        # read begun before a revert restarted a component must not look like a death after it
        # (a busy machine can hold the worker thread back for a while).
        begun = time.monotonic()
        try:
            states = await asyncio.to_thread(source)
        except (GamedayError, OSError) as exc:
            if index not in self._liveness_failed:  # once: a flapping API must not flood the log
                self._liveness_failed.add(index)
                log.warning("liveness source %d failed (%r); its components are not watched until it answers",
                            index, exc)
            return
        self._liveness_failed.discard(index)
        for s in states:
            if self._alive.get(s.name) != s.alive:
                self.tl.add(ComponentObs(begun, s.name, s.alive, s.pid, s.role, s.detail,
                                         last_alive=self._last_alive.get(s.name)))
                self._alive[s.name] = s.alive
            if s.alive:
                self._last_alive[s.name] = begun

    async def _dns(self) -> None:
        host, port = self.ep.dns_server
        q = dns.message.make_query(self.ep.fqdn, dns.rdatatype.A)

        async def one() -> tuple[list[str], int | None]:
            resp = await dns.asyncquery.udp(q, host, port=port, timeout=0.5)
            addrs, ttl = [], None
            for rrset in resp.answer:
                ttl = rrset.ttl
                addrs += [rr.address for rr in rrset if rr.rdtype == dns.rdatatype.A]
            return addrs, ttl

        results = await asyncio.gather(*[one() for _ in range(self.dns_samples)], return_exceptions=True)
        now = time.monotonic()
        answers: list[str] = []
        ttl = None
        ok = False
        for res in results:
            if isinstance(res, BaseException):
                continue
            ok = True
            addrs, ttl = res
            answers += [self.addr_region.get(a, a) for a in addrs]
        self.tl.add(DnsObs(now, ok, tuple(sorted(set(answers))), ttl, tuple(answers)))

    async def _node(self, http: httpx.AsyncClient, node: str, url: str) -> None:
        sent = time.monotonic()
        try:
            r = await http.get(url)
            d = r.json()
            self.tl.add(NodeObs(time.monotonic(), node, True, int(d["version"]),
                                tuple(d.get("routable_regions", ())), bool(d.get("stale", False)), sent))
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            self.tl.add(NodeObs(time.monotonic(), node, False, sent=sent))

    async def _cp(self, http: httpx.AsyncClient) -> None:
        if self.ep.control_plane is None:
            return  # no control-plane source: the version verdict has no input
        try:
            r = await http.get(self.ep.control_plane)
            self.tl.add(CpObs(time.monotonic(), int(r.json()["version"]), "poll"))
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            self.tl.add(CpObs(time.monotonic(), None, "poll"))

    async def _util(self, http: httpx.AsyncClient, region: str, urls: list[str]) -> None:
        async def one(url: str) -> tuple[float, float, int]:
            d = (await http.get(url)).json()
            cap = float(d.get("capacity_rps", 0.0))
            return float(d.get("utilisation", 0.0)) * cap, cap, int(d.get("rejected_total", 0))

        results = await asyncio.gather(*[one(u) for u in urls], return_exceptions=True)
        load = cap = 0.0
        rejected = 0
        for res in results:
            if isinstance(res, BaseException):
                continue
            used, c, rej = res
            load, cap, rejected = load + used, cap + c, rejected + rej
        if cap > 0:
            self.tl.add(UtilObs(time.monotonic(), region, load / cap, rejected))
