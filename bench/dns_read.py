"""(i) the observer's DNS read: CPU per read, one socket per read against one per query (issue 18).

A real UDP DNS server (dnspython, in a subprocess, so that its CPU is not counted) answers
A records round robin, as a weighted GSLB does. The benchmark process reads it in
alternating rounds, side by side on the same machine load:

- **per query**: the former read, ``asyncio.gather`` of 16 ``dns.asyncquery.udp`` calls (each
  opens, uses and closes its own datagram endpoint);
- **per read**: :meth:`gameday.observers.sources.UdpDns.read` (one endpoint for the 16 samples,
  answers matched by message id).

Figure: the process's CPU (``time.process_time``) per read, and its ratio per-read/per-query,
taken per round. A drill's observer reads DNS at 10 Hz, so CPU ms per read x 10 is the share
of a core it costs.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import dns.asyncquery
import dns.message
import dns.rdatatype
from common import BenchResult, fmt, md_table, median

from gameday.observers.sources import UdpDns

SERVER = r"""
import socket, sys
import dns.message, dns.rrset
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
n = 0
while True:
    data, peer = sock.recvfrom(4096)
    q = dns.message.from_wire(data)
    resp = dns.message.make_response(q)
    resp.answer.append(dns.rrset.from_text(q.question[0].name, 5, "IN", "A", f"127.0.{1 + n % 3}.1"))
    n += 1
    sock.sendto(resp.to_wire(), peer)
"""

FQDN = "app.gameday.test."
SAMPLES = 16


async def _per_query(port: int, reads: int) -> int:
    answered = 0
    for _ in range(reads):
        q = dns.message.make_query(FQDN, dns.rdatatype.A)
        res = await asyncio.gather(*[dns.asyncquery.udp(q, "127.0.0.1", port=port, timeout=0.5)
                                     for _ in range(SAMPLES)], return_exceptions=True)
        answered += sum(not isinstance(r, BaseException) for r in res)
    return answered


async def _per_read(port: int, reads: int) -> int:
    src = UdpDns(server="127.0.0.1", port=port, fqdn=FQDN, samples=SAMPLES)
    answered = 0
    for _ in range(reads):
        r = await src.read()
        answered += len(r.addresses)
    return answered


def run(quick: bool) -> BenchResult:
    rounds, reads = (3, 100) if quick else (7, 200)
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        cpu: dict[str, list[float]] = {"per query": [], "per read": []}
        answered: dict[str, int] = {"per query": 0, "per read": 0}
        ratios: list[float] = []
        for _ in range(rounds):
            for name, fn in (("per query", _per_query), ("per read", _per_read)):
                c0 = time.process_time()
                answered[name] += asyncio.run(fn(port, reads))
                cpu[name].append((time.process_time() - c0) / reads * 1000)
            ratios.append(cpu["per read"][-1] / cpu["per query"][-1])
    finally:
        server.kill()
        server.wait(10)
    rows = [[name, f"{len(v)} x {reads}", fmt(median(v), 2), fmt(min(v), 2), fmt(max(v), 2),
             fmt(median(v) * 10 / 10, 1, " %"), f"{answered[name]} / {len(v) * reads * SAMPLES}"]
            for name, v in cpu.items()]
    table = md_table(["read", "rounds x reads", "CPU ms/read (median)", "min", "max",
                      "share of a core at 10 Hz", "answers / queries"], rows)
    ratio = f"per read / per query, median of per-round ratios: {median(ratios):.2f} (rounds: " \
            + ", ".join(f"{r:.2f}" for r in ratios) + ")"
    return BenchResult("dns_read", "(i) DNS read CPU: one socket per read vs one per query",
                       data={"cpu_ms_per_read": cpu, "answered": answered, "ratios": ratios, "reads": reads,
                             "samples": SAMPLES},
                       tables=[table, ratio])
