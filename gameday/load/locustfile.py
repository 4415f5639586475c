"""gameday's built-in locust user: resolves the service through the GSLB and honours the TTL.

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

Each request is recorded as one JSON line:
``{"t": send time (CLOCK_MONOTONIC s), "s": status (0: transport error),
"l": latency s, "r": serving region or null, "a": gateway address, "e": error}``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rdatatype
from locust import HttpUser, constant_throughput, events, task

_DNS_HOST, _DNS_PORT = os.environ.get("GAMEDAY_DNS", "127.0.0.1:53").rsplit(":", 1)
_FQDN = os.environ.get("GAMEDAY_FQDN", "app.gameday.test.")
_PORT = int(os.environ.get("GAMEDAY_PORT", "80"))
_RATE = float(os.environ.get("GAMEDAY_USER_RATE", "1"))
_TIMEOUT = float(os.environ.get("GAMEDAY_TIMEOUT", "1"))
_SCHEME = os.environ.get("GAMEDAY_SCHEME", "http")
_PATH = os.environ.get("GAMEDAY_PATH", "/work")
_HOST_HEADER = os.environ.get("GAMEDAY_HOST_HEADER", "")
_SERVED_BY = os.environ.get("GAMEDAY_SERVED_BY", "X-Served-By")
_HEADERS = {"Host": _HOST_HEADER} if _HOST_HEADER else {}
_RECORDS_DIR = os.environ.get("GAMEDAY_RECORDS", ".")


class _Records:
    """Buffered JSONL writer, flushed every 0.2 s so the harness sees requests promptly."""

    def __init__(self) -> None:
        self.fh: Any = None
        self.buf: list[str] = []
        self.last_flush = time.monotonic()

    def add(self, rec: dict[str, Any]) -> None:
        if self.fh is None:
            os.makedirs(_RECORDS_DIR, exist_ok=True)
            self.fh = open(os.path.join(_RECORDS_DIR, f"requests-{os.getpid()}.jsonl"), "a")  # noqa: SIM115
        self.buf.append(json.dumps(rec, separators=(",", ":")))
        now = time.monotonic()
        if now - self.last_flush >= 0.2:
            self.flush()

    def flush(self) -> None:
        if self.fh is not None and self.buf:
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
    (``kill -9`` included: this process is then re-parented)."""
    import gevent  # noqa: PLC0415  (locust's own event loop)

    def watch() -> None:
        while True:
            gevent.sleep(1.0)
            if os.getppid() != _PARENT and environment.runner is not None:
                RECORDS.flush()
                environment.runner.quit()
                return

    gevent.spawn(watch)


@events.quitting.add_listener  # type: ignore[untyped-decorator]
def _flush_on_quit(environment: Any, **kwargs: Any) -> None:
    RECORDS.flush()


class GamedayUser(HttpUser):
    """A client that resolves the service name itself and caches the answer for its TTL."""

    wait_time = constant_throughput(_RATE)
    host = "http://gameday.invalid"

    def on_start(self) -> None:
        self.addr: str | None = None
        self.expires = 0.0

    def resolve(self) -> str:
        now = time.monotonic()
        if self.addr is not None and now < self.expires:
            return self.addr
        q = dns.message.make_query(_FQDN, dns.rdatatype.A)
        resp = dns.query.udp(q, _DNS_HOST, port=int(_DNS_PORT), timeout=_TIMEOUT)
        for rrset in resp.answer:
            for rr in rrset:
                if rr.rdtype == dns.rdatatype.A:
                    addr: str = rr.address
                    self.addr, self.expires = addr, now + rrset.ttl
                    return addr
        raise dns.exception.DNSException(f"no A record for {_FQDN} (rcode {resp.rcode()})")  # type: ignore[no-untyped-call]

    @task
    def work(self) -> None:
        t = time.monotonic()
        try:
            addr = self.resolve()
        except (dns.exception.DNSException, OSError) as exc:
            RECORDS.add({"t": t, "s": 0, "l": time.monotonic() - t, "r": None, "a": None,
                         "e": f"dns: {type(exc).__name__}"})
            return
        url = f"{_SCHEME}://{addr}:{_PORT}{_PATH}"
        with self.client.get(url, name=_PATH, timeout=_TIMEOUT, catch_response=True, headers=_HEADERS) as resp:
            status = int(resp.status_code or 0)
            served = resp.headers.get(_SERVED_BY, "") if status and _SERVED_BY else ""
            err = None if status else type(resp.error).__name__
            if status and status < 500:
                resp.success()
            else:
                resp.failure(err or f"HTTP {status}")
        RECORDS.add({"t": t, "s": status, "l": time.monotonic() - t, "r": served.split("/")[0] or None,
                     "a": addr, "e": err})
