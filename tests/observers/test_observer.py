"""The observer reading a Sources bundle from real loopback servers: what lands on the
timeline, with which stamps, and the per-source poll rates."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gameday.fedapp.spec import FederationSpec
from gameday.interfaces import RegionInfo
from gameday.model.timeline import Timeline
from gameday.observers.observer import Observer
from gameday.observers.sources import (
    HttpJsonCheckTimeouts,
    HttpJsonNode,
    HttpJsonUtilisation,
    HttpJsonVersion,
    LogFileAlarms,
    NatsVersionFeed,
    Sources,
    UdpDns,
)
from gameday.verdicts.harness import CHECK_TIMEOUTS

REGIONS = [RegionInfo("a", 1, 100, "127.0.1.1"), RegionInfo("b", 1, 100, "127.0.2.1")]


@pytest.fixture
def status_server() -> Iterator[tuple[str, dict[str, Any]]]:
    """An aiohttp server in its own thread: ``/gw`` (version, routes), ``/bare`` (answers
    only), ``/slow`` (answers after ``state["delay"]`` s), ``/cp`` (the version), ``/load/<i>``
    (a foreign app instance's load: ``state["instances"][i]`` = capacity, share in use, rejected)."""
    state: dict[str, Any] = {"version": 4, "delay": 0.35, "timeouts": {"a": 7, "b": 0},
                             "instances": {"1": (100, 0.5, 2), "2": (300, 0.1, 3)}}

    async def gw(_r: web.Request) -> web.Response:
        return web.json_response({"version": state["version"], "routable_regions": ["a", "b"], "stale": False})

    async def bare(_r: web.Request) -> web.Response:
        return web.json_response({"up": True})

    async def slow(_r: web.Request) -> web.Response:
        await asyncio.sleep(state["delay"])
        return web.json_response({"version": state["version"], "routable_regions": ["a"]})

    async def cp(_r: web.Request) -> web.Response:
        return web.json_response({"version": state["version"]})

    async def gslb(_r: web.Request) -> web.Response:  # the reference GSLB's check counters
        return web.json_response({"regions": {r: {"probe_timeouts": n} for r, n in state["timeouts"].items()}})

    async def load(r: web.Request) -> web.Response:  # a foreign app instance: its own field names
        if r.match_info["i"] not in state["instances"]:
            raise web.HTTPNotFound
        ceiling, busy, shed = state["instances"][r.match_info["i"]]
        return web.json_response({"load": {"ceiling": ceiling, "busy": busy}, "shed": shed})

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    runner: list[web.AppRunner] = []

    async def start() -> None:
        app = web.Application()
        app.router.add_get("/gw", gw)
        app.router.add_get("/bare", bare)
        app.router.add_get("/slow", slow)
        app.router.add_get("/cp", cp)
        app.router.add_get("/load/{i}", load)
        app.router.add_get("/gslb", gslb)
        r = web.AppRunner(app)
        await r.setup()
        await web.TCPSite(r, "127.0.0.1", port).start()
        runner.append(r)
        ready.set()

    t = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    t.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port}", state
    finally:
        asyncio.run_coroutine_threadsafe(runner[0].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)


def test_the_observer_records_every_source_with_its_stamps_and_rates(
        status_server: tuple[str, dict[str, Any]], dns_server: tuple[int, dict[str, Any]], tmp_path: Path) -> None:
    base, state = status_server
    dns_port, dns_state = dns_server
    dns_state["addrs"] = ["127.0.1.1", "127.0.2.1"]
    log = tmp_path / "proxy-a.log"
    log.write_text("")
    sources = Sources(
        entry_nodes=(HttpJsonNode(name="gateway-a", region="a", url=base + "/gw"),
                     HttpJsonNode(name="edge-b", region="b", url=base + "/bare", version=None, routable=None,
                                  stale=None),
                     HttpJsonNode(name="slow-b", region="b", url=base + "/slow", stale=None)),
        dns=UdpDns(server="127.0.0.1", port=dns_port, fqdn="app.test.", samples=4),
        control_plane=HttpJsonVersion(url=base + "/cp"),
        alarms=(LogFileAlarms(path=log, node="proxy-a", json_event_field="event", time_field="mono"),),
    )
    tl = Timeline(t0=time.monotonic())
    obs = Observer(sources, REGIONS, tl)
    obs.start()
    try:
        time.sleep(1.0)
        with log.open("a") as fh:
            fh.write(json.dumps({"mono": time.monotonic(), "event": "stale_snapshot"}) + "\n")
        state["version"] = 5
        time.sleep(1.0)
    finally:
        obs.stop()
    assert obs.error is None
    gw = [o for o in tl.nodes if o.node == "gateway-a"]
    assert gw and all(o.ok and o.routable == ("a", "b") and o.stale is False and o.sent <= o.t for o in gw)
    assert {o.version for o in gw} == {4, 5}
    edge = [o for o in tl.nodes if o.node == "edge-b"]
    assert edge and all(o.ok and o.version is None and o.routable is None and o.stale is None for o in edge)
    assert {d.regions for d in tl.dns if d.ok} == {("a", "b")}  # addresses mapped to regions
    assert {c.version for c in tl.cp} == {4, 5}
    assert [a.event for a in tl.alarms] == ["stale_snapshot"]

    rates = obs.poll_rates()
    assert set(rates) == {"observer", "gateway-a", "edge-b", "slow-b", "dns", "control_plane", "alarms " +
                          sources.alarms[0].describe()}
    assert rates["gateway-a"].achieved_hz > 7 and not rates["gateway-a"].behind
    # The slow node answers 0.35 s after each poll, and is polled again at the next tick: about
    # 2 Hz (less on a busy machine), the ticks in between skipped, and it alone is behind; its
    # gaps are what a figure's resolution would be set by.
    slow = rates["slow-b"]
    assert slow.behind and slow.skipped > 8 and 1.0 <= slow.achieved_hz <= 3.0
    assert slow.max_gap_s >= 0.35
    assert [k for k, r in rates.items() if r.behind] == ["slow-b"]
    slow_obs = [o for o in tl.nodes if o.node == "slow-b"]
    assert all(o.t - o.sent >= 0.34 for o in slow_obs)  # stamped when the answer arrived


def test_without_a_control_plane_source_nothing_is_polled_for_it(dns_server: tuple[int, dict[str, Any]]) -> None:
    dns_port, _ = dns_server
    tl = Timeline()
    obs = Observer(Sources(entry_nodes=(), dns=UdpDns(server="127.0.0.1", port=dns_port, fqdn="x.", samples=1)),
                   REGIONS, tl)
    obs.start()
    time.sleep(0.5)
    obs.stop()
    assert tl.cp == [] and tl.nodes == [] and len(tl.dns) >= 3
    assert set(obs.poll_rates()) == {"observer", "dns"}


def _foreign_instance(base: str, i: str) -> HttpJsonUtilisation:
    return HttpJsonUtilisation(url=f"{base}/load/{i}", capacity="load.ceiling", utilisation="load.busy",
                               rejected="shed")


def test_utilisation_comes_from_any_source_whatever_its_field_names(
        status_server: tuple[str, dict[str, Any]], dns_server: tuple[int, dict[str, Any]]) -> None:
    """A federation whose instances name their load differently: the observer sums each region's
    load over its instances' capacities; a region with an instance that does not answer is
    still judged on the ones that do, and its poll rate says which did not."""
    base, state = status_server
    dns_port, _ = dns_server
    sources = Sources(entry_nodes=(), dns=UdpDns(server="127.0.0.1", port=dns_port, fqdn="x.", samples=1),
                      utilisation={"a": (_foreign_instance(base, "1"), _foreign_instance(base, "2")),
                                   "b": (_foreign_instance(base, "2"), _foreign_instance(base, "9"))})
    tl = Timeline(t0=time.monotonic())
    obs = Observer(sources, REGIONS, tl, util_every=1)
    obs.start()
    try:
        time.sleep(0.6)
        state["instances"]["1"] = (100, 0.9, 4)
        time.sleep(0.6)
    finally:
        obs.stop()
    assert obs.error is None
    a = [u for u in tl.util if u.region == "a"]
    # (100 x 0.5 + 300 x 0.1) / 400 = 0.2 with 2 + 3 rejected; then (90 + 30) / 400 = 0.3 with 7
    assert {(round(u.utilisation, 6), u.rejected_total) for u in a} == {(0.2, 5), (0.3, 7)}
    b = [u for u in tl.util if u.region == "b"]
    assert b and all((round(u.utilisation, 6), u.rejected_total) == (0.1, 3) for u in b)  # instance 9 is not there
    rates = obs.poll_rates()
    assert rates["utilisation a"].answered == rates["utilisation a"].polls and rates["utilisation a"].last_error is None
    assert "404" in str(rates["utilisation b"].last_error)
    assert "load.ceiling" in rates["utilisation a"].description


def test_the_version_feed_is_heard_as_announced(nats_server: FederationSpec,
                                                dns_server: tuple[int, dict[str, Any]]) -> None:
    """A push source: each announcement lands on the timeline as a broadcast version, stamped
    when it arrived; the observer does not parse it (the feed's field path does)."""
    import nats

    dns_port, _ = dns_server
    subject = "gd.test.snapshot.version"
    feed = NatsVersionFeed(url=nats_server.nats_url, subject=subject, field="announced.generation")
    sources = Sources(entry_nodes=(), dns=UdpDns(server="127.0.0.1", port=dns_port, fqdn="x.", samples=1),
                      broadcast=feed)
    tl = Timeline(t0=time.monotonic())
    obs = Observer(sources, REGIONS, tl)
    obs.start()

    async def announce() -> list[float]:
        nc = await nats.connect(nats_server.nats_url)
        sent = []
        try:
            for generation in (11, 12):
                await asyncio.sleep(0.5)  # time to subscribe, and apart
                sent.append(time.monotonic())
                await nc.publish(subject, json.dumps({"announced": {"generation": generation}}).encode())
                await nc.flush()
        finally:
            await nc.close()
        return sent

    try:
        sent = asyncio.run(announce())
        time.sleep(0.3)
    finally:
        obs.stop()
    assert obs.error is None
    heard = [(c.version, c.source) for c in tl.cp]
    assert heard == [(11, "broadcast"), (12, "broadcast")]
    assert all(s <= c.t <= s + 0.3 for s, c in zip(sent, tl.cp, strict=True))


def test_an_unreachable_version_feed_does_not_hold_the_observer_up(dns_server: tuple[int, dict[str, Any]]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    dns_port, _ = dns_server
    sources = Sources(entry_nodes=(), dns=UdpDns(server="127.0.0.1", port=dns_port, fqdn="x.", samples=1),
                      broadcast=NatsVersionFeed(url=f"nats://127.0.0.1:{dead}", subject="s", field="version"))
    tl = Timeline()
    obs = Observer(sources, REGIONS, tl)
    obs.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    obs.stop()
    assert time.monotonic() - t0 < 2, "stopping waited for a feed that cannot connect"
    assert obs.error is None and tl.cp == [] and len(tl.dns) >= 3


def test_the_federation_s_timed_out_checks_are_counted_over_a_window(
        status_server: tuple[str, dict[str, Any]], dns_server: tuple[int, dict[str, Any]]) -> None:
    """The GSLB's timed-out health checks per region, read at the utilisation rate: what rose after
    a time (the fault) is what the harness judges; what was there before does not count."""
    base, state = status_server
    dns_port, _ = dns_server
    checks = HttpJsonCheckTimeouts(url=f"{base}/gslb", regions=("a", "b"))
    sources = Sources(entry_nodes=(), dns=UdpDns(server="127.0.0.1", port=dns_port, fqdn="x.", samples=1),
                      check_timeouts=checks)
    obs = Observer(sources, REGIONS, Timeline(), util_every=1)
    obs.start()
    try:
        time.sleep(0.5)
        t_fault = time.monotonic()
        time.sleep(0.3)
        state["timeouts"]["b"] = 3  # the checker of an untouched region timed out three times
        time.sleep(0.5)
    finally:
        obs.stop()
    assert obs.error is None
    assert obs.check_timeouts_since(t_fault) == {"a": 0, "b": 3}
    assert obs.poll_rates()[CHECK_TIMEOUTS].answered >= 8
    assert any("timed-out health checks" in line for line in sources.describe())
