"""Plumbing shared by the federation's component processes.

Each component is an asyncio program: an aiohttp server for its HTTP endpoints,
optionally a NATS connection, structured JSON log lines on stderr, and Prometheus
text metrics. Components stop cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hmac
import json
import math
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

Json = dict[str, Any]


class JsonLog:
    """Structured log lines: one JSON object per line on stderr.

    Every line carries ``ts`` (Unix seconds), ``mono`` (CLOCK_MONOTONIC seconds,
    the same clock the harness uses), ``component`` and ``event``.
    """

    def __init__(self, component: str, stream: Any = None) -> None:
        self.component = component
        self.stream = stream if stream is not None else sys.stderr

    def __call__(self, event: str, **fields: Any) -> None:
        line = {"ts": round(time.time(), 6), "mono": round(time.monotonic(), 6),
                "component": self.component, "event": event, **fields}
        self.stream.write(json.dumps(line, separators=(",", ":"), default=str) + "\n")
        self.stream.flush()


_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Histogram:
    """A Prometheus-style histogram in seconds that also keeps recent samples for quantiles."""

    buckets: tuple[float, ...] = _BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(_BUCKETS) + 1))
    total: float = 0.0
    n: int = 0
    recent: list[float] = field(default_factory=list)
    keep: int = 2048

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1
        self.recent.append(value)
        if len(self.recent) > self.keep:
            del self.recent[: len(self.recent) - self.keep]

    def quantile(self, q: float) -> float:
        """Quantile of the recent samples (nearest-rank); NaN when empty."""
        if not self.recent:
            return math.nan
        s = sorted(self.recent)
        return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]

    def render(self, name: str, labels: str = "") -> list[str]:
        out = []
        cum = 0
        lab = labels + "," if labels else ""
        for b, c in zip(self.buckets, self.counts, strict=False):
            cum += c
            out.append(f'{name}_bucket{{{lab}le="{b}"}} {cum}')
        cum += self.counts[-1]
        out.append(f'{name}_bucket{{{lab}le="+Inf"}} {cum}')
        sfx = f"{{{labels}}}" if labels else ""
        out.append(f"{name}_sum{sfx} {self.total}")
        out.append(f"{name}_count{sfx} {self.n}")
        return out


def render_metrics(
    samples: Iterable[tuple[str, str, float]],
    help_text: dict[str, str] | None = None,
    histograms: dict[str, Histogram] | None = None,
) -> str:
    """Render ``(name, labels, value)`` samples and histograms as Prometheus text.

    ``labels`` is the inside of the braces (``region="a"``) or empty.
    """
    help_text = help_text or {}
    lines: list[str] = []
    seen: set[str] = set()
    for name, labels, value in samples:
        if name not in seen:
            seen.add(name)
            if name in help_text:
                lines.append(f"# HELP {name} {help_text[name]}")
            kind = "counter" if name.endswith("_total") else "gauge"
            lines.append(f"# TYPE {name} {kind}")
        lines.append(f"{name}{{{labels}}} {value}" if labels else f"{name} {value}")
    for name, h in (histograms or {}).items():
        if name in help_text:
            lines.append(f"# HELP {name} {help_text[name]}")
        lines.append(f"# TYPE {name} histogram")
        lines.extend(h.render(name))
    return "\n".join(lines) + "\n"


@dataclass
class ReadyzFault:
    """A readiness fault hook: fail ``/readyz`` for a while, or flap it.

    Set through ``POST /admin/fault`` with ``{"readyz": "ok"}``,
    ``{"readyz": "fail", "seconds": S}`` (S omitted: until cleared) or
    ``{"readyz": "flap", "period": P, "down": D}`` (down D seconds out of every P).
    """

    mode: str = "ok"
    until: float = math.inf
    period: float = 1.0
    down: float = 0.5
    started: float = 0.0

    def failing(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        if self.mode == "fail":
            if now < self.until:
                return True
            self.mode = "ok"
            return False
        if self.mode == "flap":
            return ((now - self.started) % self.period) < self.down
        return False

    def configure(self, body: Json) -> None:
        """Apply an admin request body; raise ``ValueError`` on a bad one."""
        mode = body.get("readyz")
        now = time.monotonic()
        if mode == "ok":
            self.mode = "ok"
        elif mode == "fail":
            secs = body.get("seconds")
            self.mode, self.started = "fail", now
            self.until = now + float(secs) if secs is not None else math.inf
        elif mode == "flap":
            period, down = float(body.get("period", 1.0)), float(body.get("down", 0.5))
            if not 0 < down < period:
                raise ValueError(f"flap needs 0 < down < period, got down={down} period={period}")
            self.mode, self.period, self.down, self.started = "flap", period, down, now
        elif mode is not None:
            raise ValueError(f"readyz: got {mode!r}, expected 'ok', 'fail' or 'flap'")

    def describe(self) -> Json:
        return {"mode": self.mode, "period": self.period, "down": self.down}


def json_response(data: Json, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        text=json.dumps(data, separators=(",", ":"), default=str),
        status=status,
        content_type="application/json",
        headers=headers,
    )


async def read_json(request: web.Request) -> Json:
    """The request body as a JSON object; raise ``HTTPBadRequest`` otherwise."""
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise web.HTTPBadRequest(text=f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="body must be a JSON object")
    return body


def bind_host(host: str) -> str:
    """The address to listen on: *host* from the spec, unless ``GAMEDAY_BIND_HOST`` overrides it.

    In a Kubernetes pod the spec's host is the node's address (what peers dial), which the
    pod cannot bind; the manifests set ``GAMEDAY_BIND_HOST=0.0.0.0``.
    """
    return os.environ.get("GAMEDAY_BIND_HOST") or host


ADMIN_TOKEN_ENV = "GAMEDAY_ADMIN_TOKEN_FILE"  # noqa: S105  (the variable naming the file, not a secret)
"""Names the file holding the run's admin token (local: written by the harness, 0600;
Kubernetes: a Secret mounted as a file)."""


class AdminTokenUnreadable(Exception):
    """The admin token file is configured but cannot be used (message names the file)."""


def read_admin_token(path: str | Path) -> str:
    """The token in *path*: its text without surrounding whitespace (a Secret's trailing newline).

    Raises:
        AdminTokenUnreadable: the file cannot be read or holds no token.
    """
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise AdminTokenUnreadable(f"admin token file {path}: cannot be read ({reason})") from exc
    if not text:
        raise AdminTokenUnreadable(f"admin token file {path}: is empty")
    return text


def admin_token_from_env(environ: Mapping[str, str] = os.environ) -> str | None:
    """The component's admin token: the file ``$GAMEDAY_ADMIN_TOKEN_FILE`` names, or ``None``
    when the variable is unset or empty (then every admin call is refused).

    Raises:
        AdminTokenUnreadable: the variable names a file that cannot be used; the component
            must not start (a deploy that meant to set a token and failed is found at once,
            not as 401s in the middle of a drill).
    """
    path = environ.get(ADMIN_TOKEN_ENV)
    return read_admin_token(path) if path else None


def is_admin_path(path: str) -> bool:
    """True for ``/admin`` and everything under it, however spelled (``//admin/x``,
    ``/Admin/x``): the guard errs on the side of asking for the token."""
    first = next((part for part in path.split("/") if part), "")
    return first.lower() == "admin"


def admin_guard(token: str | None, log: JsonLog) -> Middleware:
    """An aiohttp middleware: every request to an admin path (:func:`is_admin_path`), any
    method, must carry ``Authorization: Bearer <token>``; otherwise it is answered 401 and
    logged as ``admin_refused`` (method, path, peer and why; never what was presented).
    With *token* ``None`` (none configured) every admin call is refused: fail closed.
    The comparison is :func:`hmac.compare_digest` (constant time)."""
    expected = token.encode("utf-8") if token is not None else None

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if is_admin_path(request.path):
            reason = _refusal(expected, request.headers.get("Authorization"))
            if reason is not None:
                log("admin_refused", method=request.method, path=request.path, peer=request.remote, reason=reason)
                return json_response({"error": f"admin call refused: {reason}"}, status=401,
                                     headers={"WWW-Authenticate": 'Bearer realm="gameday-admin"'})
        return await handler(request)

    return guard


def _refusal(expected: bytes | None, header: str | None) -> str | None:
    """Why an admin call with this ``Authorization`` header is refused, or ``None``."""
    if expected is None:
        return f"no admin token configured on this component (set {ADMIN_TOKEN_ENV})"
    if not header:
        return "no bearer token"
    scheme, _, presented = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        return "no bearer token"
    if not hmac.compare_digest(presented.strip().encode("utf-8", "surrogateescape"), expected):
        return "wrong token"
    return None


async def connect_nats(url: str, name: str, log: JsonLog, **callbacks: Any) -> Any:
    """Connect to NATS, retrying forever (the bus may be down; R1 says keep serving).

    Returns the ``nats.aio.client.Client``. Reconnects are unlimited and fast.
    """
    import nats  # noqa: PLC0415  (imported here: only components that use NATS pay for it)

    async def _err(exc: Exception) -> None:
        log("nats_error", error=repr(exc))

    async def _disc() -> None:
        log("nats_disconnected")

    async def _reconn() -> None:
        log("nats_reconnected")

    opts: dict[str, Any] = {
        "servers": [url],
        "name": name,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 0.2,
        "connect_timeout": 1,
        "ping_interval": 2,
        "max_outstanding_pings": 2,
        "error_cb": _err,
        "disconnected_cb": _disc,
        "reconnected_cb": _reconn,
    }
    opts.update(callbacks)
    while True:
        try:
            return await nats.connect(**opts)
        except Exception as exc:  # noqa: BLE001  (nats raises several unrelated types on connect)
            log("nats_connect_failed", error=repr(exc))
            await asyncio.sleep(0.2)


def run_component(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``main(stop)`` until it returns; SIGTERM/SIGINT set *stop*."""

    async def _runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    asyncio.run(_runner())


async def every(interval: float, fn: Callable[[], Awaitable[None]], stop: asyncio.Event) -> None:
    """Call *fn* with *interval* seconds between the end of one call and the next start.

    Fixed delay, never catch-up bursts: two calls are never closer than *interval*,
    which keeps the R2 probe arithmetic (a blip of 1.5 intervals is at most 2 probes) true.
    """
    while not stop.is_set():
        await fn()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)
