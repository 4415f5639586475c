"""What the tests see happen from outside a drill: PowerDNS's check rounds, gateway exits.

**The checker's rounds.**
PowerDNS 4.7 checks every address of every LUA ``ifportup`` record in one round, each
check a TCP connect started at the same instant (``std::async`` per check), then sleeps
until ``lua-health-checks-interval`` after the round began. A listener on an address of
its own, named by a second LUA record (``checker.<zone>``), is connected to once per round:
its accept times, on the machine's one monotonic clock (the drill's clock too), are the
checker's rounds. With them a convergence figure can be compared with the rounds PowerDNS
really ran, not only with the interval it was configured with (on a busy machine a round
can start late).

**The gateways' exits.** :class:`GatewayWatch` polls each gateway's nginx master (pid file,
then the pid) every few milliseconds and records when it stopped and started, so the
instant a ``gateway_down`` took effect is known to the test without asking the drill.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping

HOST = "127.0.200.2"


class CheckerClock:
    """A TCP listener on *HOST* that records the monotonic time of every connection."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((HOST, port))
        self._sock.listen(16)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._times: list[float] = []
        self._thread = threading.Thread(target=self._serve, name="pdns-checker-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._sock], [], [], 0.2)
            if not ready:
                continue
            with contextlib.suppress(OSError):
                conn, _ = self._sock.accept()
                t = time.monotonic()
                conn.close()
                with self._lock:
                    self._times.append(t)

    def rounds(self, start: float = float("-inf"), end: float = float("inf")) -> list[float]:
        """Times (monotonic s) the checker connected in [start, end]."""
        with self._lock:
            return [t for t in self._times if start <= t <= end]

    def next_round(self, after: float) -> float | None:
        """The first round that began after *after* (None: none yet)."""
        with self._lock:
            i = bisect.bisect_right(self._times, after)
            return self._times[i] if i < len(self._times) else None

    def rounds_seeing(self, start: float, end: float | None = None, race: float = 0.01) -> list[float]:
        """The round(s) in which a change that happened in [start, end] can first be seen:
        every round that began in that span, the first round after it, and the one after
        that too when the first began within *race* s of *end* (a round's accept is stamped
        a moment after its connects, so it may have checked just before *end*)."""
        end = start if end is None else end
        within = self.rounds(start, end)
        first = self.next_round(end)
        if first is None:
            return within
        second = self.next_round(first) if first - end < race else None
        return [*within, first] if second is None else [*within, first, second]

    def longest_gap(self, start: float, end: float) -> float | None:
        """The longest time (s) between consecutive rounds in [start, end], None with fewer than 2."""
        ts = self.rounds(start, end)
        return max((b - a for a, b in itertools.pairwise(ts)), default=None)


class GatewayWatch:
    """Polls ``running()`` of each named gateway every *interval* s and records its changes."""

    def __init__(self, running: Mapping[str, Callable[[], bool]], interval: float = 0.005) -> None:
        self._running = dict(running)
        self._interval = interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._changes: list[tuple[float, str, bool]] = []
        self._thread = threading.Thread(target=self._watch, name="gateway-watch", daemon=True)

    def __enter__(self) -> GatewayWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _watch(self) -> None:
        state = {name: f() for name, f in self._running.items()}
        while not self._stop.wait(self._interval):
            for name, f in self._running.items():
                now = f()
                if now != state[name]:
                    state[name] = now
                    with self._lock:
                        self._changes.append((time.monotonic(), name, now))

    def stops(self) -> list[tuple[float, str]]:
        """(monotonic time, gateway) of every stop seen, in order."""
        with self._lock:
            return [(t, name) for t, name, up in self._changes if not up]
