"""Role *DNS*: what the GSLB answers clients (:class:`DnsSource`; built-in: :class:`UdpDns`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import dns.exception
import dns.message
import dns.rdatatype

from gameday.errors import ConfigError


# -- the reading ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DnsReading:
    """What clients are answered, over all the samples of one read."""

    ok: bool
    """At least one query was answered (an empty answer counts: the server spoke)."""
    addresses: tuple[str, ...] = ()
    """Every address of every answered query, repeated across samples (for answer shares)."""
    ttl: int | None = None
    """TTL of the last answer's record set, seconds."""


# -- the seam -------------------------------------------------------------------------------------
@runtime_checkable
class DnsSource(Protocol):
    """What the GSLB answers clients."""

    async def read(self) -> DnsReading: ...

    def describe(self) -> str: ...


# -- the built-in ---------------------------------------------------------------------------------
class UdpDns:
    """The GSLB's answers to *fqdn* over UDP (dnspython), *samples* queries per read.

    Several samples per read because a weighted GSLB answers one address at random: a region
    with a 20 % weight needs several queries to be seen.
    """

    def __init__(self, *, server: str, port: int = 53, fqdn: str, rdtype: str = "A", samples: int = 16,
                 timeout: float = 0.5) -> None:
        try:
            self._rdtype = dns.rdatatype.from_text(rdtype)
        except dns.rdatatype.UnknownRdatatype as exc:
            raise ConfigError(f"DNS source: record type {rdtype!r} is not one dnspython knows "
                              f"(expected A or AAAA)", field="rdtype") from exc
        if self._rdtype not in (dns.rdatatype.A, dns.rdatatype.AAAA):
            raise ConfigError(f"DNS source: record type {rdtype!r} carries no address (expected A or AAAA)",
                              field="rdtype")
        if samples < 1:
            raise ConfigError(f"DNS source: samples {samples} must be at least 1", field="samples")
        self.server = server
        self.port = port
        self.fqdn = fqdn if fqdn.endswith(".") else fqdn + "."
        self.rdtype = rdtype.upper()
        self.samples = samples
        self.timeout = timeout
        self.last_error: str | None = None

    async def read(self) -> DnsReading:
        # One socket per read, not one per query: the samples go out together and their
        # answers are matched by message id (dnspython's query.udp opened and closed 16
        # endpoints per read, at 10 Hz a fifth of the observer's CPU in a drill).
        queries: dict[int, dns.message.Message] = {}
        while len(queries) < self.samples:
            query = dns.message.make_query(self.fqdn, self._rdtype)
            queries.setdefault(query.id, query)
        loop = asyncio.get_running_loop()
        answers: dict[int, asyncio.Future[dns.message.Message]] = {i: loop.create_future() for i in queries}
        try:
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _DnsAnswers(queries, answers), remote_addr=(self.server, self.port))
        except OSError as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            return DnsReading(False, (), None)
        try:
            for q in queries.values():
                transport.sendto(q.to_wire())
            await asyncio.wait(answers.values(), timeout=self.timeout)
        finally:
            transport.close()
        addresses: list[str] = []
        ttl = None
        ok = False
        for f in answers.values():
            if not f.done():
                f.cancel()
                self.last_error = f"Timeout: no answer within {self.timeout} s"
                continue
            if (err := f.exception()) is not None:
                self.last_error = f"{type(err).__name__}: {err}"
                continue
            ok = True
            for rrset in f.result().answer:
                if rrset.rdtype == self._rdtype:
                    ttl = rrset.ttl
                    addresses += [rr.address for rr in rrset]
        if ok:
            self.last_error = None
        return DnsReading(ok, tuple(addresses), ttl)

    def describe(self) -> str:
        return f"DNS {self.rdtype} {self.fqdn} at {self.server}:{self.port} (UDP, {self.samples} queries per read)"


class _DnsAnswers(asyncio.DatagramProtocol):
    """One read's socket: each answer resolves the future of the query it answers."""

    def __init__(self, queries: dict[int, dns.message.Message],
                 answers: dict[int, asyncio.Future[dns.message.Message]]) -> None:
        self._queries = queries
        self._answers = answers

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        try:
            msg = dns.message.from_wire(data)
        except dns.exception.DNSException:
            return  # not an answer to us (the socket is connected, so from the server): ignore it
        fut = self._answers.get(msg.id)
        if fut is not None and not fut.done() and self._queries[msg.id].is_response(msg):
            fut.set_result(msg)

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable and the like: every query still waiting gets the error.
        for fut in self._answers.values():
            if not fut.done():
                fut.set_exception(exc)
