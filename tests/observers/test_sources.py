"""The observation sources against real servers on loopback: an aiohttp JSON endpoint, a real
``/metrics`` text from prometheus_client, a UDP socket answered with dnspython, a real
Prometheus server when the machine has one, log files being appended and a following command."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from gameday.errors import ConfigError
from gameday.fedapp.spec import FederationSpec
from gameday.observers.sources import (
    AlarmEvent,
    AlarmSource,
    CommandAlarms,
    DnsSource,
    EntryNodeSource,
    HttpJsonNode,
    HttpJsonUtilisation,
    HttpJsonVersion,
    LogFileAlarms,
    MetricsVersion,
    NatsVersionFeed,
    NodeReading,
    PrometheusVersion,
    Sources,
    UdpDns,
    UtilisationReading,
    UtilisationSource,
    VersionFeed,
    VersionSource,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def serve(routes: dict[str, web.Response | Any]) -> AsyncIterator[str]:
    """An aiohttp server on a free loopback port; each route returns what its callable gives
    (re-evaluated per request, so a test can change the answer between reads)."""

    def handler(make: Any) -> Any:
        async def h(_request: web.Request) -> web.StreamResponse:
            return make() if callable(make) else make

        return h

    app = web.Application()
    for path, make in routes.items():
        app.router.add_get(path, handler(make))
    runner = web.AppRunner(app)
    await runner.setup()
    port = _free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


# -- entry nodes ---------------------------------------------------------------------------------
def test_http_json_node_reads_dotted_paths_and_says_what_is_missing() -> None:
    doc: dict[str, Any] = {"status": {"route": {"version": 7, "regions": ["a", "b"]}, "stale": False}}

    async def body() -> None:
        async with serve({"/s": lambda: web.json_response(doc)}) as base, httpx.AsyncClient() as http:
            node = HttpJsonNode(name="gw-a", region="a", url=base + "/s", version="status.route.version",
                                routable="status.route.regions", stale="status.stale")
            assert isinstance(node, EntryNodeSource)
            assert await node.read(http) == NodeReading(True, 7, ("a", "b"), False)
            assert node.last_error is None
            assert "status.route.version" in node.describe()

            # Paths not provided are "not known", not failures.
            bare = HttpJsonNode(name="gw-a", region="a", url=base + "/s", version=None, routable=None, stale=None)
            assert await bare.read(http) == NodeReading(True, None, None, None)

            # A provided field the answer lacks: not ok, and last_error names the field.
            doc["status"]["route"].pop("version")
            assert await node.read(http) == NodeReading(False)
            assert node.last_error is not None and "status.route.version" in node.last_error

            doc["status"]["route"]["version"] = "eight"
            assert not (await node.read(http)).ok

            doc["status"]["route"]["version"] = 8.0  # JSON numbers may come as floats
            assert (await node.read(http)).version == 8

    run(body())


def test_http_json_node_not_answering_and_http_errors() -> None:
    async def body() -> None:
        async with serve({"/down": lambda: web.json_response({"version": 1}, status=503)}) as base, \
                httpx.AsyncClient(timeout=1) as http:
            node = HttpJsonNode(name="gw-a", region="a", url=base + "/down")
            assert await node.read(http) == NodeReading(False)
            assert "503" in str(node.last_error)
            gone = HttpJsonNode(name="gw-b", region="b", url=f"http://127.0.0.1:{_free_port()}/status")
            assert await gone.read(http) == NodeReading(False)
            assert "ConnectError" in str(gone.last_error)

    run(body())


# -- control-plane versions ------------------------------------------------------------------------
def test_http_json_version() -> None:
    state = {"version": 3}

    async def body() -> None:
        async with serve({"/status": lambda: web.json_response({"cp": dict(state)})}) as base, \
                httpx.AsyncClient() as http:
            src = HttpJsonVersion(url=base + "/status", field="cp.version")
            assert isinstance(src, VersionSource)
            assert await src.read(http) == 3
            state["version"] = 4
            assert await src.read(http) == 4
            assert await HttpJsonVersion(url=base + "/status").read(http) is None  # no top-level "version"

    run(body())


def test_metrics_version_parses_real_exposition_text() -> None:
    registry = CollectorRegistry()
    g = Gauge("federation_route_version", "route version", ["role"], registry=registry)
    g.labels(role="controlplane").set(12)
    g.labels(role="proxy").set(11)

    def metrics() -> web.Response:
        return web.Response(body=generate_latest(registry), content_type="text/plain")

    async def body() -> None:
        async with serve({"/metrics": metrics, "/broken": lambda: web.Response(text="not { metrics")}) as base, \
                httpx.AsyncClient() as http:
            src = MetricsVersion(url=base + "/metrics", metric="federation_route_version",
                                 labels={"role": "controlplane"})
            assert await src.read(http) == 12
            g.labels(role="controlplane").set(13)
            assert await src.read(http) == 13
            # Without labels the largest sample counts (several replicas: the newest).
            assert await MetricsVersion(url=base + "/metrics", metric="federation_route_version").read(http) == 13
            absent = MetricsVersion(url=base + "/metrics", metric="no_such_metric")
            assert await absent.read(http) is None
            assert "no sample no_such_metric" in str(absent.last_error)
            broken = MetricsVersion(url=base + "/broken", metric="x")
            assert await broken.read(http) is None
            assert broken.last_error is not None

    run(body())


def test_prometheus_version_query_api_shapes() -> None:
    """The answer shapes of Prometheus's documented ``/api/v1/query`` (vector, scalar, empty,
    error), served by a small documented stand-in; the real server is the next test."""
    answers: dict[str, Any] = {}

    async def query(request: web.Request) -> web.Response:
        return web.json_response(answers[request.query["query"]])

    async def body() -> None:
        app = web.Application()
        app.router.add_get("/api/v1/query", query)
        runner = web.AppRunner(app)
        await runner.setup()
        port = _free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        base = f"http://127.0.0.1:{port}"
        answers.update({
            "v": {"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {"instance": "cp-1"}, "value": [1.7e9, "41"]},
                {"metric": {"instance": "cp-2"}, "value": [1.7e9, "42"]}]}},
            "s": {"status": "success", "data": {"resultType": "scalar", "result": [1.7e9, "5"]}},
            "none": {"status": "success", "data": {"resultType": "vector", "result": []}},
            "bad": {"status": "error", "errorType": "bad_data", "error": "parse error"},
            "m": {"status": "success", "data": {"resultType": "matrix", "result": []}},
        })
        try:
            async with httpx.AsyncClient() as http:
                assert await PrometheusVersion(url=base, query="v").read(http) == 42
                assert await PrometheusVersion(url=base + "/api/v1/query", query="s").read(http) == 5
                none = PrometheusVersion(url=base, query="none")
                assert await none.read(http) is None and "no sample" in str(none.last_error)
                bad = PrometheusVersion(url=base, query="bad")
                assert await bad.read(http) is None and "parse error" in str(bad.last_error)
                matrix = PrometheusVersion(url=base, query="m")
                assert await matrix.read(http) is None and "matrix" in str(matrix.last_error)
        finally:
            await runner.cleanup()

    run(body())


@pytest.mark.slow
def test_prometheus_version_against_a_real_prometheus(tmp_path: Path) -> None:
    """A real Prometheus (Debian's) scraping a prometheus_client endpoint; the query sees the
    version change."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no prometheus binary on PATH (Debian package 'prometheus')")
    from prometheus_client import start_http_server

    registry = CollectorRegistry()
    g = Gauge("cp_route_version", "route version", registry=registry)
    g.set(9)
    exporter_port = _free_port()
    server, thread = start_http_server(exporter_port, addr="127.0.0.1", registry=registry)
    prom_port = _free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s}\n"
        f"scrape_configs: [{{job_name: cp, static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]}}]\n")
    proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=subprocess.DEVNULL, stderr=(tmp_path / "prom.log").open("wb"))
    try:
        async def body() -> None:
            src = PrometheusVersion(url=f"http://127.0.0.1:{prom_port}", query='cp_route_version{job="cp"}')
            async with httpx.AsyncClient() as http:
                deadline = time.monotonic() + 30
                while await src.read(http) != 9:
                    assert time.monotonic() < deadline, f"Prometheus never answered 9: {src.last_error}"
                    await asyncio.sleep(0.5)
                g.set(10)
                while await src.read(http) != 10:
                    assert time.monotonic() < deadline, f"Prometheus never answered 10: {src.last_error}"
                    await asyncio.sleep(0.5)

        asyncio.run(body())
    finally:
        proc.terminate()
        proc.wait(10)
        server.shutdown()
        thread.join(5)


# -- DNS -----------------------------------------------------------------------------------------
def test_udp_dns_samples_answers(dns_server: tuple[int, dict[str, Any]]) -> None:
    port, state = dns_server
    state["addrs"] = ["127.0.1.1", "127.0.2.1"]
    # Its server is a thread of this process: wait for every answer however loaded the machine.
    src = UdpDns(server="127.0.0.1", port=port, fqdn="app.gameday.test", samples=8, timeout=10.0)
    assert isinstance(src, DnsSource)
    r = asyncio.run(src.read())
    assert r.ok and r.ttl == 5
    assert sorted(r.addresses) == ["127.0.1.1"] * 4 + ["127.0.2.1"] * 4  # one per sample
    assert "app.gameday.test." in src.describe()

    state["addrs"] = []  # NXDOMAIN: the server answered, with nothing
    r = asyncio.run(src.read())
    assert r.ok and r.addresses == ()

    state["silent"] = True
    quick = UdpDns(server="127.0.0.1", port=port, fqdn="app.gameday.test", samples=2, timeout=0.2)
    r = asyncio.run(quick.read())
    assert not r.ok and "Timeout" in str(quick.last_error)


def test_udp_dns_sends_a_reads_samples_from_one_socket_and_keeps_only_their_answers(
        dns_server: tuple[int, dict[str, Any]]) -> None:
    """A read's 16 queries leave one socket together (not one endpoint each: at 10 Hz that was
    a fifth of a drill observer's CPU); each answer is matched to its query by message id, so
    garbage and an answer to another id (192.0.2.66, TTL 1) never count."""
    port, state = dns_server
    state["addrs"] = ["127.0.1.1", "127.0.2.1"]
    state["decoys"] = True
    # The server is a thread of this process: under load its 48 sends per read can take longer
    # than the default 0.5 s timeout (one read once came back with 15 answers of 16).
    src = UdpDns(server="127.0.0.1", port=port, fqdn="app.gameday.test", samples=16, timeout=10.0)
    for _ in range(3):
        state["peers"].clear()
        r = asyncio.run(src.read())
        assert r.ok and r.ttl == 5, src.last_error
        assert sorted(r.addresses) == ["127.0.1.1"] * 8 + ["127.0.2.1"] * 8
        assert len(state["peers"]) == 16 and len(set(state["peers"])) == 1, state["peers"]


def test_udp_dns_at_a_closed_port_is_a_failed_read_not_an_exception() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = UdpDns(server="127.0.0.1", port=port, fqdn="app.gameday.test", samples=4, timeout=0.5)
    r = asyncio.run(src.read())
    assert not r.ok and r.addresses == ()
    assert "ConnectionRefused" in str(src.last_error), src.last_error


def test_udp_dns_rejects_what_carries_no_address() -> None:
    with pytest.raises(ConfigError, match="carries no address"):
        UdpDns(server="127.0.0.1", port=53, fqdn="x.", rdtype="TXT")
    with pytest.raises(ConfigError, match="not one dnspython knows"):
        UdpDns(server="127.0.0.1", port=53, fqdn="x.", rdtype="BOGUS")


# -- alarms --------------------------------------------------------------------------------------
def _append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def test_log_file_alarms_json_lines_being_appended(tmp_path: Path) -> None:
    log = tmp_path / "proxy-a.log"
    _append(log, json.dumps({"mono": 1.0, "event": "stale_snapshot", "reason": "old"}) + "\n")
    src = LogFileAlarms(path=log, node="proxy-a", json_event_field="event", time_field="mono",
                        detail_field="reason")
    assert isinstance(src, AlarmSource)
    assert src.poll() == []  # what the file held before the source was made is another drill's

    _append(log, "plain text line\n" + json.dumps({"mono": 2.5, "event": "route_changed"}) + "\n")
    _append(log, json.dumps({"mono": 3.0, "event": "stale_snapshot", "reason": "lag 3"}) + "\n")
    _append(log, '{"mono": 4.0, "event": "stale_snapshot_cle')  # half written
    assert src.poll() == [AlarmEvent(3.0, "proxy-a", "stale_snapshot", "lag 3")]
    _append(log, 'ared"}\n')
    assert src.poll() == [AlarmEvent(4.0, "proxy-a", "stale_snapshot_cleared", "")]
    assert src.poll() == []

    log.write_text(json.dumps({"event": "stale_snapshot"}) + "\n")  # truncated and rewritten
    assert src.poll() == [AlarmEvent(None, "proxy-a", "stale_snapshot", "")]

    again = LogFileAlarms(path=log, node="proxy-a", json_event_field="event", from_start=True)
    assert [e.event for e in again.poll()] == ["stale_snapshot"]


def test_log_file_alarms_regex_and_missing_file(tmp_path: Path) -> None:
    log = tmp_path / "nginx.log"
    src = LogFileAlarms(path=log, node="edge", regex=r"STALE snapshot(?: on (?P<node>\S+))?",
                        clear_regex=r"snapshot fresh")
    assert src.poll() == [] and "does not exist" in str(src.last_error)
    _append(log, "12:00 STALE snapshot on proxy-b lag=4\n12:01 all good\n12:02 snapshot fresh\n")
    events = src.poll()
    assert [(e.node, e.event) for e in events] == [("proxy-b", "stale_snapshot"), ("edge", "stale_snapshot_cleared")]
    assert events[0].t is None and "lag=4" in events[0].detail

    with pytest.raises(ConfigError, match="exactly one of"):
        LogFileAlarms(path=log, node="x")
    with pytest.raises(ConfigError, match="invalid regular expression"):
        LogFileAlarms(path=log, node="x", regex="(")


def _target(fd: Path) -> str:
    try:
        return os.readlink(fd)
    except OSError:
        return ""


def test_command_alarms_follow_a_command(tmp_path: Path) -> None:
    log = tmp_path / "proxy.log"
    log.write_text("")
    # The follower is a real `tail -F` when the machine has it; else the same in Python.
    argv = ["tail", "-n", "0", "-F", str(log)] if shutil.which("tail") else [
        sys.executable, "-c", "import sys,time\nf=open(sys.argv[1])\nwhile True:\n l=f.readline()\n"
        " print(l,end='',flush=True) if l else time.sleep(0.05)", str(log)]
    src = CommandAlarms(argv=argv, node="proxy-c", regex="stale_snapshot raised")
    try:
        assert src.poll() == []  # starts the command
        # The follower reads from the end of the file once it has it open: append only then (a
        # fixed 0.5 s was not always enough on a loaded CI machine, and the line went unseen).
        proc = src._proc  # the real process it started, to wait on
        assert proc is not None
        fd_dir = Path(f"/proc/{proc.pid}/fd")
        opened = time.monotonic() + 10
        while time.monotonic() < opened and not any(
                _target(fd) == str(log) for fd in (fd_dir.iterdir() if fd_dir.exists() else [])):
            time.sleep(0.02)
        time.sleep(0.2)  # it has the file open; let it seek to the end
        _append(log, "x stale_snapshot raised y\nother\n")
        deadline = time.monotonic() + 5
        events: list[AlarmEvent] = []
        while not events and time.monotonic() < deadline:
            time.sleep(0.05)
            events = src.poll()
        assert [(e.node, e.event) for e in events] == [("proxy-c", "stale_snapshot")]
    finally:
        src.close()
    src.close()  # idempotent
    assert src.poll() == []  # not restarted after close


def test_command_alarms_that_cannot_run() -> None:
    src = CommandAlarms(argv=["/nonexistent/follower"], node="p", regex="x")
    assert src.poll() == []
    assert "cannot run" in str(src.last_error)
    with pytest.raises(ConfigError, match="argv is empty"):
        CommandAlarms(argv=[], node="p", regex="x")


# -- utilisation -------------------------------------------------------------------------------------
def test_http_json_utilisation_reads_the_paths_it_is_given_and_says_what_is_missing() -> None:
    doc: dict[str, Any] = {"load": {"ceiling": 200, "busy": 0.25}, "shed": 3}

    async def body() -> None:
        async with serve({"/s": lambda: web.json_response(doc),
                          "/down": lambda: web.json_response(doc, status=503)}) as base, \
                httpx.AsyncClient(timeout=1) as http:
            src = HttpJsonUtilisation(url=base + "/s", capacity="load.ceiling", utilisation="load.busy",
                                      rejected="shed")
            assert isinstance(src, UtilisationSource)
            assert await src.read(http) == UtilisationReading(capacity=200.0, utilisation=0.25, rejected=3)
            assert src.last_error is None and "load.ceiling" in src.describe()

            # No rejection counter: 0, not a failure.
            no_counter = HttpJsonUtilisation(url=base + "/s", capacity="load.ceiling", utilisation="load.busy",
                                             rejected=None)
            assert await no_counter.read(http) == UtilisationReading(200.0, 0.25, 0)

            # A field the answer lacks, or one that is not a number: no reading, and why.
            doc["load"].pop("busy")
            assert await src.read(http) is None
            assert src.last_error is not None and "load.busy" in src.last_error
            doc["load"]["busy"] = "a lot"
            assert await src.read(http) is None and "not a number" in str(src.last_error)
            doc["load"]["busy"] = True  # JSON true is no share of a capacity
            assert await src.read(http) is None

            down = HttpJsonUtilisation(url=base + "/down", capacity="c", utilisation="u", rejected=None)
            assert await down.read(http) is None and "503" in str(down.last_error)
            gone = HttpJsonUtilisation(url=f"http://127.0.0.1:{_free_port()}/s", capacity="c", utilisation="u",
                                       rejected=None)
            assert await gone.read(http) is None and "ConnectError" in str(gone.last_error)

    run(body())


# -- the version as announced (push) -------------------------------------------------------------------
def test_nats_version_feed_hears_each_announcement_on_a_real_nats_server(nats_server: FederationSpec) -> None:
    import nats

    subject = "gd.test.snapshot.version"

    async def body() -> None:
        feed = NatsVersionFeed(url=nats_server.nats_url, subject=subject, field="cp.version")
        assert isinstance(feed, VersionFeed)
        heard: list[int] = []
        await feed.start(heard.append)
        nc = await nats.connect(nats_server.nats_url)
        try:
            for message in ({"cp": {"version": 7}}, {"cp": {}}, b"not json", {"cp": {"version": "8"}},
                            {"version": 99}):
                await nc.publish(subject, message if isinstance(message, bytes) else json.dumps(message).encode())
            await nc.publish("gd.other.subject", json.dumps({"cp": {"version": 50}}).encode())
            await nc.flush()
            deadline = time.monotonic() + 5
            while len(heard) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)  # anything else would have arrived by now
        finally:
            await nc.close()
            await feed.close()
        # Only the messages carrying a version at the given path, in order; the rest named.
        assert heard == [7, 8]
        assert feed.last_error is not None and "cp.version" in feed.last_error
        await feed.close()  # idempotent
        assert subject in feed.describe()

    run(body())


def test_a_nats_version_feed_with_no_server_keeps_trying_and_says_why_once(caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        feed = NatsVersionFeed(url=f"nats://127.0.0.1:{_free_port()}", subject="s", field="version")
        heard: list[int] = []
        trying = asyncio.create_task(feed.start(heard.append))  # it keeps trying: the bus may come up
        await asyncio.sleep(0.5)
        trying.cancel()
        await asyncio.gather(trying, return_exceptions=True)
        await feed.close()
        assert heard == [] and "ConnectionRefused" in str(feed.last_error)

    run(body())
    # Said once, not once per attempt.
    assert caplog.text.count("went away (ConnectionRefusedError)") == 1, caplog.text


def test_sources_bundle_describes_every_source(tmp_path: Path) -> None:
    s = Sources(entry_nodes=(HttpJsonNode(name="gateway-a", region="a", url="http://127.0.0.1:1/status"),),
                dns=UdpDns(server="127.0.0.1", port=5353, fqdn="app.test."))
    lines = s.describe()
    assert lines[0].startswith("entry node gateway-a (region a): HTTP JSON")
    assert "control plane: none (version verdict not applicable)" in lines
    assert "alarms: none (alarm verdict not applicable)" in lines
    assert s.utilisation == {}
