"""Ask the GSLB many times, quickly: each answer stamped with the monotonic time it arrived.

Statistical checks of the weights (R8, R10) need thousands of answers; one query at a
time with a fresh socket each (dnspython's ``dns.query.udp``) takes several ms per query
on a busy machine. Here one UDP socket keeps up to *window* queries in flight, matched
by message id; queries unanswered within *timeout* are sent again, and the whole run is
bounded in time.
"""

from __future__ import annotations

import itertools
import select
import socket
import time
from dataclasses import dataclass

import dns.exception
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype


@dataclass(frozen=True)
class Answer:
    """One GSLB answer for the service name."""

    t: float
    """``time.monotonic()`` when the answer arrived."""
    addresses: tuple[str, ...]
    ttl: int | None
    rcode: str
    authoritative: bool


class DnsSampleError(AssertionError):
    """The GSLB did not answer enough queries in the time allowed (a verdict, not a crash)."""


def sample(server: tuple[str, int], fqdn: str, n: int, *, window: int = 32, timeout: float = 0.5,
           deadline: float = 60.0) -> list[Answer]:
    """Send *n* A queries for *fqdn* to *server* and return the *n* answers.

    Args:
        server: the GSLB's (host, port).
        fqdn: the service name.
        n: answers wanted.
        window: queries in flight at once.
        timeout: seconds after which an unanswered query is sent again.
        deadline: seconds for the whole run.

    Raises:
        DnsSampleError: fewer than *n* answers within *deadline* (says how many came).
    """
    ids = itertools.count(1)
    pending: dict[int, float] = {}
    out: list[Answer] = []
    t0 = time.monotonic()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(server)
        sock.setblocking(False)
        while len(out) < n:
            now = time.monotonic()
            if now - t0 > deadline:
                raise DnsSampleError(f"GSLB {server[0]}:{server[1]} answered {len(out)} of {n} queries for "
                                     f"{fqdn} within {deadline:g} s")
            for qid, sent in list(pending.items()):
                if now - sent > timeout:
                    del pending[qid]  # lost (UDP): ask again under a new id
            while len(pending) < window and len(out) + len(pending) < n:
                q = dns.message.make_query(fqdn, dns.rdatatype.A)
                q.id = next(ids) % 65536
                try:
                    sock.send(q.to_wire())
                except BlockingIOError:
                    break
                pending[q.id] = time.monotonic()
            ready, _, _ = select.select([sock], [], [], timeout)
            if not ready:
                continue
            while True:
                try:
                    data = sock.recv(65535)
                except (BlockingIOError, ConnectionRefusedError):
                    break
                try:
                    msg = dns.message.from_wire(data)
                except dns.exception.DNSException:
                    continue
                if pending.pop(msg.id, None) is None:
                    continue  # a late answer to a query already re-sent
                addrs: list[str] = []
                ttl: int | None = None
                for rrset in msg.answer:
                    if rrset.rdtype == dns.rdatatype.A:
                        ttl = rrset.ttl
                        addrs += [rr.address for rr in rrset]
                out.append(Answer(time.monotonic(), tuple(addrs), ttl, dns.rcode.to_text(msg.rcode()),
                                  bool(msg.flags & dns.flags.AA)))
    return out[:n]
