"""East-west traffic: service-to-service calls through each region's local proxy.

North-south load (clients resolving the GSLB name) is locust's job; this is the other
half of article 000's question - calls that ride the proxies' snapshot, so a stale
snapshot sends them to an instance that is already gone. A bounded loop in a thread:
at most ``rate`` calls/s in total, stopped by :meth:`EastWestLoad.stop` or after
``max_seconds``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from types import TracebackType

import httpx

from gameday.model.timeline import RequestRec


class EastWestLoad:
    """Round-robin calls to each proxy's call URL (the reference app's: ``<proxy>/call/work``,
    :meth:`~gameday.observers.reference.ReferenceEndpoints.proxy_calls`).

    Args:
        urls: region -> the URL that sends one app request through that region's proxy.
        rate: calls/s in total.
        max_seconds: the loop stops by itself after this long.
        timeout: seconds one call may take.
    """

    def __init__(self, urls: Mapping[str, str], *, rate: float = 20.0, max_seconds: float = 300.0,
                 timeout: float = 1.0) -> None:
        self.urls = dict(urls)
        self.rate = rate
        self.max_seconds = max_seconds
        self.timeout = timeout
        self.records: list[RequestRec] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gameday-eastwest", daemon=True)

    def start(self) -> EastWestLoad:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 5)

    def __enter__(self) -> EastWestLoad:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _run(self) -> None:
        urls = list(self.urls.values())
        if not urls:
            return
        period = 1.0 / self.rate
        deadline = time.monotonic() + self.max_seconds
        with httpx.Client(timeout=self.timeout, trust_env=False) as http:
            i = 0
            while not self._stop.is_set() and time.monotonic() < deadline:
                url = urls[i % len(urls)]
                i += 1
                t = time.monotonic()
                try:
                    r = http.get(url)
                    served = r.headers.get("X-Served-By", "")
                    self.records.append(RequestRec(t, r.status_code, time.monotonic() - t,
                                                   served.split("/")[0] or None))
                except httpx.HTTPError as exc:
                    self.records.append(RequestRec(t, 0, time.monotonic() - t, None, type(exc).__name__))
                self._stop.wait(max(0.0, period - (time.monotonic() - t)))

    def between(self, start: float, end: float) -> list[RequestRec]:
        return [r for r in self.records if start <= r.t <= end]
