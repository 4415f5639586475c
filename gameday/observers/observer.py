"""Observers: watch a federation at 10 Hz or faster and record it on the timeline.

What is watched is a :class:`~gameday.observers.sources.Sources` bundle, as the target
describes its federation: every tick, each entry node's source, the DNS source and the
control plane's version source are read (each in its own task: a hanging source delays
only itself), the utilisation sources at a lower rate, and the alarm sources, the load
generator's request records and every process's liveness (the target's, where it has the
capability, and the load generator's). Where the sources include the control plane's
version feed (push), it is listened to as well. Every observation is stamped with
``time.monotonic()`` when its answer arrived; each source's achieved poll rate is kept
(:meth:`Observer.poll_rates`) so a figure whose source fell behind says so.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Coroutine, Mapping
from itertools import pairwise
from typing import Any

import aiohttp

from gameday.errors import GamedayError
from gameday.model.parts import ComponentState, RegionInfo
from gameday.model.timeline import (
    AlarmObs,
    ComponentObs,
    CpObs,
    DataCheck,
    DnsObs,
    NodeObs,
    PollRate,
    RegionalCpObs,
    RequestRec,
    Timeline,
    UtilObs,
)
from gameday.observers.sources import (
    AlarmSource,
    Closeable,
    EntryNodeSource,
    Sources,
    UtilisationSource,
)
from gameday.observers.writes import Writer
from gameday.verdicts.harness import CHECK_TIMEOUTS, OBSERVER

log = logging.getLogger(__name__)


class _Counter:
    """Per-source counts, touched only from the observer's event loop. Each completed read's
    time and whether it was answered are kept (8 + 1 bytes a read: an hour of 60 sources at
    10 Hz is 19 MB), so the rate over any window (the fault's) can be told afterwards."""

    __slots__ = ("answered", "description", "last", "last_error", "max_gap", "nominal", "oks", "polls", "skipped",
                 "times")

    def __init__(self, description: str, nominal: float) -> None:
        self.description = description
        self.nominal = nominal
        self.polls = self.answered = self.skipped = 0
        self.last: float | None = None
        self.max_gap = 0.0
        self.last_error: str | None = None
        self.times = array("d")
        self.oks = bytearray()

    def done(self, t: float, ok: bool, error: str | None = None) -> None:
        self.polls += 1
        self.answered += ok
        if self.last is not None:
            self.max_gap = max(self.max_gap, t - self.last)
        self.last = t
        self.last_error = error
        self.times.append(t)
        self.oks.append(ok)

    def rate(self, key: str, lo: float, hi: float) -> PollRate:
        """This source's rate over [*lo*, *hi*]: the reads completed in it, and the longest gap
        counted from *lo* to the first read and from the last read to *hi* as well."""
        i, j = bisect_left(self.times, lo), bisect_right(self.times, hi)
        times = self.times[i:j]
        span = max(hi - lo, 1e-9)
        edges = [lo, *times, hi]
        gap = max(b - a for a, b in pairwise(edges))
        answered = sum(self.oks[i:j])
        return PollRate(key, self.description, self.nominal, len(times) / span, len(times), answered,
                        0, gap, self.last_error, answered_hz=answered / span, span_s=hi - lo)


class Observer:
    """A background thread recording the federation onto a :class:`Timeline`."""

    def __init__(
        self,
        sources: Sources,
        regions: list[RegionInfo],
        timeline: Timeline,
        *,
        interval: float = 0.1,
        util_every: int = 5,
        request_source: Callable[[], list[RequestRec]] | None = None,
        on_tick: Callable[[float], None] | None = None,
        liveness: list[Callable[[], list[ComponentState]]] | None = None,
    ) -> None:
        """
        Args:
            sources: what to read (the target's :meth:`~gameday.interfaces.Target.sources`).
            regions: the regions (the DNS source's addresses are mapped to them).
            interval: seconds between ticks (<= 0.1 keeps the DESIGN.md resolution).
            util_every: read utilisation every this many ticks.
            request_source: returns new load-generator request records.
            on_tick: called in the observer thread after every tick with its time.
            liveness: each returns every process it knows, alive or not (the target's
                liveness capability, the load generator's processes); read every tick.
        """
        if interval > 0.1:
            raise ValueError(f"observer interval {interval} s is slower than the 10 Hz DESIGN.md requires")
        self.sources = sources
        self.addr_region = {r.gateway_address: r.name for r in regions}
        self.tl = timeline
        self.interval = interval
        self.util_every = util_every
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
        hz = 1.0 / interval
        # The observer's own loop first: its rate is the harness's (gameday.verdicts.harness).
        self._counts: dict[str, _Counter] = {OBSERVER: _Counter("the observer's loop (this process)", hz)}
        self._counts |= {n.name: _Counter(n.describe(), hz) for n in sources.entry_nodes}
        self._counts["dns"] = _Counter(sources.dns.describe(), hz)
        if sources.control_plane is not None:
            self._counts["control_plane"] = _Counter(sources.control_plane.describe(), hz)
        for r, srcs in sources.utilisation.items():
            self._counts[f"utilisation {r}"] = _Counter("; ".join(u.describe() for u in srcs), hz / util_every)
        for r, src in sources.regional_control_planes.items():
            self._counts[f"regional control plane {r}"] = _Counter(src.describe(), hz / util_every)
        if sources.check_timeouts is not None:
            self._counts[CHECK_TIMEOUTS] = _Counter(sources.check_timeouts.describe(), hz / util_every)
        self._check_timeouts: list[tuple[float, Mapping[str, int]]] = []
        self._alarm_keys = [f"alarms {a.describe()}" for a in sources.alarms]
        for key in self._alarm_keys:
            self._counts[key] = _Counter(key.removeprefix("alarms "), hz)
        self._alarm_lock = threading.Lock()  # stop() reads the alarms once more from the test thread
        self._started: float | None = None
        self._stopped: float | None = None
        self.writer: Writer | None = (
            Writer(sources.state, timeline, sources.write_rate, clients=sources.writers,
                   ttl_hint=sources.write_ttl_hint, task_rate=sources.task_rate)
            if sources.state is not None else None)
        """The drill's writer (a federation with a state layer), started and stopped with the observer."""

    # -- thread -----------------------------------------------------------------------
    def start(self) -> None:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="gameday-observer", daemon=True)
        self._thread.start()
        if self.writer is not None:
            self.writer.start()

    def verify_writes(self) -> DataCheck | None:
        """Read the drill's writes back now (:meth:`Writer.verify`); None without a writer."""
        return self.writer.verify() if self.writer is not None else None

    def stop(self) -> None:
        self._stop.set()
        if self.writer is not None:
            self.writer.stop()
        if self._thread is not None:
            self._thread.join(10)
        self._collect_alarms_and_requests()  # whatever arrived after the last tick
        self._stopped = self._stopped or time.monotonic()
        for a in self.sources.alarms:
            if isinstance(a, Closeable):
                a.close()
        if self.sources.state is not None:
            self.sources.state.close()

    def poll_rates(self, since: float | None = None) -> dict[str, PollRate]:
        """Each source's achieved rate so far (over the whole run once stopped), or over the
        window from *since* (a monotonic time: the fault's) to the stop or now, where the
        longest gap includes the stretches before the first and after the last read.

        Read from another thread while the observer runs: the counts are plain integers and
        arrays only appended to, so a snapshot may be one poll behind, never inconsistent in a
        way that matters.
        """
        if self._started is None:
            return {}
        end = self._stopped or time.monotonic()
        if since is not None:
            lo = max(since, self._started)
            return {k: c.rate(k, lo, max(end, lo)) for k, c in list(self._counts.items())}
        span = max(end - self._started, 1e-9)
        return {k: PollRate(k, c.description, c.nominal, c.polls / span, c.polls, c.answered, c.skipped,
                            c.max_gap, c.last_error, answered_hz=c.answered / span, span_s=span)
                for k, c in list(self._counts.items())}

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception as exc:
            self.error = exc
            log.exception("observer stopped")

    async def _main(self) -> None:
        # Listening (importing a client, connecting) must not delay the first polls.
        listening = asyncio.create_task(self._listen())
        # One connection pool for every source: 60 entry nodes at 10 Hz must not open a
        # connection per poll. Sized so that every source can have one read in flight.
        # aiohttp, not httpx: at 600 polls/s an httpx request's CPU cost alone would use more
        # than a core (bench/observer_rate.py measured about 30x aiohttp's).
        connector = aiohttp.TCPConnector(limit=len(self._counts) + 8, use_dns_cache=True)
        timeout = aiohttp.ClientTimeout(total=max(0.5, self.interval * 5))
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False) as http:
            next_tick = time.monotonic()
            while not self._stop.is_set():
                self._counts[OBSERVER].done(time.monotonic(), True)
                self._tick(http)
                self.ticks += 1
                if self.on_tick is not None:
                    self.on_tick(time.monotonic())
                next_tick += self.interval
                delay = next_tick - time.monotonic()
                if delay < 0:  # fell behind: do not burst to catch up
                    next_tick = time.monotonic()
                    delay = 0
                await asyncio.sleep(delay)
            self._stopped = time.monotonic()
            for task in self._inflight.values():
                task.cancel()
            await asyncio.gather(*self._inflight.values(), return_exceptions=True)
        # A feed that cannot reach its server may still be trying to: stop it, then release it.
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)
        if self.sources.broadcast is not None:
            await self.sources.broadcast.close()

    async def _listen(self) -> None:
        """Listen to the control plane's version feed, where the sources have one."""
        feed = self.sources.broadcast
        if feed is None:
            return

        def heard(version: int) -> None:
            self.tl.add(CpObs(time.monotonic(), version, "broadcast"))

        await feed.start(heard)

    # -- one tick --------------------------------------------------------------------------
    def _tick(self, http: aiohttp.ClientSession) -> None:
        # Every read runs on its own: a frozen region's hanging source must not slow the
        # tick (and so the resolution) for every other source. A read still in flight is
        # not doubled (that tick counts as skipped); its answer is stamped when it arrives.
        for n in self.sources.entry_nodes:
            self._spawn(("node", n.name), self._node(http, n), n.name)
        self._spawn(("dns", ""), self._dns(), "dns")
        if self.sources.control_plane is not None:
            self._spawn(("cp", ""), self._cp(http), "control_plane")
        if self.ticks % self.util_every == 0:
            for r, srcs in self.sources.utilisation.items():
                self._spawn(("util", r), self._util(http, r, srcs), f"utilisation {r}")
            for r in self.sources.regional_control_planes:
                self._spawn(("rcp", r), self._regional_cp(http, r), f"regional control plane {r}")
            if self.sources.check_timeouts is not None:
                self._spawn(("checks", ""), self._checks(http), CHECK_TIMEOUTS)
        for i, source in enumerate(self.liveness):
            self._spawn(("liveness", str(i)), self._live(i, source), None)
        self._collect_alarms_and_requests()

    def _spawn(self, key: tuple[str, str], coro: Coroutine[Any, Any, None], counter: str | None) -> None:
        task = self._inflight.get(key)
        if task is not None and not task.done():
            coro.close()
            if counter is not None:
                self._counts[counter].skipped += 1
            return
        self._inflight[key] = asyncio.create_task(coro)

    def _collect_alarms_and_requests(self) -> None:
        with self._alarm_lock:
            for key, source in zip(self._alarm_keys, self.sources.alarms, strict=True):
                self._alarms(key, source)
        if self.request_source is not None:
            recs = self.request_source()
            if recs:
                self.tl.extend_requests(recs)

    def _alarms(self, key: str, source: AlarmSource) -> None:
        events = source.poll()
        now = time.monotonic()
        for e in events:
            self.tl.add(AlarmObs(e.t if e.t is not None else now, e.node, e.event, e.detail))
        error = getattr(source, "last_error", None)
        self._counts[key].done(now, error is None, error)

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
        r = await self.sources.dns.read()
        now = time.monotonic()
        answers = tuple(self.addr_region.get(a, a) for a in r.addresses)
        self.tl.add(DnsObs(now, r.ok, tuple(sorted(set(answers))), r.ttl, answers))
        self._counts["dns"].done(now, r.ok, getattr(self.sources.dns, "last_error", None))

    async def _node(self, http: aiohttp.ClientSession, node: EntryNodeSource) -> None:
        sent = time.monotonic()
        r = await node.read(http)
        now = time.monotonic()
        if r.ok:
            self.tl.add(NodeObs(now, node.name, True, r.version, r.routable, r.stale, sent))
        else:
            self.tl.add(NodeObs(now, node.name, False, sent=sent))
        self._counts[node.name].done(now, r.ok, getattr(node, "last_error", None))

    async def _cp(self, http: aiohttp.ClientSession) -> None:
        cp = self.sources.control_plane
        assert cp is not None
        v = await cp.read(http)
        now = time.monotonic()
        self.tl.add(CpObs(now, v, "poll"))
        self._counts["control_plane"].done(now, v is not None, getattr(cp, "last_error", None))

    async def _regional_cp(self, http: aiohttp.ClientSession, region: str) -> None:
        src = self.sources.regional_control_planes[region]
        v = await src.read(http)
        now = time.monotonic()
        self.tl.add(RegionalCpObs(now, region, v))
        self._counts[f"regional control plane {region}"].done(now, v is not None, getattr(src, "last_error", None))

    async def _checks(self, http: aiohttp.ClientSession) -> None:
        src = self.sources.check_timeouts
        assert src is not None
        counts = await src.read(http)
        now = time.monotonic()
        if counts is not None:
            self._check_timeouts.append((now, dict(counts)))
        self._counts[CHECK_TIMEOUTS].done(now, counts is not None, getattr(src, "last_error", None))

    def check_timeouts_since(self, since: float) -> dict[str, int]:
        """Per region, how many of the federation's own health checks timed out between the
        last reading at or before *since* (else the first after it) and the last reading; empty
        without a :attr:`Sources.check_timeouts` source or before two readings."""
        samples = list(self._check_timeouts)
        if len(samples) < 2:
            return {}
        before = [s for s in samples if s[0] <= since]
        first = before[-1] if before else samples[0]
        last = samples[-1]
        if last[0] <= first[0]:
            return {}
        return {r: max(0, n - first[1].get(r, n)) for r, n in last[1].items()}

    async def _util(self, http: aiohttp.ClientSession, region: str, sources: tuple[UtilisationSource, ...]) -> None:
        # The region's load against its capacity, over every instance that answered.
        readings = await asyncio.gather(*[u.read(http) for u in sources])
        load = cap = 0.0
        rejected = 0
        error = None
        for source, reading in zip(sources, readings, strict=True):
            if reading is None:
                error = getattr(source, "last_error", None) or f"no reading from {source.describe()}"
                continue
            load += reading.utilisation * reading.capacity
            cap += reading.capacity
            rejected += reading.rejected
        now = time.monotonic()
        if cap > 0:
            self.tl.add(UtilObs(now, region, load / cap, rejected))
        self._counts[f"utilisation {region}"].done(now, cap > 0, error)
