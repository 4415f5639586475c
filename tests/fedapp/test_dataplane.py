"""The data plane (app, gateway, local proxy) as real processes on real sockets.

There is no control plane here: :class:`FakeControlPlane` plays it over a real
JetStream nats-server, answering diff requests from a :class:`Snapshot` the test
mutates and broadcasting its version, exactly as the wire contract says.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest

from gameday.errors import HarnessStarved
from gameday.fedapp import wire
from gameday.fedapp.snapshot import Snapshot
from gameday.fedapp.spec import FederationSpec
from tests.conftest import NatsServer

Component = Callable[..., subprocess.Popen[bytes]]

FAST = {"probe_interval": 0.1, "probe_timeout": 0.08, "fall": 3, "rise": 2, "stale_after": 1.0,
        "request_budget": 0.5}
BUDGET_CLIENT_SLACK_S = 2.0
"""What a request may take on top of its budget, seen from the test's clock: the HTTP round
trip and scheduling, which a loaded 2-core CI machine (load ~11) can stretch by ~1-2 s."""


# -- test infrastructure ------------------------------------------------------------------
class FakeControlPlane:
    """Plays the control plane on NATS from a background thread.

    Answers ``wire.diff_subject`` requests with ``snapshot.diff_since(since)`` (recording
    every request) and publishes the version on ``wire.broadcast_subject`` after every
    change and every *heartbeat* seconds.
    """

    def __init__(self, spec: FederationSpec, heartbeat: float = 0.2) -> None:
        self.spec = spec
        self.heartbeat = heartbeat
        self.snapshot = Snapshot()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(),), daemon=True)
        self.thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake control plane did not connect to NATS")

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self.nc = await nats.connect(self.spec.nats_url, allow_reconnect=True, max_reconnect_attempts=-1,
                                     reconnect_time_wait=0.2)

        async def on_diff(msg: Any) -> None:
            req = json.loads(msg.data)
            with self.lock:
                self.requests.append(req)
                data = self.snapshot.diff_since(int(req["since"])).to_bytes()
            await msg.respond(data)

        await self.nc.subscribe(wire.diff_subject(self.spec.run_id), cb=on_diff)
        self._ready.set()
        while not self._stop.is_set():
            await self._publish(heartbeat=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.heartbeat)
        await self.nc.close()

    async def _publish(self, heartbeat: bool) -> None:
        with self.lock:
            v = self.snapshot.version
        body = json.dumps({"version": v, "at": time.time(), "heartbeat": heartbeat}).encode()
        if self.nc.is_connected:
            await self.nc.publish(wire.broadcast_subject(self.spec.run_id), body)

    def set(self, *items: tuple[str, dict[str, Any]]) -> int:
        """Set snapshot entries, broadcast the new version, return it."""
        with self.lock:
            for key, value in items:
                self.snapshot.set_entry(key, value)
            v = self.snapshot.version
        asyncio.run_coroutine_threadsafe(self._publish(heartbeat=False), self.loop).result(5)
        return v

    @property
    def version(self) -> int:
        with self.lock:
            return self.snapshot.version

    def all_healthy(self) -> int:
        items: list[tuple[str, dict[str, Any]]] = []
        for r in self.spec.regions:
            items += [(wire.alive_key(r.name), {"alive": True}),
                      (wire.gateway_key(r.name), {"healthy": True}),
                      (wire.route_rules_key(r.name), {"version": 1})]
            items += [(wire.instance_key(r.name, i.name), {"healthy": True, "weight": 1})
                      for i in r.instances]
        return self.set(*items)

    def stop(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(10)


@pytest.fixture
def fed(
    make_spec: Callable[..., FederationSpec], nats_for: Callable[[FederationSpec], NatsServer]
) -> Iterator[Callable[..., Any]]:
    """``fed(**timing)`` -> (spec, nats, fake control plane with everything healthy).

    The fake control planes stop here, before ``nats_for`` stops the servers.
    """
    started: list[FakeControlPlane] = []

    def _fed(**timing: Any) -> tuple[FederationSpec, NatsServer, FakeControlPlane]:
        spec = make_spec(timing={**FAST, **timing})
        n = nats_for(spec)
        cp = FakeControlPlane(spec)
        started.append(cp)
        cp.all_healthy()
        return spec, n, cp

    try:
        yield _fed
    finally:
        for s in reversed(started):
            s.stop()


@pytest.fixture
def http(admin_headers: dict[str, str]) -> Iterator[httpx.Client]:
    """A client that signs its calls with the run's admin token (harmless off the admin paths)."""
    with httpx.Client(timeout=2.0, headers=admin_headers) as c:
        yield c


def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll *cond* until it returns something truthy; fail after *timeout* seconds naming *what*."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except httpx.HTTPError as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")


def status(http: httpx.Client, url: str) -> dict[str, Any]:
    r = http.get(url + "/status")
    r.raise_for_status()
    return dict(r.json())


def start_apps(component: Component, http: httpx.Client, spec: FederationSpec,
               names: list[str]) -> dict[str, subprocess.Popen[bytes]]:
    procs = {n: component("app", instance=n) for n in names}
    for n in names:
        url = spec.instance(n)[1].endpoint.url
        wait_until(lambda u=url: http.get(u + "/livez").status_code == 200, 10, f"app {n} up")
    return procs


def start_gateway(component: Component, http: httpx.Client, spec: FederationSpec, region: str,
                  cp: FakeControlPlane, ready: list[str]) -> str:
    """Start region's gateway; wait until it routes by the CP's version with *ready* local instances."""
    component("gateway", region=region)
    url = spec.region(region).gateway.url
    v = cp.version
    wait_until(lambda: (s := status(http, url))["version"] == v and s["local_ready"] == ready, 10,
               f"gateway {region} at v{v} with ready {ready}")
    return url


def log_events(path: Path, event: str) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            if d.get("event") == event:
                out.append(d)
    return out


# -- app ----------------------------------------------------------------------------------
def test_app_rejects_above_capacity_with_retry_after(
    make_spec: Callable[..., FederationSpec], component: Component, http: httpx.Client
) -> None:
    spec = make_spec()
    start_apps(component, http, spec, ["a-1"])
    url = spec.instance("a-1")[1].endpoint.url
    cap = int(spec.instance("a-1")[1].capacity_rps)
    t0 = time.monotonic()
    codes = []
    retry_after = set()
    for _ in range(cap + 20):
        r = http.post(url + "/work")
        codes.append(r.status_code)
        if r.status_code == 503:
            retry_after.add(r.headers.get("Retry-After"))
        else:
            assert r.headers["X-Served-By"] == "a/a-1"
            assert r.json()["instance"] == "a-1"
    elapsed = time.monotonic() - t0
    if elapsed >= 1.0:  # the precondition, not the app: a starved test cannot show the 1 s window (rerun once)
        raise HarnessStarved(f"burst took {elapsed:.2f} s, too slow to test the app's 1 s capacity window")
    assert codes.count(200) == cap, codes
    assert codes.count(503) == 20
    assert retry_after == {"1"}
    st = status(http, url)
    assert st["requests_total"] == cap + 20
    assert st["rejected_total"] == 20
    assert st["utilisation"] == pytest.approx(1.0)
    metrics = http.get(url + "/metrics").text
    assert 'gameday_app_rejected_total{region="a",instance="a-1"} 20' in metrics
    assert 'gameday_app_capacity_rps{region="a",instance="a-1"} 40.0' in metrics
    # The window slides: a second later the instance accepts again.
    wait_until(lambda: http.get(url + "/work").status_code == 200, 3, "capacity back after the window")

    # Readiness and liveness are separate hooks.
    assert http.post(url + "/admin/fault", json={"readyz": "fail"}).status_code == 200
    assert http.get(url + "/readyz").status_code == 503
    assert http.get(url + "/livez").status_code == 200
    http.post(url + "/admin/fault", json={"readyz": "ok", "livez": "fail"})
    assert http.get(url + "/readyz").status_code == 200
    assert http.get(url + "/livez").status_code == 500
    assert http.post(url + "/admin/fault", json={"readyz": "bogus"}).status_code == 400


# -- gateway ------------------------------------------------------------------------------
def test_gateway_serves_locally_with_headers(fed: Any, component: Component, http: httpx.Client) -> None:
    spec, _, cp = fed()
    start_apps(component, http, spec, ["a-1", "a-2"])
    gw = start_gateway(component, http, spec, "a", cp, ["a-1", "a-2"])
    served = []
    for _ in range(10):
        r = http.get(gw + "/work?x=1")
        assert r.status_code == 200
        assert r.headers["X-Route-Version"] == str(cp.version)
        served.append(r.headers["X-Served-By"])
        assert r.json()["region"] == "a"
    assert set(served) == {"a/a-1", "a/a-2"}, "round-robin over both ready local instances"
    st = status(http, gw)
    assert st["role"] == "gateway"
    assert st["requests_total"] == 10
    assert st["retries_total"] == 0
    assert st["fallbacks_total"] == 0
    assert st["routable_regions"] == ["a", "b", "c"]
    assert st["stale"] is False
    # A new version reaches the gateway and its responses say so.
    v = cp.set((wire.instance_key("c", "c-2"), {"healthy": False, "weight": 1}))
    wait_until(lambda: http.get(gw + "/work").headers["X-Route-Version"] == str(v), 5, f"gateway at v{v}")
    metrics = http.get(gw + "/metrics").text
    assert 'gameday_gateway_requests_total{region="a"}' in metrics
    assert "gameday_gateway_upstream_seconds_count" in metrics
    assert 'gameday_snapshot_version{node="gateway-a",region="a"}' in metrics
    # Own admin paths are never forwarded.
    assert http.get(gw + "/admin/fault").status_code == 404


def test_gateway_falls_back_when_no_local_instance_is_ready(
    fed: Any, component: Component, http: httpx.Client, tmp_path: Path
) -> None:
    spec, _, cp = fed()
    apps = start_apps(component, http, spec, ["a-1", "a-2", "b-1", "c-1"])
    gw = start_gateway(component, http, spec, "a", cp, ["a-1", "a-2"])
    start_gateway(component, http, spec, "b", cp, ["b-1"])
    start_gateway(component, http, spec, "c", cp, ["c-1"])

    # Not ready (but alive): the gateway's own probes remove them after `fall` probes,
    # without any snapshot change; then requests go to the fallback region b at once.
    for n in ("a-1", "a-2"):
        http.post(spec.instance(n)[1].endpoint.url + "/admin/fault", json={"readyz": "fail"})
    wait_until(lambda: status(http, gw)["local_ready"] == [], 3, "local instances not ready")
    for _ in range(5):
        t0 = time.monotonic()
        r = http.get(gw + "/work")
        dt = time.monotonic() - t0
        assert r.status_code == 200, r.text
        assert r.headers["X-Served-By"] == "b/b-1"
        assert dt < FAST["request_budget"] + BUDGET_CLIENT_SLACK_S, f"fallback request took {dt * 1000:.0f} ms"
    st = status(http, gw)
    assert st["fallbacks_total"] == 5
    assert st["retries_total"] == 0
    assert st["version"] == cp.version, "no snapshot change was needed"

    # The fallback region is not routable by the snapshot: use another routable region.
    v = cp.set((wire.gateway_key("b"), {"healthy": False}))
    wait_until(lambda: status(http, gw)["version"] == v, 5, f"gateway a at v{v}")
    r = http.get(gw + "/work")
    assert r.status_code == 200
    assert r.headers["X-Served-By"] == "c/c-1"
    cp.set((wire.gateway_key("b"), {"healthy": True}))

    # Killed instances: the first requests fail over by retry (connection refused), and
    # after that the fallback takes them; every request within the budget.
    for n in ("a-1", "a-2"):
        http.post(spec.instance(n)[1].endpoint.url + "/admin/fault", json={"readyz": "ok"})
    wait_until(lambda: status(http, gw)["local_ready"] == ["a-1", "a-2"], 3, "local instances ready again")
    for n in ("a-1", "a-2"):
        apps[n].kill()
        apps[n].wait(5)
    for _ in range(6):
        t0 = time.monotonic()
        r = http.get(gw + "/work")
        dt = time.monotonic() - t0
        assert r.status_code == 200, r.text
        assert r.headers["X-Served-By"] == "b/b-1"
        assert dt < FAST["request_budget"] + BUDGET_CLIENT_SLACK_S, f"request took {dt * 1000:.0f} ms"
    assert status(http, gw)["local_ready"] == []
    assert len(log_events(tmp_path / "gateway-a.log", "instance_ejected")) >= 1

    # The negative control: fallback disabled, nothing ready -> 503, no forwarding.
    http.post(gw + "/admin/fault", json={"fallback": False})
    r = http.get(gw + "/work")
    assert r.status_code == 503
    assert "fallback disabled" in r.json()["error"]


def test_killed_instance_costs_exactly_one_retry_in_another_region(
    fed: Any, component: Component, http: httpx.Client
) -> None:
    # Slow probes: the passive path (connection error) must do the work, not the prober.
    spec, _, cp = fed(probe_interval=1.0, probe_timeout=0.5)
    apps = start_apps(component, http, spec, ["a-1", "a-2", "b-1"])
    gw = start_gateway(component, http, spec, "a", cp, ["a-1", "a-2"])
    gb = start_gateway(component, http, spec, "b", cp, ["b-1"])
    for _ in range(4):
        assert http.get(gw + "/work").status_code == 200  # keep-alive connections to both
    apps["a-1"].kill()
    apps["a-1"].wait(5)
    served = []
    slowest = 0.0
    for _ in range(6):
        t0 = time.monotonic()
        r = http.get(gw + "/work")
        slowest = max(slowest, time.monotonic() - t0)
        assert r.status_code == 200, r.text
        served.append(r.headers["X-Served-By"])
    assert served.count("b/b-1") == 1, served
    assert set(served) == {"a/a-2", "b/b-1"}, served
    assert slowest < FAST["request_budget"] + BUDGET_CLIENT_SLACK_S, f"slowest request {slowest * 1000:.0f} ms"
    st = status(http, gw)
    assert st["retries_total"] == 1
    assert st["ejections_total"] == 1
    assert st["local"]["a-1"]["ejected"] is True
    assert status(http, gb)["requests_total"] == 1, "the retry went to b's gateway once"

    # Everything fails (both attempts time out): 502 JSON, still within the budget.
    t0 = time.monotonic()
    r = http.get(gw + "/work?ms=5000")
    dt = time.monotonic() - t0
    assert r.status_code == 502
    body = r.json()
    assert [a["target"] for a in body["attempts"]] == ["a/a-2", "b/gateway"]
    assert {a["error"] for a in body["attempts"]} == {"timeout"}
    # The gateway spends its whole budget here by design (0.5 s less a 20 ms margin), so the
    # client's clock adds the HTTP round trip and scheduling on top (once 502 ms at load ~6):
    # judged against the budget plus that slack; without the budget it would take the 5 s the
    # upstream asked for.
    budget = FAST["request_budget"]
    assert budget - 0.05 <= dt < budget + BUDGET_CLIENT_SLACK_S, f"failed request took {dt * 1000:.0f} ms"
    assert r.headers["X-Route-Version"] == str(cp.version)


def test_hop_requests_are_not_forwarded_again(fed: Any, component: Component, http: httpx.Client) -> None:
    spec, _, cp = fed()
    start_apps(component, http, spec, ["b-1"])
    gb = start_gateway(component, http, spec, "b", cp, ["b-1"])
    gw = start_gateway(component, http, spec, "a", cp, [])  # region a: no instance running
    r = http.get(gw + "/work", headers={wire.HOP: "1"})
    assert r.status_code == 503
    assert "not forwarded again" in r.json()["error"]
    assert "Retry-After" not in r.headers
    assert status(http, gb)["requests_total"] == 0
    # Without the hop header the same gateway does fall back, and b serves it locally.
    r = http.get(gw + "/work")
    assert r.status_code == 200
    assert r.headers["X-Served-By"] == "b/b-1"
    assert status(http, gb)["requests_total"] == 1
    # A hop request to b with b's instance gone: 503, not forwarded to a or c.
    http.post(spec.instance("b-1")[1].endpoint.url + "/admin/fault", json={"readyz": "fail"})
    wait_until(lambda: status(http, gb)["local_ready"] == [], 3, "b-1 not ready")
    assert http.get(gb + "/work", headers={wire.HOP: "1"}).status_code == 503
    assert status(http, gb)["fallbacks_total"] == 0


def test_gateway_keeps_serving_with_nats_down(fed: Any, component: Component, http: httpx.Client,
                                             tmp_path: Path) -> None:
    spec, bus, cp = fed()
    start_apps(component, http, spec, ["a-1", "a-2"])
    gw = start_gateway(component, http, spec, "a", cp, ["a-1", "a-2"])
    component("proxy", region="a")
    px = spec.region("a").proxy.url
    v = cp.version
    wait_until(lambda: status(http, px)["version"] == v, 10, "proxy synced")
    cp.stop()
    bus.stop()
    wait_until(lambda: log_events(tmp_path / "gateway-a.log", "nats_disconnected"), 5, "gateway saw NATS go")
    t_end = time.monotonic() + 1.5
    n = 0
    while time.monotonic() < t_end and n < 300:
        r = http.get(gw + "/work")
        assert r.status_code == 200, r.text
        assert r.headers["X-Route-Version"] == str(v)
        assert r.headers["X-Served-By"] in {"a/a-1", "a/a-2"}
        p = http.get(px + "/call/work")
        assert p.status_code == 200, p.text
        assert p.headers["X-Route-Version"] == str(v)
        n += 1
        # a-1 serves every proxy call and half the gateway's: 1.5 requests an iteration must
        # stay under its 40 req/s capacity, or it answers 503 (a real overload, not R1).
        time.sleep(0.05)
    assert n >= 10
    st = status(http, gw)
    assert st["version"] == v
    # Silent for longer than stale_after: the alarm is up, and it never blocked a request.
    assert st["stale"] is True


# -- proxy --------------------------------------------------------------------------------
def test_proxy_pulls_diffs_after_the_first_full_copy(
    fed: Any, component: Component, http: httpx.Client
) -> None:
    spec, _, cp = fed()
    component("proxy", region="b")
    px = spec.region("b").proxy.url
    v0 = cp.version
    wait_until(lambda: status(http, px)["version"] == v0, 10, "proxy synced")
    st = status(http, px)
    assert st["pulls"]["full"] == 1
    # A heartbeat broadcast of v0 heard while the first (full) pull was in flight asks once
    # more: an empty diff since v0 (a busy machine makes that race likely), never a second copy.
    assert st["last_pull"]["kind"] == "full" or st["last_pull"] == {
        "kind": "diff", "since": v0, "version": v0, "entries": 0, "bytes": st["last_pull"]["bytes"]}
    table = [(e["region"], e["instance"], e["via"]) for e in st["routing_table"]]
    assert table == [("b", "b-1", "direct"), ("b", "b-2", "direct"),
                     ("a", None, "gateway"), ("c", None, "gateway")], "nearest first, ties by name"

    versions = [v0]
    for k in range(3):
        versions.append(cp.set((wire.instance_key("c", "c-1"), {"healthy": k % 2 == 1, "weight": 1})))
        v = versions[-1]
        wait_until(lambda v=v: status(http, px)["version"] == v, 5, f"proxy at v{v}")
    st = status(http, px)
    assert st["pulls"]["full"] == 1, "only the first pull is a full copy"
    assert st["pulls"]["diff"] >= 3
    assert st["last_pull"] == {"kind": "diff", "since": versions[-2], "version": versions[-1],
                               "entries": 1, "bytes": st["last_pull"]["bytes"]}
    with cp.lock:
        sinces = [r["since"] for r in cp.requests if r["node"] == "proxy-b"]
    assert sinces[0] == 0
    assert all(s > 0 for s in sinces[1:]), sinces

    # A region the snapshot excludes leaves the routing table; a sick local instance too.
    v = cp.set((wire.alive_key("a"), {"alive": False}), (wire.instance_key("b", "b-1"), {"healthy": False}))
    wait_until(lambda: status(http, px)["version"] == v, 5, f"proxy at v{v}")
    st = status(http, px)
    assert [(e["region"], e["instance"]) for e in st["routing_table"]] == [("b", "b-2"), ("c", None)]
    assert st["excluded_regions"] == ["a"]


def test_proxy_routes_nearest_first(fed: Any, component: Component, http: httpx.Client) -> None:
    spec, _, cp = fed()
    start_apps(component, http, spec, ["a-1", "b-1"])
    start_gateway(component, http, spec, "b", cp, ["b-1"])
    v = cp.set((wire.instance_key("a", "a-2"), {"healthy": False, "weight": 1}))
    component("proxy", region="a")
    px = spec.region("a").proxy.url
    wait_until(lambda: status(http, px)["version"] == v, 10, "proxy synced")
    r = http.get(px + "/call/work?ms=1")
    assert r.status_code == 200
    assert r.headers["X-Served-By"] == "a/a-1"
    assert r.headers["X-Route-Version"] == str(v)
    # The local instance leaves the snapshot: nearest remote region (b) through its gateway.
    v = cp.set((wire.instance_key("a", "a-1"), {"healthy": False, "weight": 1}))
    wait_until(lambda: status(http, px)["version"] == v, 5, f"proxy at v{v}")
    r = http.get(px + "/call/work")
    assert r.status_code == 200
    assert r.headers["X-Served-By"] == "b/b-1"
    # The snapshot says a-2 is healthy again but it is not running: one failed attempt,
    # then b; the failed target is skipped for the next calls.
    v = cp.set((wire.instance_key("a", "a-2"), {"healthy": True, "weight": 1}))
    wait_until(lambda: status(http, px)["version"] == v, 5, f"proxy at v{v}")
    t0 = time.monotonic()
    r = http.get(px + "/call/work")
    assert time.monotonic() - t0 < FAST["request_budget"] + BUDGET_CLIENT_SLACK_S  # one failed attempt, in the budget
    assert r.status_code == 200
    assert r.headers["X-Served-By"] == "b/b-1"
    st = status(http, px)
    assert st["retries_total"] == 1
    assert st["routing_table"][0] == {"region": "a", "instance": "a-2", "via": "direct", "distance": 0,
                                      "skipped": True, "snapshot": "global"}
    assert http.get(px + "/call/work").headers["X-Served-By"] == "b/b-1"
    assert status(http, px)["retries_total"] == 1, "a skipped target costs no retry"


def test_stale_alarm_fires_when_cut_off_and_clears(
    fed: Any, component: Component, http: httpx.Client, tmp_path: Path
) -> None:
    spec, _, cp = fed(stale_after=1.0)
    component("proxy", region="a")
    px = spec.region("a").proxy.url
    log = tmp_path / "proxy-a.log"
    wait_until(lambda: status(http, px)["version"] == cp.version, 10, "proxy synced")
    time.sleep(1.5)  # longer than stale_after while healthy: no false alarm
    assert log_events(log, "stale_snapshot") == []

    http.post(px + "/admin/fault", json={"drop_broadcasts": True})
    t_cut = time.monotonic()
    for k in range(4):  # versions advance while the proxy hears nothing
        cp.set((wire.instance_key("b", "b-1"), {"healthy": k % 2 == 0, "weight": 1}))
        time.sleep(0.1)
    alarms = wait_until(lambda: log_events(log, "stale_snapshot"), 4, "stale_snapshot log line")
    assert len(alarms) == 1
    assert alarms[0]["node"] == "proxy-a"
    # Silence counts from the last broadcast heard, at most one CP heartbeat (0.2 s) before the cut.
    assert alarms[0]["mono"] - t_cut >= 1.0 - 0.25, "fired no earlier than stale_after"
    assert alarms[0]["reason"] == "no broadcast heard"
    st = status(http, px)
    assert st["stale"] is True
    assert st["version"] < cp.version
    metrics = http.get(px + "/metrics").text
    assert 'gameday_stale_snapshot_alarms_total{node="proxy-a",region="a"} 1' in metrics

    http.post(px + "/admin/fault", json={"drop_broadcasts": False})
    wait_until(lambda: log_events(log, "stale_snapshot_cleared"), 4, "stale_snapshot_cleared log line")
    st = wait_until(lambda: (s := status(http, px))["version"] == cp.version and s, 3, "proxy caught up")
    assert st["stale"] is False
    assert st["stale_alarms_total"] == 1
    assert st["pulls"]["full"] == 1, "catching up after the cut-off is a diff, not a full copy"
