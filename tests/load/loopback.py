"""A stand-in federation on loopback for the load generator's own tests: a real DNS server
(dnspython over UDP, one A record) and a real HTTP gateway, each on a thread."""

from __future__ import annotations

import contextlib
import http.server
import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import dns.message
import dns.rrset

from gameday.interfaces import Endpoints


class _ThreadingHTTP(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def _gateway(delay: float) -> type[http.server.BaseHTTPRequestHandler]:
    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if delay:
                time.sleep(delay)
            self.send_response(200)
            self.send_header("X-Served-By", "a/gw-0")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    return Gateway


@contextlib.contextmanager
def loopback_federation(fqdn: str, *, delay: float = 0.0, ttl: int = 5) -> Iterator[Endpoints]:
    """*fqdn* -> 127.0.0.1 (TTL *ttl*) from a UDP DNS server, and a gateway answering 200 (as
    region ``a``) after *delay* seconds; both stopped on exit."""
    http_srv = _ThreadingHTTP(("127.0.0.1", 0), _gateway(delay))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.2)
    stop = threading.Event()

    def serve_dns() -> None:
        while not stop.is_set():
            try:
                wire, addr = udp.recvfrom(4096)
            except TimeoutError:
                continue
            r = dns.message.make_response(dns.message.from_wire(wire))
            r.answer.append(dns.rrset.from_text(fqdn, ttl, "IN", "A", "127.0.0.1"))
            udp.sendto(r.to_wire(), addr)

    threads = [threading.Thread(target=serve_dns, daemon=True),
               threading.Thread(target=http_srv.serve_forever, daemon=True)]
    for t in threads:
        t.start()
    try:
        yield Endpoints(dns_server=udp.getsockname(), fqdn=fqdn, gateway_port=http_srv.server_address[1])
    finally:
        stop.set()
        http_srv.shutdown()
        http_srv.server_close()
        for t in threads:
            t.join(5)
        udp.close()
