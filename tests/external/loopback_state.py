"""A stand-in for a team's own stateful service, on loopback, for the profile's ``state:`` tests:
a real DNS server (dnspython over UDP) answering the service's name with the regions' addresses,
and one real HTTP server per region with a write path, a per-id read and a lookup, sharing one
in-memory store. Its answers use field names of its own (``{"ack": {"by": ..., "seq": "7"}}``),
and each part can be broken on purpose (``StateService.mode``).

Nothing here imports gameday: the harness sees it only through a profile.
"""

from __future__ import annotations

import http.server
import json
import re
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.message
import dns.rdatatype
import dns.rrset
import yaml

FQDN = "data.state.test."


class LoopbackDns:
    """Answers every A query for *fqdn* with :attr:`addrs` (TTL :attr:`ttl`), on a thread."""

    def __init__(self, fqdn: str, addrs: list[str], host: str = "127.0.0.1", ttl: int = 1) -> None:
        self.fqdn = fqdn
        self.addrs = list(addrs)
        self.ttl = ttl
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="loopback-dns", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    def start(self) -> LoopbackDns:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                wire, peer = self.sock.recvfrom(4096)
            except (TimeoutError, OSError):
                continue
            try:
                q = dns.message.from_wire(wire)
            except Exception:
                continue
            r = dns.message.make_response(q)
            if q.question and q.question[0].rdtype == dns.rdatatype.A and \
                    q.question[0].name.to_text().lower() == self.fqdn.lower():
                for addr in self.addrs:
                    r.answer.append(dns.rrset.from_text(self.fqdn, self.ttl, "IN", "A", addr))
            try:
                self.sock.sendto(r.to_wire(), peer)
            except OSError:
                continue


_ID = re.compile(r"^/items/([A-Za-z0-9_-]{1,64})$")


@dataclass
class StateService:
    """The in-memory store every region's HTTP server shares, and how it misbehaves.

    ``mode``: ``ok``; ``refuse`` (every write 503: nothing stored); ``lose`` (writes are
    acknowledged and not stored: a store that loses acknowledged writes); ``lose_but_probes``
    (the same, except for the health check's probe writes, which it keeps); ``no_read``
    (reads answer 500)."""

    mode: str = "ok"
    store: dict[str, int] = field(default_factory=dict)
    writes: list[tuple[str, str]] = field(default_factory=list)
    """(region, id) of every write request, in order."""
    hosts: dict[str, str] = field(default_factory=dict)
    """Host header of every request, by path."""
    unreadable: set[str] = field(default_factory=set)
    """Ids whose read answers 500 (whatever the mode)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(svc: StateService, region: str) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, body: dict[str, Any] | None = None) -> None:
            data = json.dumps(body or {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Served-By", region)
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> Any:
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"{}") if n else {}

        def do_GET(self) -> None:
            svc.hosts[self.path] = self.headers.get("Host", "")
            m = _ID.match(self.path)
            if m is None:
                self._send(200, {"region": region})  # the load's path, and anything else
                return
            if svc.mode == "no_read" or m.group(1) in svc.unreadable:
                self._send(500, {"error": "store unavailable"})
                return
            with svc.lock:
                seq = svc.store.get(m.group(1))
            self._send(404, {"found": False}) if seq is None else self._send(200, {"ack": {"seq": str(seq)}})

        def do_PUT(self) -> None:
            svc.hosts[self.path] = self.headers.get("Host", "")
            m = _ID.match(self.path)
            body = self._body()
            if m is None or body.get("id") != m.group(1):
                self._send(400, {"error": "expected PUT /items/<id> with {\"id\": <id>}"})
                return
            wid = m.group(1)
            with svc.lock:
                svc.writes.append((region, wid))
                if svc.mode == "refuse":
                    self._send(503, {"error": "read-only"})
                    return
                seq = len(svc.writes)
                if svc.mode == "ok" or (svc.mode == "lose_but_probes" and wid.startswith("gameday-probe-")):
                    svc.store[wid] = seq
            self._send(201, {"ack": {"by": f"node-{region}", "seq": str(seq)}})

        def do_POST(self) -> None:
            if self.path != "/items:lookup":
                self._send(404, {})
                return
            ids = self._body().get("ids") or []
            with svc.lock:
                found = {i: svc.store[i] for i in ids if i in svc.store}
            self._send(200, {"found": found, "failed": []})

        def log_message(self, *args: object) -> None:
            pass

    return Handler


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


@dataclass
class Running:
    """The running stand-in: its DNS server, its regions' addresses and port, its store."""

    dns: LoopbackDns
    gateways: dict[str, str]
    port: int
    service: StateService

    def profile(self, state: dict[str, Any] | None) -> dict[str, Any]:
        """A profile of it (*state*: the ``state:`` section, None: none)."""
        data: dict[str, Any] = {
            "name": "loopback-state",
            "service": {"fqdn": FQDN, "dns": {"server": self.dns.address[0], "port": self.dns.address[1]},
                        "load": {"scheme": "http", "port": self.port, "path": "/", "host": "data.state.test"},
                        "served_by_header": "X-Served-By"},
            "regions": [{"name": r, "gateway": gw, "weight": 1,
                         "faults": {"gateway_down": {"inject": {"argv": ["true"]}, "revert": {"argv": ["true"]}}}}
                        for r, gw in self.gateways.items()],
            "timing": {"dns_ttl": self.dns.ttl},
        }
        if state is not None:
            data["state"] = state
        return data

    def write_profile(self, path: Path, state: dict[str, Any] | None) -> Path:
        path.write_text(yaml.safe_dump(self.profile(state), sort_keys=False), encoding="utf-8")
        return path


#: The ``state:`` section describing it: its own paths and field names.
STATE: dict[str, Any] = {
    "replication": "async", "max_lag": 0.5, "write_rate": 20, "write_timeout": 1.0,
    "http": {"write": {"method": "PUT", "path": "/items/{id}", "acked_by": "ack.by", "seq": "ack.seq"},
             "read_back": {"get": "/items/{id}", "concurrency": 4}},
}


def _free_port(hosts: list[str]) -> int:
    """A TCP port free on every one of *hosts* (bound on the first, then tried on the rest)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((hosts[0], 0))
            port = int(s.getsockname()[1])
        try:
            for h in hosts[1:]:
                with socket.socket() as s:
                    s.bind((h, port))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no port free on all of {hosts}")


@contextmanager
def state_service(regions: tuple[str, ...] = ("a", "b")) -> Iterator[Running]:
    """Region N on 127.0.(230+N).1, one port for all, and the DNS server answering all of them;
    everything stopped on the way out."""
    gateways = {r: f"127.0.{231 + i}.1" for i, r in enumerate(regions)}
    port = _free_port(list(gateways.values()))
    svc = StateService()
    servers = [_Server((gw, port), _handler(svc, r)) for r, gw in gateways.items()]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    dns_server = LoopbackDns(FQDN, list(gateways.values())).start()
    for t in threads:
        t.start()
    try:
        yield Running(dns_server, gateways, port, svc)
    finally:
        dns_server.stop()
        for s in servers:
            s.shutdown()
            s.server_close()
        for t in threads:
            t.join(5)
