"""Role *version*: the control plane's global route version, polled (:class:`VersionSource`;
built-ins: :class:`HttpJsonVersion`, :class:`PrometheusVersion`, :class:`MetricsVersion`;
profile kind ``version``) or heard as it is announced (:class:`VersionFeed`; built-in:
:class:`NatsVersionFeed`).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from prometheus_client.parser import text_string_to_metric_families

from gameday.errors import TransientError
from gameday.observers.sources._common import HttpClient, _as_int, _error, _path, _required, fetch

log = logging.getLogger("gameday.observers.sources")
"""The package's logger: the name this module logged under when the sources were one module."""


# -- the seams ------------------------------------------------------------------------------------
@runtime_checkable
class VersionSource(Protocol):
    """The control plane's global route version."""

    async def read(self, http: HttpClient) -> int | None:
        """The version now; None when it could not be read."""
        ...

    def describe(self) -> str: ...


@runtime_checkable
class VersionFeed(Protocol):
    """The control plane's version as it announces it (push): heard when sent, not polled.

    A feed complements a :class:`VersionSource`: the announcement is stamped when it arrives,
    so the version verdict sees a new version the moment the control plane sends it.
    """

    async def start(self, heard: Callable[[int], None]) -> None:
        """Start listening in the caller's event loop; from then on call *heard* with every
        version announced. Returns once listening, or once it gave up. An unreachable feed is
        not an error (the polled version is still read): it is logged, ``last_error`` says why,
        and it may keep trying; the caller runs this as a task and cancels it when it stops."""
        ...

    async def close(self) -> None:
        """Stop listening; never raises. Idempotent."""
        ...

    def describe(self) -> str: ...


# -- polled ---------------------------------------------------------------------------------------
class HttpJsonVersion:
    """The control plane's version from a JSON document over HTTP (dotted *field* path; the
    default is the profile format's documented name, as for :class:`HttpJsonNode`)."""

    def __init__(self, *, url: str, field: str = "version") -> None:
        self.url = url
        self.field = field
        self.last_error: str | None = None

    async def read(self, http: HttpClient) -> int | None:
        try:
            version = _as_int(_required(json.loads(await fetch(http, self.url)), self.field, self.url),
                              f"field {self.field!r}")
        except (TransientError, ValueError, TypeError) as exc:
            self.last_error = _error(exc)
            return None
        self.last_error = None
        return version

    def describe(self) -> str:
        return f"HTTP JSON {self.url} (version: {self.field})"


class PrometheusVersion:
    """The control plane's version from an instant query against a Prometheus HTTP API.

    Args:
        url: the Prometheus server (``http://prometheus:9090``); ``/api/v1/query`` is added
            unless the URL already ends with it.
        query: PromQL whose result is the version: a scalar, or a vector whose largest sample
            is taken (several replicas of a control plane may export it; the newest counts).

    A vector with no sample (the series is absent) reads as None.
    """

    def __init__(self, *, url: str, query: str) -> None:
        self.url = url if url.rstrip("/").endswith("/api/v1/query") else url.rstrip("/") + "/api/v1/query"
        self.query = query
        self.last_error: str | None = None

    async def read(self, http: HttpClient) -> int | None:
        try:
            version = self._version(json.loads(await fetch(http, self.url, {"query": self.query})))
        except (TransientError, ValueError, TypeError) as exc:
            self.last_error = _error(exc)
            return None
        self.last_error = None if version is not None else f"query {self.query!r} returned no sample"
        return version

    def _version(self, body: object) -> int | None:
        if _path(body, "status") != "success":
            raise ValueError(f"Prometheus answered {str(body)[:200]}")
        kind, result = _path(body, "data.resultType"), _path(body, "data.result")
        if kind == "scalar":
            return _as_int(_path(result, "1"), "scalar result")
        if kind != "vector" or not isinstance(result, list):
            raise ValueError(f"query {self.query!r} gave a {kind} result, expected a scalar or an instant vector")
        values = [_as_int(_path(s, "value.1"), "sample value") for s in result]
        return max(values) if values else None

    def describe(self) -> str:
        return f"Prometheus {self.url} query {self.query!r}"


class MetricsVersion:
    """The control plane's version from a scrape of a ``/metrics`` text endpoint.

    Args:
        url: the endpoint.
        metric: the sample name (``gameday_controlplane_version``).
        labels: labels a sample must carry (a subset match); the largest matching sample counts.

    Parsed with ``prometheus_client``'s parser: broken exposition text is an error reading
    (None, ``last_error`` says why), not a guess.
    """

    def __init__(self, *, url: str, metric: str, labels: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.metric = metric
        self.labels = dict(labels or {})
        self.last_error: str | None = None

    async def read(self, http: HttpClient) -> int | None:
        try:
            text = (await fetch(http, self.url)).decode(errors="replace")
            values = [_as_int(s.value, f"{self.metric} sample")
                      for fam in text_string_to_metric_families(text) for s in fam.samples
                      if s.name == self.metric and all(s.labels.get(k) == v for k, v in self.labels.items())]
        except (TransientError, ValueError, TypeError) as exc:  # the parser raises either on bad text
            self.last_error = _error(exc)
            return None
        self.last_error = None if values else f"no sample {self.metric}{self.labels or ''} at {self.url}"
        return max(values) if values else None

    def describe(self) -> str:
        sel = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        return f"metrics {self.url} ({self.metric}{{{sel}}})" if sel else f"metrics {self.url} ({self.metric})"


# -- the version as announced (push) ---------------------------------------------------------------
class NatsVersionFeed:
    """The control plane's version broadcast on a NATS subject: a JSON message per
    announcement, the version at dotted path *field*.

    Args:
        url: the NATS server (``nats://host:port``).
        subject: the subject the control plane publishes its version on.
        field: dotted path of the version in each message.

    A message without a whole-number version at *field* is skipped (``last_error`` says why).
    While the server cannot be reached, :meth:`start` keeps trying (the bus may come back; cancel
    it to stop), and a server that goes away later is reconnected to; each is logged once, not
    per attempt.
    """

    def __init__(self, *, url: str, subject: str, field: str) -> None:
        self.url = url
        self.subject = subject
        self.field = field
        self.last_error: str | None = None
        self._nc: object | None = None

    async def start(self, heard: Callable[[int], None]) -> None:
        import nats  # noqa: PLC0415  (only a federation with a reachable bus needs nats-py)

        async def on_message(msg: object) -> None:
            try:
                doc = json.loads(msg.data)  # type: ignore[attr-defined]
                version = _as_int(_required(doc, self.field, self.subject), f"field {self.field!r}")
            except (ValueError, TypeError) as exc:
                self.last_error = _error(exc)
                return
            heard(version)

        # nats-py's default error callback logs every failed reconnect with its traceback (three
        # for a bus killed mid-drill, more the longer it stays down): say it once, in one line.
        down: list[bool] = [False]

        async def on_error(exc: Exception) -> None:
            self.last_error = f"{type(exc).__name__}: {exc}"
            if not down[0]:
                down[0] = True
                log.warning("the bus at %s went away (%s): the control plane's version is read by polling only "
                            "until it answers again", self.url, type(exc).__name__)

        async def on_reconnected() -> None:
            if down[0]:
                down[0] = False
                log.info("the bus at %s answers again: the version broadcast is heard again", self.url)

        try:
            nc = await nats.connect(self.url, connect_timeout=1, max_reconnect_attempts=-1,
                                    reconnect_time_wait=0.2, allow_reconnect=True,
                                    error_cb=on_error, reconnected_cb=on_reconnected)
        except Exception as exc:  # noqa: BLE001  (the bus may be down: polling still works)
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("broadcast subscription unavailable (%s); polling only", exc)
            return
        self._nc = nc
        await nc.subscribe(self.subject, cb=on_message)

    async def close(self) -> None:
        nc, self._nc = self._nc, None
        if nc is not None:
            with contextlib.suppress(Exception):  # a bus already gone: nothing left to release
                await nc.close()  # type: ignore[attr-defined]

    def describe(self) -> str:
        return f"NATS {self.url} subject {self.subject} (version: {self.field})"
