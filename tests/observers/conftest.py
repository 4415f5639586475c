"""Loopback servers for the observation-source tests."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import dns.message
import dns.rcode
import dns.rrset
import pytest


@pytest.fixture
def dns_server() -> Iterator[tuple[int, dict[str, Any]]]:
    """A UDP socket on loopback answered with dnspython: A records from ``state["addrs"]``
    (one at a time, round robin, like a weighted GSLB), TTL ``state["ttl"]``; silent while
    ``state["silent"]``. Each query's source address is appended to ``state["peers"]``; while
    ``state["decoys"]``, each answer is preceded by a datagram that is no answer to it
    (garbage, then an answer with another message id)."""
    state: dict[str, Any] = {"addrs": ["127.0.1.1"], "ttl": 5, "silent": False, "n": 0, "peers": [],
                             "decoys": False}
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.1)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            state["peers"].append(peer)
            if state["silent"]:
                continue
            q = dns.message.from_wire(data)
            resp = dns.message.make_response(q)
            name = q.question[0].name
            if state["addrs"]:
                addr = state["addrs"][state["n"] % len(state["addrs"])]
                state["n"] += 1
                resp.answer.append(dns.rrset.from_text(name, state["ttl"], "IN", "A", addr))
            else:
                resp.set_rcode(dns.rcode.NXDOMAIN)
            if state["decoys"]:
                sock.sendto(b"\x00garbage", peer)
                other = dns.message.make_response(q)
                other.id = (q.id + 1) % 65536
                other.answer.append(dns.rrset.from_text(name, 1, "IN", "A", "192.0.2.66"))
                sock.sendto(other.to_wire(), peer)
            sock.sendto(resp.to_wire(), peer)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield int(sock.getsockname()[1]), state
    finally:
        stop.set()
        t.join(2)
        sock.close()
