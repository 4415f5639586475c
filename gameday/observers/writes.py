"""The drill's writer: writes with unique ids at a stated rate while the drill observes
(DESIGN.md section 9), and the read-back that finds the acknowledged writes that were lost.

Writes arrive as a Poisson process at ``rate`` per second (an open model: a write that hangs
never delays the next one's arrival, as k6's arrival-rate executors and Gatling's open
injection do), each from one of ``clients`` writer clients picked at random, each with its
own DNS cache whose first answer is already a random part of a TTL old (so the clients move
at their own moments, not in lockstep). Each write runs in a thread of a bounded pool; one
that finds every thread busy is *dropped* (counted, never sent). Every write is recorded
on the timeline (:class:`~gameday.model.timeline.WriteRec`) when its answer comes. Where the
source is also a :class:`~gameday.observers.sources.state.TaskQueue` and ``task_rate`` > 0, tasks
arrive the same way (a second Poisson process, merged): each is added to the federation's
background workers' queue.

Where the source can read one record back as a client would
(:class:`~gameday.observers.sources.state.ReadsOwnWrites`), the client that had a write
acknowledged reads it back at once through the global entry, with its own DNS cache (a
read-after-write session, as a user who saved something and reloads the page): a read that
does not find it is a *stale read*, and the client reads again every :data:`REREAD` s until
it does or :data:`STALE_WAIT` s have passed; every read is on the timeline
(:class:`~gameday.model.timeline.ReadRec`).

:meth:`Writer.verify` reads back, through the federation's global entry, every write that was
acknowledged and every indeterminate one, and how often each acknowledged task was processed
(waiting up to :data:`DRAIN_WAIT` s for the queue to drain): the result is the timeline's
:class:`~gameday.model.timeline.DataCheck`, what the data-loss and duplicates verdicts judge.
"""

from __future__ import annotations

import logging
import random
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from gameday.model.timeline import DataCheck, ReadRec, Timeline, WriteRec
from gameday.observers.sources.state import ReadsOwnWrites, StateSource, TaskQueue

log = logging.getLogger(__name__)

CLIENTS = 8
"""Writer clients, each with its own DNS cache."""
MAX_IN_FLIGHT = 32
"""Writes in flight at once; an arrival beyond it is dropped (counted)."""
DRAIN_WAIT = 8.0
"""Seconds :meth:`Writer.verify` waits for every acknowledged task to be processed (a task
redelivered after a stalled worker's ack wait is processed seconds later)."""
STALE_WAIT = 5.0
"""Seconds after its acknowledgement a client keeps reading a write back that it did not find."""
REREAD = 0.25
"""Seconds between a client's reads of a write it did not find (or could not read)."""


class Writer:
    """Writes to *source* at *rate* per second onto *tl* from :meth:`start` to :meth:`stop`."""

    def __init__(self, source: StateSource, tl: Timeline, rate: float, *, clients: int = CLIENTS,
                 ttl_hint: float = 5.0, seed: int | None = None, task_rate: float = 0.0) -> None:
        if rate <= 0 or task_rate < 0:
            raise ValueError(f"write rate {rate!r}, task rate {task_rate!r}: expected > 0 and >= 0")
        self.source = source
        self.tl = tl
        self.rate = rate
        self.queue: TaskQueue | None = (source if task_rate > 0 and isinstance(source, TaskQueue)
                                        and getattr(source, "has_tasks", True) else None)
        self.task_rate = task_rate if self.queue is not None else 0.0
        self.reader: ReadsOwnWrites | None = (source if isinstance(source, ReadsOwnWrites)
                                              and getattr(source, "reads_back", True) else None)
        """Reads each acknowledged write back as its client (None: the source cannot)."""
        self.clients = clients
        self.rng = random.Random(seed if seed is not None else secrets.randbits(64))
        self.tag = f"{self.rng.getrandbits(32):08x}"
        """Prefixes every id: ids are unique across drills and runs."""
        self.sent = 0
        self.dropped = 0
        self._in_flight = 0
        self._count_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix="gameday-writer")
        seed_cache = getattr(source, "seed_cache", None)
        if seed_cache is not None:
            for c in range(clients):
                seed_cache(c, self.rng.uniform(0.0, ttl_hint))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gameday-writer-arrivals", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        total = self.rate + self.task_rate
        next_t = time.monotonic() + self.rng.expovariate(total)
        while not self._stop.is_set():
            delay = next_t - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            n += 1
            task = self.rng.random() * total >= self.rate
            wid = f"{self.tag}-{'t' if task else ''}{n}"
            client = self.rng.randrange(self.clients)
            next_t += self.rng.expovariate(total)
            with self._count_lock:
                if self._in_flight >= MAX_IN_FLIGHT:
                    self.dropped += 1
                    continue
                self._in_flight += 1
                self.sent += 1
            self._pool.submit(self._write, wid, client, task)

    def _write(self, wid: str, client: int, task: bool = False) -> None:
        t = time.monotonic()
        try:
            queue = self.queue if task else None
            a = queue.enqueue(wid, client) if queue is not None else self.source.write(wid, client)
            t_ack = time.monotonic()
            self.tl.add(WriteRec(wid, t, t_ack, a.outcome, a.region, a.seq, a.error, a.entry,
                                 "task" if task else "write", epoch=a.epoch))
            if a.outcome == "ack" and not task and self.reader is not None:
                self._read_own(self.reader, wid, client, t_ack)
        except Exception as exc:  # noqa: BLE001  (a source must not raise; if one does, the write's fate is unknown)
            log.warning("state source raised on write %s: %r", wid, exc)
            self.tl.add(WriteRec(wid, t, time.monotonic(), "indeterminate", error=f"source raised {exc!r}"[:160]))
        finally:
            with self._count_lock:
                self._in_flight -= 1

    def _read_own(self, reader: ReadsOwnWrites, wid: str, client: int, t_ack: float) -> None:
        """Read *wid* back as *client* until it is found or :data:`STALE_WAIT` s passed since its
        acknowledgement (bounded: at most one read per :data:`REREAD` s); stop cuts it short."""
        for _ in range(int(STALE_WAIT / REREAD) + 1):
            t = time.monotonic()
            try:
                a = reader.read(wid, client)
                rec = ReadRec(wid, client, t_ack, t, time.monotonic(), a.found, a.region, a.error, a.entry)
            except Exception as exc:  # noqa: BLE001  (a source must not raise; if one does, the read says nothing)
                log.warning("state source raised on read %s: %r", wid, exc)
                rec = ReadRec(wid, client, t_ack, t, time.monotonic(), None, error=f"source raised {exc!r}"[:160])
            self.tl.add(rec)
            if rec.found or rec.t_done - t_ack >= STALE_WAIT or self._stop.wait(REREAD):
                return

    def verify(self) -> DataCheck:
        """Read back every write acknowledged so far (and every indeterminate one) and record
        what the store no longer holds as the timeline's :attr:`~Timeline.data_check`."""
        t = time.monotonic()
        everything = self.tl.copy().writes
        writes = [w for w in everything if w.kind == "write"]
        acked = [w.id for w in writes if w.outcome == "ack"]
        unsure = [w.id for w in writes if w.outcome == "indeterminate"]
        answer = self.source.lookup(acked + unsure) if acked or unsure else None
        if answer is None:
            check = DataCheck(t=t, acked=(), missing=(), indeterminate=0, where="nothing to read back")
        elif answer.error is not None:
            check = DataCheck(t=t, acked=tuple(acked), missing=(), indeterminate=len(unsure), error=answer.error)
        else:
            failed = set(answer.failed)
            check = DataCheck(
                t=t, acked=tuple(acked),
                missing=tuple(w for w in acked if w not in answer.found and w not in failed),
                unread=tuple(w for w in acked if w in failed),
                indeterminate_found=tuple(w for w in unsure if w in answer.found),
                indeterminate=len(unsure), where=answer.where)
        if self.queue is not None:
            check = self._tasks(check, [w.id for w in everything if w.kind == "task" and w.outcome == "ack"])
        self.tl.data_check = check
        return check

    def _tasks(self, check: DataCheck, tasks: list[str]) -> DataCheck:
        """*check* with how often each of *tasks* was processed, once all were or :data:`DRAIN_WAIT` ran out."""
        assert self.queue is not None
        deadline = time.monotonic() + DRAIN_WAIT
        while True:
            answer = self.queue.processed(tasks) if tasks else None
            if answer is None or answer.error is not None or all(answer.counts.get(t) for t in tasks) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        if answer is None:
            return replace(check, tasks_acked=())
        return replace(check, tasks_acked=tuple(tasks), processed=dict(answer.counts), tasks_error=answer.error)

    def stop(self) -> None:
        """Stop sending; wait (at most a write's timeout and a little) for the writes in flight."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._pool.shutdown(wait=True, cancel_futures=True)
