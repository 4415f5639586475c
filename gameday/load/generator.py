"""The load seam: what a drill needs of its load generator, and a base that makes one small.

gameday's own generator is locust (:class:`gameday.load.runner.LoadRunner`). Another one (k6,
Gatling, a replay of production traffic, a client library's own retry loop) is a class a
conftest or a plugin returns from :func:`~gameday.plugin.hooks.pytest_gameday_make_load`::

    from gameday import RecordedLoad, RequestRec

    class MyLoad(RecordedLoad):
        def start(self) -> None: ...          # start sending rate requests/s; return once it does
        def poll(self) -> list[RequestRec]:   # the requests completed since the last call
            new = self.read_my_results()
            self.records.extend(new)
            return new
        def stop(self) -> None: ...           # stop sending, read the rest

    def pytest_gameday_make_load(config, endpoints, users, rate, workdir):
        return MyLoad(rate=rate, users=users, timeout=1.0)

:class:`RecordedLoad` computes everything else a drill reads (the achieved and completed
rates, the first request, dropped arrivals) from :attr:`~RecordedLoad.records`; a generator
that knows more (which of its processes are alive, a watermark before which every request is
recorded) overrides :meth:`~RecordedLoad.liveness` and :meth:`~RecordedLoad.complete_until`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, runtime_checkable

from gameday.model.parts import ComponentState
from gameday.model.timeline import RequestRec


@runtime_checkable
class LoadGenerator(Protocol):
    """What a drill reads of the load it runs under (the ``load`` fixture's value).

    ``rate`` is the offered requests/s across all clients, ``users`` the number of clients (or
    arrival processes), ``timeout`` one request's timeout in seconds (a request is recorded up
    to a DNS and an HTTP timeout after it was sent). Times are ``time.monotonic()`` seconds of
    the harness's clock: a request's :attr:`~gameday.model.timeline.RequestRec.t` is when it was
    sent."""

    rate: float
    users: int
    timeout: float

    def start(self) -> None:
        """Start the load; return once requests are being sent (raise :class:`~gameday.errors.LoadError`
        if they cannot be)."""
        ...

    def stop(self) -> None:
        """Stop the load and read the requests still on their way (idempotent)."""
        ...

    def poll(self) -> list[RequestRec]:
        """The requests recorded since the last call (called by the observer, 10 times a second)."""
        ...

    def complete_until(self) -> float | None:
        """A send time before which every request is recorded, or None where unknown."""
        ...

    def achieved_rate(self, start: float, end: float) -> float:
        """Requests/s sent in [start, end)."""
        ...

    def completed_rate(self, start: float, end: float) -> float:
        """Requests/s completed (send time + latency) in [start, end)."""
        ...

    def dropped_between(self, start: float, end: float) -> int:
        """Arrivals in [start, end) that were not sent (an open model's cap), counted apart."""
        ...

    @property
    def first_request_at(self) -> float | None:
        """Send time of the first recorded request."""
        ...

    @property
    def clock_uncertainty(self) -> float:
        """How far request send times may be off the harness's clock, seconds."""
        ...

    def liveness(self) -> list[ComponentState]:
        """The generator's processes, alive or not (a dead one aborts the drill, named)."""
        ...


class RecordedLoad(ABC):
    """A :class:`LoadGenerator` computed from its :attr:`records`: a subclass implements
    :meth:`start`, :meth:`stop` and :meth:`poll` (which appends to :attr:`records`); one that
    leaves any out cannot be made (``TypeError`` at construction, naming them)."""

    def __init__(self, *, rate: float, users: int, timeout: float = 1.0) -> None:
        self.rate = rate
        self.users = users
        self.timeout = timeout
        self.records: list[RequestRec] = []
        """Every request read so far, about in send-time order (only ever appended to)."""
        self.dropped: list[float] = []
        """Arrival times that were not sent (an open model's in-flight cap)."""

    @abstractmethod
    def start(self) -> None:
        """Start sending :attr:`rate` requests/s; return once requests are being sent.

        Raises:
            LoadError: it could not start.
        """

    @abstractmethod
    def stop(self) -> None:
        """Stop sending, then read the rest (as :meth:`poll`)."""

    @abstractmethod
    def poll(self) -> list[RequestRec]:
        """The requests completed since the last call, also appended to :attr:`records`."""

    def complete_until(self) -> float | None:
        """None: not known (the drill then allows for requests still on their way)."""
        return None

    @property
    def clock_uncertainty(self) -> float:
        """0: every request is timed on the harness's clock."""
        return 0.0

    def liveness(self) -> list[ComponentState]:
        """No processes of its own to watch."""
        return []

    def dropped_between(self, start: float, end: float) -> int:
        return sum(1 for t in self.dropped if start <= t < end)

    def achieved_rate(self, start: float, end: float) -> float:
        n = sum(1 for r in self.records if start <= r.t < end)
        return n / (end - start) if end > start else 0.0

    @property
    def first_request_at(self) -> float | None:
        recs = self.records[:500]  # the first poll holds the earliest records of every process
        return min(r.t for r in recs) if recs else None

    def completed_rate(self, start: float, end: float) -> float:
        """Requests/s *completed* (send time + latency) in [start, end).

        Completion, not send time: a request sent just before *end* is recorded only when it
        completes, so counting by send time would under-count the newest second. Reads the
        records from the end (they are appended about in time order), so it stays cheap
        at 10 Hz however long the run."""
        if end <= start:
            return 0.0
        slack = 2 * self.timeout + 5.0  # out of order by at most a request's life and a poll
        n = 0
        recs = self.records  # only ever appended to (by the observer thread): index from the end
        for i in range(len(recs) - 1, -1, -1):
            r = recs[i]
            done = r.t + r.latency
            if start <= done < end:
                n += 1
            elif r.t < start - slack:
                break
        return n / (end - start)
