"""gameday's built-in locust user: independent clients, open-model arrivals, each client
resolving the service through the GSLB and honouring the TTL.

**Open model.** Each locust user is an arrival process, not a client: requests arrive as a
Poisson process at its share of the offered rate (exponential gaps, the first one too, so no
two users start in step), and each request runs in its own greenlet, so a request hanging on a
dead gateway never delays the next arrival (a closed model's coordinated omission: a user stuck
for 1 s sends 1 request instead of 3, and the missing ones are never recorded). At most
``GAMEDAY_MAX_IN_FLIGHT`` requests per user are in flight; an arrival beyond that is *dropped*
(not sent), recorded as a drop line ``{"d": t}`` and counted apart, as k6 counts dropped
iterations.

**Independent clients.** Each user owns ``GAMEDAY_CLIENTS_PER_USER`` clients (20 users x 10 =
200 by default), and each arrival is one of them, at random: every client has its own DNS cache
and its own connection pool. A client's first answer is taken as already ``U x TTL`` old (``U``
uniform in [0, 1)), so the clients' caches expire at independent phases, as real clients'
do, not at one shared tick.

Runs only inside locust processes (never imported by pytest: locust monkey-patches
with gevent on import). Configured through the environment the harness sets:

``GAMEDAY_DNS``           GSLB ``host:port``
``GAMEDAY_FQDN``          service name, e.g. ``app.gameday.test.``
``GAMEDAY_PORT``          gateway port
``GAMEDAY_SCHEME``        ``http`` (default) or ``https``
``GAMEDAY_PATH``          request path (default ``/work``, the reference app's)
``GAMEDAY_HOST_HEADER``   Host header to send (default: none beyond the address)
``GAMEDAY_SERVED_BY``     response header naming the serving region (default ``X-Served-By``;
                          empty: the federation sets none)
``GAMEDAY_USER_RATE``     requests/s per user (constant throughput)
``GAMEDAY_RECORDS``       directory for per-process JSONL request records
``GAMEDAY_TIMEOUT``       request timeout, seconds (default 1)
``GAMEDAY_CLIENTS_PER_USER`` clients (DNS cache + connection pool) per locust user (default 10)
``GAMEDAY_MAX_IN_FLIGHT`` requests in flight per locust user beyond which arrivals are dropped (default 50)

``GAMEDAY_REMOTE_WORKERS`` set (on the master the harness starts): workers on other machines
                          connect; each is sent the configuration above and its clock is measured
``GAMEDAY_REMOTE``        set (by ``python -m gameday.load.worker``): a worker on another machine;
                          it takes its configuration from the master and sends its records there

Each request is recorded as one JSON line:
``{"t": send time (CLOCK_MONOTONIC s), "s": status (0: transport error),
"l": latency s, "r": serving region or null, "a": gateway address, "e": error,
"c": client id, "i": intended send time (the arrival), "q": 1 when it asked DNS,
"age": the answer's age s, "ttl": the answer's TTL s}``; a dropped arrival as ``{"d": t}``.
"""

from __future__ import annotations

import json
import os
import random
import socket
import time
from dataclasses import dataclass
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rdatatype
import gevent
from locust import HttpUser, events, task
from locust.clients import HttpSession

CONFIG_KEYS = ("GAMEDAY_DNS", "GAMEDAY_FQDN", "GAMEDAY_PORT", "GAMEDAY_USER_RATE", "GAMEDAY_TIMEOUT",
               "GAMEDAY_SCHEME", "GAMEDAY_PATH", "GAMEDAY_HOST_HEADER", "GAMEDAY_SERVED_BY",
               "GAMEDAY_CLIENTS_PER_USER", "GAMEDAY_MAX_IN_FLIGHT")
"""What the master sends a remote worker (its environment holds none of it)."""

_REMOTE = bool(os.environ.get("GAMEDAY_REMOTE"))
_EXPECTS_REMOTE = bool(os.environ.get("GAMEDAY_REMOTE_WORKERS"))
_RECORDS_DIR = os.environ.get("GAMEDAY_RECORDS", ".")
PINGS = 8
"""Clock round trips per remote worker; the one with the shortest round trip is kept."""


class _Config:
    """The user's configuration: from this process's environment, or what the master sent."""

    def __init__(self, env: dict[str, str]) -> None:
        self.dns_host, dns_port = env.get("GAMEDAY_DNS", "127.0.0.1:53").rsplit(":", 1)
        self.dns_port = int(dns_port)
        self.fqdn = env.get("GAMEDAY_FQDN", "app.gameday.test.")
        self.port = int(env.get("GAMEDAY_PORT", "80"))
        self.rate = float(env.get("GAMEDAY_USER_RATE", "1"))
        self.timeout = float(env.get("GAMEDAY_TIMEOUT", "1"))
        self.scheme = env.get("GAMEDAY_SCHEME", "http")
        self.path = env.get("GAMEDAY_PATH", "/work")
        host_header = env.get("GAMEDAY_HOST_HEADER", "")
        self.served_by = env.get("GAMEDAY_SERVED_BY", "X-Served-By")
        self.headers = {"Host": host_header} if host_header else {}
        self.clients_per_user = max(1, int(env.get("GAMEDAY_CLIENTS_PER_USER") or "10"))
        self.max_in_flight = max(1, int(env.get("GAMEDAY_MAX_IN_FLIGHT") or "50"))


CFG = _Config(dict(os.environ))


class _Records:
    """Buffered JSONL writer, flushed every 0.1 s so the harness sees requests promptly.

    Each flush ends with a watermark line, ``{"w": t}``: every request this process sent
    before ``t`` is in the file by then (``t`` is the send time of the oldest request still
    in flight, or the flush time). A request is recorded when it completes, up to a DNS and
    an HTTP timeout after it was sent, so the newest seconds of a file are always incomplete;
    the harness decides a window of requests only once the watermarks have passed its end.

    On a remote worker (``send`` set) a flush sends the batch to the master instead, which
    writes it on the harness's clock."""

    def __init__(self) -> None:
        self.fh: Any = None
        self.buf: list[str] = []
        self.last_flush = time.monotonic()
        self.send: Any = None
        self.in_flight: dict[int, float] = {}
        self._token = 0

    def sending(self, t: float) -> int:
        """A request sent at *t* is in flight until :meth:`sent` (recorded or not)."""
        self._token += 1
        self.in_flight[self._token] = t
        return self._token

    def sent(self, token: int) -> None:
        self.in_flight.pop(token, None)

    def drop(self, t: float) -> None:
        """An arrival at *t* was not sent: its user had too many requests in flight."""
        self.add({"d": t})

    def add(self, rec: dict[str, Any]) -> None:
        if self.send is None and self.fh is None:
            os.makedirs(_RECORDS_DIR, exist_ok=True)
            self.fh = open(os.path.join(_RECORDS_DIR, f"requests-{os.getpid()}.jsonl"), "a")  # noqa: SIM115
        self.buf.append(json.dumps(rec, separators=(",", ":")))
        now = time.monotonic()
        if now - self.last_flush >= 0.1:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            mark = min(self.in_flight.values(), default=time.monotonic())
            self.buf.append(json.dumps({"w": mark}, separators=(",", ":")))
        if self.send is not None and self.buf:
            self.send("gameday_records", {"lines": self.buf})
            self.buf = []
        elif self.fh is not None and self.buf:
            self.fh.write("\n".join(self.buf) + "\n")
            self.fh.flush()
            self.buf.clear()
        self.last_flush = time.monotonic()


RECORDS = _Records()


# The runner passes its pid: by the time this module is imported (a second or two after
# the fork) the runner may already be dead and getppid() would name init.
_PARENT = int(os.environ.get("GAMEDAY_RUNNER_PID") or os.getppid())


@events.init.add_listener  # type: ignore[untyped-decorator]
def _quit_with_the_runner(environment: Any, **kwargs: Any) -> None:
    """Load never outlives the drill that started it: quit when the runner is gone
    (``kill -9`` included: this process is then re-parented). A remote worker has no runner
    as its parent (a shell, ssh, systemd may start it and go): it quits when its master
    tells it to, or after locust's 60 s without the master's heartbeat."""
    if _REMOTE:
        return
    import gevent  # noqa: PLC0415  (locust's own event loop)

    def watch() -> None:
        while True:
            gevent.sleep(1.0)
            if os.getppid() != _PARENT and environment.runner is not None:
                RECORDS.flush()
                environment.runner.quit()
                return

    gevent.spawn(watch)


class _Clocks:
    """On the master: each remote worker's clock offset, measured by round trips at connect.

    The master sends its ``CLOCK_MONOTONIC`` reading ``t0``; the worker answers with its own
    ``tw``; the answer arrives at ``t1``. The worker read its clock somewhere in [t0, t1], so
    ``offset = (t0 + t1) / 2 - tw`` is off by at most ``(t1 - t0) / 2``: the uncertainty kept
    with it (of the shortest of :data:`PINGS` round trips). Records a worker sends are
    written with ``t + offset``, on the harness's clock; records that arrive before its
    offset is known wait for it.
    """

    def __init__(self, records_dir: str) -> None:
        self.dir = records_dir
        self.workers: dict[str, dict[str, Any]] = {}
        self.pending: dict[str, list[str]] = {}
        self.files: dict[str, Any] = {}

    def hello(self, runner: Any, node: str, data: dict[str, Any]) -> None:
        self.workers[node] = {"host": data.get("host"), "pid": data.get("pid"), "pings": 0,
                              "offset_s": None, "uncertainty_s": None, "rtt_s": None}
        runner.send_message("gameday_config", {k: os.environ.get(k, "") for k in CONFIG_KEYS}, client_id=node)
        self.ping(runner, node)

    def ping(self, runner: Any, node: str) -> None:
        runner.send_message("gameday_ping", {"t0": time.monotonic()}, client_id=node)

    def pong(self, runner: Any, node: str, data: dict[str, Any]) -> None:
        t1 = time.monotonic()
        w = self.workers.get(node)
        if w is None:
            return
        t0, tw = float(data["t0"]), float(data["tw"])
        rtt = t1 - t0
        w["pings"] += 1
        if w["rtt_s"] is None or rtt < w["rtt_s"]:
            w.update(rtt_s=rtt, offset_s=(t0 + t1) / 2 - tw, uncertainty_s=rtt / 2)
        if w["pings"] < PINGS:
            self.ping(runner, node)
            return
        self.save()
        self.write(node, self.pending.pop(node, []))

    def save(self) -> None:
        """``workers.json``: the workers whose clocks are measured (written atomically)."""
        done = {n: w for n, w in self.workers.items() if w["pings"] >= PINGS}
        tmp = os.path.join(self.dir, ".workers.json.tmp")
        os.makedirs(self.dir, exist_ok=True)
        with open(tmp, "w") as fh:
            json.dump({"workers": done}, fh)
        os.replace(tmp, os.path.join(self.dir, "workers.json"))

    def records(self, node: str, lines: list[str]) -> None:
        w = self.workers.get(node)
        if w is None or w["pings"] < PINGS:
            self.pending.setdefault(node, []).extend(lines)
        else:
            self.write(node, lines)

    def write(self, node: str, lines: list[str]) -> None:
        if not lines:
            return
        offset = float(self.workers[node]["offset_s"])
        fh = self.files.get(node)
        if fh is None:
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in node)[-80:]
            fh = self.files[node] = open(os.path.join(self.dir, f"requests-w-{safe}.jsonl"), "a")  # noqa: SIM115
        out = []
        for line in lines:
            rec = json.loads(line)
            for key in ("t", "w"):  # a request's send time; a watermark
                if key in rec:
                    rec[key] = float(rec[key]) + offset
            out.append(json.dumps(rec, separators=(",", ":")))
        fh.write("\n".join(out) + "\n")
        fh.flush()


CLOCKS = _Clocks(_RECORDS_DIR)
_CONFIGURED: Any = None  # a gevent Event on a remote worker: set when the master's configuration came


@events.init.add_listener  # type: ignore[untyped-decorator]
def _distributed(environment: Any, **kwargs: Any) -> None:
    """The custom messages between the harness's master and workers on other machines."""
    from locust.runners import MasterRunner, WorkerRunner  # noqa: PLC0415

    runner = environment.runner
    if isinstance(runner, MasterRunner) and _EXPECTS_REMOTE:
        runner.register_message("gameday_hello", lambda msg, **kw: CLOCKS.hello(runner, msg.node_id, msg.data))
        runner.register_message("gameday_pong", lambda msg, **kw: CLOCKS.pong(runner, msg.node_id, msg.data))
        runner.register_message("gameday_records", lambda msg, **kw: CLOCKS.records(msg.node_id, msg.data["lines"]))
    elif isinstance(runner, WorkerRunner) and _REMOTE:
        import gevent.event  # noqa: PLC0415

        global _CONFIGURED  # noqa: PLW0603
        _CONFIGURED = gevent.event.Event()

        def config(msg: Any, **kw: Any) -> None:
            global CFG  # noqa: PLW0603
            CFG = _Config(msg.data)
            _CONFIGURED.set()

        def ping(msg: Any, **kw: Any) -> None:
            runner.send_message("gameday_pong", {"t0": msg.data["t0"], "tw": time.monotonic()})

        runner.register_message("gameday_config", config)
        runner.register_message("gameday_ping", ping)
        RECORDS.send = runner.send_message
        runner.send_message("gameday_hello", {"host": socket.gethostname(), "pid": os.getpid()})


@events.quitting.add_listener  # type: ignore[untyped-decorator]
def _flush_on_quit(environment: Any, **kwargs: Any) -> None:
    RECORDS.flush()


_CLIENT_IDS = iter(range(1 << 62))


@dataclass
class Client:
    """One client: its own DNS cache (the address until ``expires``) and connection pool."""

    cid: str
    session: Any
    addr: str | None = None
    expires: float = 0.0
    resolved_at: float = 0.0
    """When its cached answer was (taken to be) obtained, monotonic s."""
    ttl: float = 0.0


class GamedayUser(HttpUser):
    """An arrival process over its own clients; each client resolves the service name itself
    and caches the answer for its TTL (see the module docstring)."""

    host = "http://gameday.invalid"

    def wait_time(self) -> float:
        # Poisson arrivals at this user's share of the rate (read at each call: a remote worker
        # learns its rate from the master after import)
        return random.expovariate(CFG.rate) if CFG.rate > 0 else 1.0

    def on_start(self) -> None:
        if _CONFIGURED is not None and not _CONFIGURED.wait(30):
            raise RuntimeError("no configuration from the gameday master within 30 s")
        tag = f"{socket.gethostname()}-{os.getpid()}"
        self.clients = [Client(f"{tag}-{next(_CLIENT_IDS)}", self._session()) for _ in range(CFG.clients_per_user)]
        self.in_flight = 0
        gevent.sleep(self.wait_time())  # the first arrival is one gap in, like every other

    def _session(self) -> Any:
        session = HttpSession(base_url=self.host, request_event=self.environment.events.request, user=self,
                              pool_manager=self.pool_manager)
        session.trust_env = False
        return session

    def resolve(self, client: Client) -> str:
        """*client*'s address for the service: its cached answer while fresh, else a new query
        (whose answer it takes as ``U x TTL`` old the first time: independent cache phases)."""
        now = time.monotonic()
        if client.addr is not None and now < client.expires:
            return client.addr
        q = dns.message.make_query(CFG.fqdn, dns.rdatatype.A)
        resp = dns.query.udp(q, CFG.dns_host, port=CFG.dns_port, timeout=CFG.timeout)
        for rrset in resp.answer:
            for rr in rrset:
                if rr.rdtype == dns.rdatatype.A:
                    addr: str = rr.address
                    age = random.random() * rrset.ttl if client.addr is None else 0.0
                    client.addr, client.ttl = addr, float(rrset.ttl)
                    client.resolved_at, client.expires = now - age, now - age + rrset.ttl
                    return addr
        raise dns.exception.DNSException(f"no A record for {CFG.fqdn} (rcode {resp.rcode()})")  # type: ignore[no-untyped-call]

    @task
    def work(self) -> None:
        t = time.monotonic()
        if self.in_flight >= CFG.max_in_flight:
            RECORDS.drop(t)
            return
        client = random.choice(self.clients)
        token = RECORDS.sending(t)
        self.in_flight += 1
        gevent.spawn(self._one, client, t, token)

    def _one(self, client: Client, t: float, token: int) -> None:
        try:
            self._request(client, t)
        finally:
            RECORDS.sent(token)
            self.in_flight -= 1

    def _request(self, client: Client, t: float) -> None:
        asked = client.addr is None or time.monotonic() >= client.expires
        try:
            addr = self.resolve(client)
        except (dns.exception.DNSException, OSError) as exc:
            RECORDS.add({"t": t, "s": 0, "l": time.monotonic() - t, "r": None, "a": None,
                         "e": f"dns: {type(exc).__name__}", "c": client.cid, "i": t, "q": 1})
            return
        sent = time.monotonic()
        url = f"{CFG.scheme}://{addr}:{CFG.port}{CFG.path}"
        with client.session.get(url, name=CFG.path, timeout=CFG.timeout, catch_response=True,
                                headers=CFG.headers) as resp:
            status = int(resp.status_code or 0)
            served = resp.headers.get(CFG.served_by, "") if status and CFG.served_by else ""
            err = None if status else type(resp.error).__name__
            if status and status < 500:
                resp.success()
            else:
                resp.failure(err or f"HTTP {status}")
        RECORDS.add({"t": t, "s": status, "l": time.monotonic() - t, "r": served.split("/")[0] or None,
                     "a": addr, "e": err, "c": client.cid, "i": t, "q": int(asked),
                     "age": round(sent - client.resolved_at, 4), "ttl": client.ttl})
