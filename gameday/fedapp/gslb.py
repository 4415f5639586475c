"""The global traffic manager: an authoritative DNS server for the federation's zone.

Served on ``spec.gslb_dns`` over UDP and TCP (RFC 1035 2-byte length framing, several
queries per connection, idle connections closed after :data:`TCP_IDLE_TIMEOUT`).
dnspython is used for the wire format only; the server is plain asyncio.

Answers (zone ``Z = spec.topology.zone``, service name ``S = <service>.Z``)
-------------------------------------------------------------------------------
``S A`` (and ``S ANY``)
    Exactly ONE A record: the gateway address of one *healthy* region, chosen by
    weighted random among the healthy regions with their effective weights (R8, the
    80/20 style of article 001). TTL ``timing.dns_ttl``, AA set. Because the choice is
    made among the healthy regions only, a failed region's weight is redistributed to
    the healthy regions in proportion to their weights: with weights 50/30/20 and the
    first region down, the others get 30/50 = 60 % and 20/50 = 40 %.
``Z SOA`` / ``Z NS`` / ``ns1.Z A``
    SOA ``ns1.Z. hostmaster.Z.`` with serial = the control-plane version the GSLB routes
    by (1 while none), NS ``ns1.Z.`` with glue A 127.0.0.1, and ``ns1.Z`` A 127.0.0.1.
Other names and types
    A name in the zone that does not exist: NXDOMAIN with the SOA in the authority
    section. A name that exists with another type (e.g. ``S AAAA``): NOERROR/NODATA with
    the SOA. Names outside the zone, classes other than IN/ANY, zone transfers: REFUSED.
    Unparseable packets: FORMERR when the 2-byte id can be read, else dropped; packets
    with the QR bit set (responses) are dropped (no reflection loops). More or fewer
    than one question: FORMERR. Opcode other than QUERY: NOTIMP. EDNS version > 0:
    BADVERS. A UDP answer larger than the client's limit (512 or its EDNS size) is sent
    truncated (TC) so the client retries over TCP.

No healthy region: fail open
    If the GSLB considers no region healthy it answers as if every configured region
    were healthy (weighted random by static weight), logs ``gslb_fail_open`` once on
    entering and leaving that state and counts the answers. This is what Route 53
    does when every record of a group fails its health check, and F5/NS1-style GSLBs
    offer as the last-resort pool: an empty answer or NXDOMAIN would take the service
    down for everyone (and be negatively cached), while a wrong "all down" view -
    most often the *checker's* own network - is far more likely than every region
    being down at once.

Health of a region
------------------
``healthy = probe_healthy and cp_routable``:

* ``probe_healthy``: the GSLB's own active probes of ``GET <gateway>/readyz`` every
  ``timing.probe_interval`` (fixed delay, :func:`common.every`), timeout
  ``timing.probe_timeout``; 200 is a success, anything else (status, timeout, refused)
  a failure. The first probe decides the initial state; afterwards a healthy region
  is removed after ``timing.fall`` consecutive failures and re-admitted after
  ``timing.rise`` consecutive successes (R2: a 1-2 probe blip moves nothing).
* ``cp_routable``: the control plane's view, :func:`snapshot.region_routable` on the
  replica a :class:`Follower` (node ``gslb``) keeps current. While the control plane has
  never been heard (replica version 0) this is ``None`` and the probes alone decide.
  When the control plane or the bus goes down later, the last snapshot keeps being
  used (R1).

Weight ramp (R10): a region's first admission is at full weight (start-up, no ramp).
Every later admission (it was unhealthy and is healthy again) starts a linear ramp:
``effective_weight = weight * min(1, elapsed / timing.ramp_seconds)``. If every healthy
region is at effective weight 0 (a ramp just began and nothing else is healthy) the
static weights of the healthy regions are used, so a healthy region is never starved.

HTTP (``spec.gslb_http``, the skeleton of :mod:`gameday.fedapp.skeleton`)
------------------------------------------------------------------------------
``/livez``; ``/readyz`` (200 once the first probe round is done and DNS is bound, and
while no readiness fault is set);
Batches: with ``timing.gslb_delay`` > 0 the answers follow the health state as it stood at the
latest batch, every ``gslb_delay`` s from start-up (a GSLB that pushes a zone or polls a health
store does the same), so a decision reaches the answers 0 to ``gslb_delay`` s after it is made;
``/status`` shows each region's ``answered`` beside ``healthy``.

Defects for negative controls (``topology.defects``): ``gslb_answer_lag`` keeps answering with
a region that many seconds after its health state took it out; ``probe_interval_factor``
probes every ``factor x probe_interval`` (slower than the topology states).

``/status`` JSON (``version``, ``regions`` with per-region ``probe_healthy``,
``cp_routable``, ``healthy``, ``weight``, ``effective_weight``, ``ramp_progress``,
``consecutive_fail``, ``consecutive_ok``, ``probes_total``, ``probe_timeouts``; ``answers_total``; ``fail_open``; the
follower's view); ``/metrics``; ``POST /admin/fault`` with ``{"ignore_weights": bool}``
(a broken GSLB that answers uniformly among healthy regions: the negative control for
R8), the follower's hooks ``drop_broadcasts`` / ``never_refresh`` and the readiness hooks;
any other key is refused (400).

Log lines: ``gslb_region_health`` whenever a region's ``probe_healthy``,
``cp_routable`` or ``healthy`` changes, with the reason; ``gslb_fail_open`` /
``gslb_fail_open_cleared``; ``gslb_fault``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
import time
from dataclasses import dataclass, field
from typing import Any, cast

import aiohttp
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from gameday.fedapp.common import Histogram, JsonLog, ReadyzFault, bind_host, connect_nats, every, render_metrics
from gameday.fedapp.follower import Follower
from gameday.fedapp.skeleton import READYZ_KEYS, HttpComponent, start_http
from gameday.fedapp.snapshot import region_routable
from gameday.fedapp.spec import FederationSpec, RegionSpec
from gameday.fedapp.wire import Json

TCP_IDLE_TIMEOUT = 3.0
"""Seconds a TCP connection may sit idle (between or inside messages) before it is closed."""
TCP_MAX_CONNECTIONS = 256
"""Concurrent TCP connections; further ones are closed at once."""
NS_ADDRESS = "127.0.0.1"
"""Address of ``ns1.<zone>`` (the GSLB itself)."""
SOA_TIMERS = "60 10 3600"
"""SOA refresh, retry, expire (seconds); the minimum (negative TTL) is ``timing.dns_ttl``."""

_QR = 0x8000
_HEADER = struct.Struct("!HHHHHH")


@dataclass
class RegionState:
    """What the GSLB knows about one region."""

    spec: RegionSpec
    probe_url: str
    probe_healthy: bool | None = None
    """None until the first probe answered (or failed)."""
    consecutive_ok: int = 0
    consecutive_fail: int = 0
    last_error: str = ""
    probes_total: int = 0
    probe_timeouts: int = 0
    """Probes that timed out (no answer within ``probe_timeout``): against a gateway nobody broke,
    on loopback, that is this process or the gateway starved of CPU (gameday.verdicts.harness)."""
    cp_routable: bool | None = None
    healthy: bool = False
    ever_admitted: bool = False
    admitted_routable: bool = False
    """Admitted once while the control plane counted it routable: in service. An admission on the
    first probe before the control plane's view arrived does not count: at start-up the view
    can take the region out again (its route not yet published), and its admission when the
    route arrives is still the first, at full weight, not a re-admission that ramps (R10)."""
    ramp_from: float | None = None
    """Monotonic time the current ramp started; None = full weight."""
    answers_total: int = 0
    changed_at: float = field(default_factory=time.monotonic)
    changes: list[tuple[float, bool]] = field(default_factory=list)
    """The latest changes of ``healthy`` (monotonic time, new value): what a batch saw."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def weight(self) -> float:
        return self.spec.weight


class Gslb(HttpComponent):
    """The GSLB's state and its DNS logic (no sockets: :meth:`handle_wire` is pure-ish)."""

    fault_event = "gslb_fault"
    fault_keys = frozenset({"ignore_weights", "drop_broadcasts", "never_refresh"})

    def __init__(self, spec: FederationSpec, log: JsonLog, rng: random.Random | None = None) -> None:
        self.spec = spec
        self.log = log
        self.rng = rng or random.Random()
        t = spec.topology.timing
        self.ttl = t.dns_ttl
        self.ramp_seconds = t.ramp_seconds
        self.gslb_delay = t.gslb_delay
        """Seconds between the batches that apply health decisions to the answers (0: at once)."""
        self.batch_epoch = time.monotonic()
        self.rise = t.rise
        self.fall = t.fall
        self.zone = dns.name.from_text(spec.topology.zone)
        self.service = dns.name.from_text(spec.topology.service, origin=self.zone)
        self.ns1 = dns.name.from_text("ns1", origin=self.zone)
        self.regions: dict[str, RegionState] = {
            r.name: RegionState(spec=r, probe_url=f"http://{r.gateway.host}:{r.gateway.port}/readyz")
            for r in spec.regions
        }
        self._a_rdata = {
            r.name: dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.A, r.gateway.host)
            for r in spec.regions
        }
        self._ns_rdata = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.NS, self.ns1.to_text())
        self._ns_a_rdata = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.A, NS_ADDRESS)
        self.follower = Follower(
            run_id=spec.run_id,
            node="gslb",
            regions=[r.name for r in spec.regions],
            stale_after=t.stale_after,
            log=log,
            on_change=self._on_cp_change,
        )
        self.ignore_weights = spec.topology.defects.gslb_ignore_weights  # a negative-control defect
        self.answer_lag = spec.topology.defects.gslb_answer_lag
        """Seconds a region taken out keeps being answered (a negative-control defect; 0 normally)."""
        self.fail_open = False
        self.fail_open_answers = 0
        self.queries: dict[str, int] = {}
        self.dropped_total = 0
        self.errors_total = 0
        self.tcp_connections = 0
        self.tcp_rejected = 0
        self.latency = Histogram()
        self.ready = False
        self.ready_fault = ReadyzFault()

    # -- health ------------------------------------------------------------------------
    @property
    def cp_version(self) -> int:
        return self.follower.replica.version

    def record_probe(self, name: str, ok: bool, error: str = "") -> None:
        """Apply one probe result with the rise/fall thresholds."""
        r = self.regions[name]
        r.probes_total += 1
        if ok:
            r.consecutive_ok += 1
            r.consecutive_fail = 0
        else:
            r.consecutive_fail += 1
            r.consecutive_ok = 0
            r.last_error = error
            r.probe_timeouts += error == "timeout"
        if r.probe_healthy is None:
            new: bool = ok
            reason = "first probe succeeded" if ok else f"first probe failed: {error}"
        elif r.probe_healthy and r.consecutive_fail >= self.fall:
            new, reason = False, f"probe: {r.consecutive_fail} consecutive failures (last: {error})"
        elif not r.probe_healthy and r.consecutive_ok >= self.rise:
            new, reason = True, f"probe: {r.consecutive_ok} consecutive successes"
        else:
            return
        if new == r.probe_healthy:
            return
        r.probe_healthy = new
        self._recompute(r, reason)

    def _on_cp_change(self) -> None:
        for r in self.regions.values():
            self._recompute(r, f"control plane version {self.cp_version}")

    def _recompute(self, r: RegionState, reason: str) -> None:
        before = (r.probe_healthy, r.cp_routable, r.healthy)
        entries = self.follower.replica.entries
        r.cp_routable = region_routable(entries, r.name) if self.cp_version > 0 else None
        healthy = bool(r.probe_healthy) and r.cp_routable is not False
        now = time.monotonic()
        if healthy and not r.healthy:
            # First admission at full weight; every re-admission ramps (R10), unless the defect.
            # With the control plane's view, "admitted before" means admitted while routable.
            returning = r.admitted_routable if r.cp_routable else r.ever_admitted
            ramps = returning and self.ramp_seconds > 0 and not self.spec.topology.defects.gslb_no_ramp
            r.ramp_from = now if ramps else None
            r.ever_admitted = True
            r.admitted_routable = r.admitted_routable or bool(r.cp_routable)
        elif not healthy:
            r.ramp_from = None
        r.healthy = healthy
        if (r.probe_healthy, r.cp_routable, r.healthy) == before:
            return
        if r.healthy != before[2]:
            r.changed_at = now
            r.changes = [*r.changes[-15:], (now, r.healthy)]
        if before[1] != r.cp_routable:
            view = {True: "routable", False: "not routable", None: "no view"}[r.cp_routable]
            reason = f"{reason}; control plane: region {view}"
        self.log("gslb_region_health", region=r.name, healthy=r.healthy, probe_healthy=r.probe_healthy,
                 cp_routable=r.cp_routable, reason=reason, version=self.cp_version,
                 ramp=r.ramp_from is not None, consecutive_fail=r.consecutive_fail,
                 consecutive_ok=r.consecutive_ok)
        self._check_fail_open()

    def _check_fail_open(self) -> None:
        known = all(r.probe_healthy is not None for r in self.regions.values())
        fail_open = known and not any(r.healthy for r in self.regions.values())
        if fail_open and not self.fail_open:
            self.log("gslb_fail_open", reason="no healthy region: answering with every configured region",
                     regions={n: {"probe_healthy": r.probe_healthy, "cp_routable": r.cp_routable}
                              for n, r in self.regions.items()})
        elif not fail_open and self.fail_open:
            self.log("gslb_fail_open_cleared", healthy=[n for n, r in self.regions.items() if r.healthy])
        self.fail_open = fail_open

    def ramp_progress(self, r: RegionState, now: float) -> float:
        if not r.healthy:
            return 0.0
        if r.ramp_from is None or self.ramp_seconds <= 0:
            return 1.0
        p = (now - r.ramp_from) / self.ramp_seconds
        if p >= 1.0:
            r.ramp_from = None
            return 1.0
        return max(0.0, p)

    def effective_weight(self, r: RegionState, now: float) -> float:
        return r.weight * self.ramp_progress(r, now) if r.healthy else 0.0

    def _lagging(self, r: RegionState, now: float) -> bool:
        """A region the health state took out less than ``answer_lag`` seconds ago (the defect)."""
        return self.answer_lag > 0 and r.ever_admitted and not r.healthy and now - r.changed_at < self.answer_lag

    def answered(self, r: RegionState, now: float) -> bool:
        """Whether the answers count *r* healthy at *now*: its health at the latest batch (every
        ``gslb_delay`` s from start-up; live where that is 0), or lagging behind (the defect)."""
        if self.gslb_delay <= 0:
            published = r.healthy
        else:
            batch = self.batch_epoch + (now - self.batch_epoch) // self.gslb_delay * self.gslb_delay
            seen = [healthy for t, healthy in r.changes if t <= batch]
            published = seen[-1] if seen else (not r.changes[0][1] if r.changes else r.healthy)
        return published or self._lagging(r, now)

    def pick(self, now: float | None = None) -> RegionState:
        """Choose the region for one answer (see the module docstring)."""
        now = time.monotonic() if now is None else now
        healthy = [r for r in self.regions.values() if self.answered(r, now)]
        if not healthy:
            self.fail_open_answers += 1
            pool = list(self.regions.values())
            weights = [r.weight for r in pool]
        else:
            pool = healthy
            # (a lagging region, the defect, keeps its full weight)
            weights = [self.effective_weight(r, now) if r.healthy else r.weight for r in pool]
            if sum(weights) <= 0:
                weights = [r.weight for r in pool]
        if self.ignore_weights:
            return self.rng.choice(pool)
        return self.rng.choices(pool, weights=weights)[0]

    # -- DNS ---------------------------------------------------------------------------
    def _count(self, rcode: str) -> None:
        self.queries[rcode] = self.queries.get(rcode, 0) + 1

    def _soa(self) -> dns.rrset.RRset:
        serial = max(1, self.cp_version) % (2**32)
        rd = dns.rdata.from_text(
            dns.rdataclass.IN, dns.rdatatype.SOA,
            f"{self.ns1} hostmaster.{self.zone} {serial} {SOA_TIMERS} {self.ttl}",
        )
        return dns.rrset.from_rdata(self.zone, self.ttl, rd)

    def _ns(self) -> dns.rrset.RRset:
        return dns.rrset.from_rdata(self.zone, self.ttl, self._ns_rdata)

    def _ns_glue(self, owner: dns.name.Name | None = None) -> dns.rrset.RRset:
        return dns.rrset.from_rdata(owner or self.ns1, self.ttl, self._ns_a_rdata)

    def answer(self, query: dns.message.Message) -> dns.message.Message:
        """The response to a parsed query with exactly one question and opcode QUERY."""
        resp = dns.message.make_response(query)
        q = query.question[0]
        qname, qtype, qclass = q.name, q.rdtype, q.rdclass
        if query.edns > 0:
            resp.use_edns(0)
            resp.set_rcode(dns.rcode.BADVERS)
            return resp
        if qclass not in (dns.rdataclass.IN, dns.rdataclass.ANY) or not qname.is_subdomain(self.zone):
            resp.set_rcode(dns.rcode.REFUSED)
            return resp
        if qtype in (dns.rdatatype.AXFR, dns.rdatatype.IXFR):
            resp.set_rcode(dns.rcode.REFUSED)
            return resp
        resp.flags |= dns.flags.AA
        any_type = qtype == dns.rdatatype.ANY
        if qname == self.service:
            if qtype == dns.rdatatype.A or any_type:
                r = self.pick()
                r.answers_total += 1
                resp.answer.append(dns.rrset.from_rdata(qname, self.ttl, self._a_rdata[r.name]))
            else:
                resp.authority.append(self._soa())
        elif qname == self.ns1:
            if qtype == dns.rdatatype.A or any_type:
                resp.answer.append(self._ns_glue(qname))
            else:
                resp.authority.append(self._soa())
        elif qname == self.zone:
            if qtype == dns.rdatatype.SOA or any_type:
                resp.answer.append(self._soa())
                if any_type:
                    resp.answer.append(self._ns())
                else:
                    resp.authority.append(self._ns())
                resp.additional.append(self._ns_glue())
            elif qtype == dns.rdatatype.NS:
                resp.answer.append(self._ns())
                resp.additional.append(self._ns_glue())
            else:
                resp.authority.append(self._soa())
        else:
            resp.set_rcode(dns.rcode.NXDOMAIN)
            resp.authority.append(self._soa())
        return resp

    def handle_wire(self, data: bytes, *, tcp: bool) -> bytes | None:
        """Answer one DNS message from the wire; None means drop it. Never raises."""
        t0 = time.perf_counter()
        try:
            out = self._handle(data, tcp=tcp)
        except Exception as exc:  # noqa: BLE001  (a server must survive any one bad packet)
            self.errors_total += 1
            self.log("gslb_internal_error", error=repr(exc)[:300], size=len(data))
            out = _header_only(data, dns.rcode.SERVFAIL)
            self._count("SERVFAIL" if out is not None else "DROPPED")
        self.latency.observe(time.perf_counter() - t0)
        return out

    def _handle(self, data: bytes, *, tcp: bool) -> bytes | None:
        if len(data) < 2 or (len(data) >= 3 and data[2] & 0x80):
            self.dropped_total += 1
            return None
        try:
            query = dns.message.from_wire(data)
        except Exception:  # noqa: BLE001  (dnspython raises many types on hostile input: all are FORMERR)
            self._count("FORMERR")
            return _header_only(data, dns.rcode.FORMERR)
        if query.opcode() != dns.opcode.QUERY:
            self._count("NOTIMP")
            return _header_only(data, dns.rcode.NOTIMP)
        if len(query.question) != 1:
            self._count("FORMERR")
            return _header_only(data, dns.rcode.FORMERR)
        resp = self.answer(query)
        limit = 65535 if tcp else max(512, query.payload if query.edns >= 0 else 512)
        try:
            wire = resp.to_wire(max_size=limit)
        except dns.exception.TooBig:
            resp.answer.clear()
            resp.authority.clear()
            resp.additional.clear()
            resp.flags |= dns.flags.TC
            wire = resp.to_wire(max_size=limit)
        self._count(dns.rcode.to_text(resp.rcode()))
        return wire

    # -- reporting ---------------------------------------------------------------------
    def status(self) -> Json:
        now = time.monotonic()
        regions: dict[str, Json] = {}
        for n, r in self.regions.items():
            regions[n] = {
                "probe_healthy": r.probe_healthy,
                "cp_routable": r.cp_routable,
                "healthy": r.healthy,
                "answered": self.answered(r, now),
                "weight": r.weight,
                "effective_weight": round(self.effective_weight(r, now), 4),
                "ramp_progress": round(self.ramp_progress(r, now), 4),
                "consecutive_fail": r.consecutive_fail,
                "consecutive_ok": r.consecutive_ok,
                "probes_total": r.probes_total,
                "probe_timeouts": r.probe_timeouts,
                "last_error": r.last_error,
                "gateway": r.spec.gateway.host,
                "since_change_s": round(now - r.changed_at, 3),
            }
        fs = self.follower.status()
        return {
            "component": "gslb",
            "version": self.cp_version,
            "cp_heard": self.cp_version > 0,
            "regions": regions,
            "answering_regions": [n for n, r in self.regions.items() if r.healthy],
            "routable_regions": fs["routable_regions"],
            "answers_total": {n: r.answers_total for n, r in self.regions.items()},
            "queries_total": dict(self.queries),
            "dropped_total": self.dropped_total,
            "fail_open": self.fail_open,
            "fail_open_answers_total": self.fail_open_answers,
            "ignore_weights": self.ignore_weights,
            "ttl": self.ttl,
            "query_latency_p50_ms": round(self.latency.quantile(0.5) * 1000, 3) if self.latency.n else None,
            "query_latency_p99_ms": round(self.latency.quantile(0.99) * 1000, 3) if self.latency.n else None,
            "tcp_connections": self.tcp_connections,
            "follower": fs,
        }

    def metrics(self) -> str:
        now = time.monotonic()
        samples: list[tuple[str, str, float]] = [
            ("gameday_gslb_queries_total", f'rcode="{rc}"', n) for rc, n in sorted(self.queries.items())
        ]
        samples += [("gameday_gslb_answers_total", f'region="{n}"', r.answers_total)
                    for n, r in self.regions.items()]
        samples += [("gameday_gslb_region_healthy", f'region="{n}"', 1 if r.healthy else 0)
                    for n, r in self.regions.items()]
        samples += [("gameday_gslb_effective_weight", f'region="{n}"',
                     round(self.effective_weight(r, now), 4)) for n, r in self.regions.items()]
        samples += [
            ("gameday_gslb_dropped_total", "", self.dropped_total),
            ("gameday_gslb_fail_open", "", 1 if self.fail_open else 0),
            ("gameday_gslb_fail_open_answers_total", "", self.fail_open_answers),
            ("gameday_gslb_ignore_weights", "", 1 if self.ignore_weights else 0),
            ("gameday_gslb_internal_errors_total", "", self.errors_total),
            ("gameday_gslb_tcp_connections", "", self.tcp_connections),
        ]
        samples += self.follower.metric_samples('node="gslb"')
        help_text = {
            "gameday_gslb_queries_total": "DNS messages answered, by response code",
            "gameday_gslb_answers_total": "A records handed out for the service name, by region",
            "gameday_gslb_region_healthy": "1 if the GSLB answers with the region",
            "gameday_gslb_effective_weight": "Region weight after health and the re-admission ramp",
            "gameday_gslb_query_seconds": "Time to build one DNS answer",
        }
        return render_metrics(samples, help_text, {"gameday_gslb_query_seconds": self.latency})


    # -- HTTP (the skeleton's hooks) ---------------------------------------------------------
    def unready_reason(self) -> str | None:
        return None if self.ready else "starting"

    def apply_fault(self, body: Json) -> None:
        unknown = sorted(set(body) - self.fault_keys - READYZ_KEYS)
        if unknown:
            raise ValueError(f"unknown fault keys {unknown}; expected some of {sorted(self.fault_keys | {'readyz'})}")
        for k in sorted(self.fault_keys & set(body)):
            if not isinstance(body[k], bool):
                raise ValueError(f"{k}: got {body[k]!r}, expected true or false")  # noqa: TRY004  (a bad request value: 400)
        if "ignore_weights" in body:
            self.ignore_weights = body["ignore_weights"]
        self.follower.configure(body)

    def fault_state(self) -> Json:
        return {"ignore_weights": self.ignore_weights, "follower": self.follower.status()["faults"],
                "readyz": self.ready_fault.describe()}

def _header_only(data: bytes, rcode: int) -> bytes | None:
    """A response carrying only a header: the query's id, opcode and RD, and *rcode*."""
    if len(data) < 2:
        return None
    qid = int.from_bytes(data[:2], "big")
    flags_in = int.from_bytes(data[2:4], "big") if len(data) >= 4 else 0
    flags = _QR | (flags_in & 0x7800) | (flags_in & 0x0100) | (rcode & 0xF)
    return _HEADER.pack(qid, flags, 0, 0, 0, 0)


class _UdpProtocol(asyncio.DatagramProtocol):
    def __init__(self, gslb: Gslb) -> None:
        self.gslb = gslb
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        out = self.gslb.handle_wire(data, tcp=False)
        if out is not None and self.transport is not None:
            self.transport.sendto(out, addr)

    def error_received(self, exc: Exception) -> None:
        self.gslb.log("gslb_udp_error", error=repr(exc))


async def _tcp_client(gslb: Gslb, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    if gslb.tcp_connections >= TCP_MAX_CONNECTIONS:
        gslb.tcp_rejected += 1
        writer.close()
        return
    gslb.tcp_connections += 1
    try:
        while True:
            try:
                head = await asyncio.wait_for(reader.readexactly(2), TCP_IDLE_TIMEOUT)
                size = int.from_bytes(head, "big")
                if size == 0:
                    break
                data = await asyncio.wait_for(reader.readexactly(size), TCP_IDLE_TIMEOUT)
            except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                break
            out = gslb.handle_wire(data, tcp=True)
            if out is None:
                continue
            writer.write(len(out).to_bytes(2, "big") + out)
            try:
                await asyncio.wait_for(writer.drain(), TCP_IDLE_TIMEOUT)
            except (TimeoutError, ConnectionError):
                break
    finally:
        gslb.tcp_connections -= 1
        writer.close()
        with contextlib.suppress(ConnectionError, TimeoutError):
            await asyncio.wait_for(writer.wait_closed(), 1.0)


async def _probe(gslb: Gslb, session: aiohttp.ClientSession, name: str) -> None:
    r = gslb.regions[name]
    try:
        async with session.get(r.probe_url, allow_redirects=False) as resp:
            await resp.read()
            ok, err = resp.status == 200, f"HTTP {resp.status}"
    except TimeoutError:
        ok, err = False, "timeout"
    except (aiohttp.ClientError, OSError) as exc:
        ok, err = False, type(exc).__name__
    gslb.record_probe(name, ok, "" if ok else err)


async def _follow(gslb: Gslb, spec: FederationSpec, stop: asyncio.Event) -> None:
    nc = await connect_nats(spec.nats_url, "gslb", gslb.log)
    try:
        await gslb.follower.run(nc, stop)
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


async def serve(spec: FederationSpec, region: str | None, instance: str | None, stop: asyncio.Event) -> None:
    """Run the GSLB until *stop* is set (``region`` and ``instance`` are unused)."""
    del region, instance
    log = JsonLog("gslb")
    gslb = Gslb(spec, log)
    t = spec.topology.timing
    runner = await start_http(gslb, spec.gslb_http.host, spec.gslb_http.port, log, spec.admin.get("gslb"))
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True, limit=0),
        timeout=aiohttp.ClientTimeout(total=t.probe_timeout),
    )
    tasks: list[asyncio.Task[None]] = [asyncio.create_task(_follow(gslb, spec, stop))]
    transport: asyncio.DatagramTransport | None = None
    server: asyncio.Server | None = None
    try:
        # The first probe round decides every region's initial state before any answer.
        await asyncio.gather(*(_probe(gslb, session, n) for n in gslb.regions))

        # (defects.probe_interval_factor: a negative control's GSLB probing slower than stated)
        interval = t.probe_interval * spec.topology.defects.probe_interval_factor

        async def prober(name: str) -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)

            async def once() -> None:
                await _probe(gslb, session, name)

            await every(interval, once, stop)

        tasks += [asyncio.create_task(prober(n)) for n in gslb.regions]
        loop = asyncio.get_running_loop()
        dns_ep = spec.gslb_dns
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _UdpProtocol(gslb), local_addr=(bind_host(dns_ep.host), dns_ep.port)
        )
        server = await asyncio.start_server(
            lambda r, w: _tcp_client(gslb, r, w), bind_host(dns_ep.host), dns_ep.port, reuse_address=True,
            backlog=256
        )
        gslb.ready = True
        log("gslb_started", dns=f"{dns_ep.host}:{dns_ep.port}", http=spec.gslb_http.url,
            zone=spec.topology.zone, service=spec.topology.fqdn, ttl=t.dns_ttl,
            regions={n: {"weight": r.weight, "healthy": r.healthy} for n, r in gslb.regions.items()})
        await stop.wait()
    finally:
        gslb.ready = False
        if transport is not None:
            transport.close()
        if server is not None:
            server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await session.close()
        await runner.cleanup()
        log("gslb_stopped")
