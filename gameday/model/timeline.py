"""The drill timeline: every observation, stamped on one monotonic clock when taken.

All ``t`` values are ``time.monotonic()`` seconds of the harness process. On Linux that
is CLOCK_MONOTONIC, the same clock the federation's components write into their log
lines (``mono``), so alarm lines from component logs land on the same timeline.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True, slots=True)
class NodeObs:
    """An entry node's reading as seen at ``t`` (``ok`` False: it did not answer).

    ``version``, ``routable`` and ``stale`` are None where the node's source does not give
    them (a federation's entry nodes may report routable regions but no version, or only
    answer): a measurement then uses what is there, and says which definition it used.
    """

    t: float
    node: str
    ok: bool
    version: int | None = None
    routable: tuple[str, ...] | None = None
    stale: bool | None = None
    sent: float = 0.0
    """When the request was sent; ``t - sent`` bounds when the state was true."""


@dataclass(frozen=True, slots=True)
class DnsObs:
    """One GSLB answer: the regions whose gateway addresses it carried."""

    t: float
    ok: bool
    regions: tuple[str, ...] = ()
    """The distinct regions named by this tick's answers."""
    ttl: int | None = None
    answers: tuple[str, ...] = ()
    """One region per answered query of the tick (for answer shares)."""


@dataclass(frozen=True, slots=True)
class CpObs:
    """The control-plane version seen at ``t`` (polled, or heard on the broadcast)."""

    t: float
    version: int | None
    source: str = "poll"


@dataclass(frozen=True, slots=True)
class RegionalCpObs:
    """A region's own control-plane version seen at ``t`` (the regional layout, R14)."""

    t: float
    region: str
    version: int | None


@dataclass(frozen=True, slots=True)
class AlarmObs:
    """A stale-snapshot alarm (or its clearing) logged by a node."""

    t: float
    node: str
    event: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class UtilObs:
    """A region's utilisation (requests in the last second / declared capacity)."""

    t: float
    region: str
    utilisation: float
    rejected_total: int = 0


@dataclass(frozen=True, slots=True)
class RequestRec:
    """One client request from the load generator."""

    t: float
    """When the request was sent."""
    status: int
    """HTTP status; 0 for a transport error (refused, timeout, DNS failure)."""
    latency: float
    region: str | None = None
    """Region that served it (from ``X-Served-By``)."""
    error: str | None = None
    client: str | None = None
    """The client that sent it (its own DNS cache and connection pool), where the load
    generator names one: the unit of the request-ratio verdicts' bounds, since a client's
    requests fail together (:func:`gameday.verdicts.stats.units_above`)."""

    @property
    def failed(self) -> bool:
        return self.status == 0 or self.status >= 500

    @property
    def overload(self) -> bool:
        return self.status in (429, 503)


@dataclass(frozen=True, slots=True)
class ComponentObs:
    """A process seen alive or dead at ``t``; recorded when its state changes (and once at
    the start), so the list reads as the component's history."""

    t: float
    name: str
    alive: bool
    pid: int | None = None
    role: str = ""
    detail: str = ""
    last_alive: float | None = None
    """For a death: when it was last seen alive (it died in ``(last_alive, t]``)."""


@dataclass(frozen=True, slots=True)
class Casualty:
    """Why the watcher failed a drill: a component died, or the load generator collapsed."""

    t: float
    """When the watcher saw it (its first observation of the death or the collapse)."""
    what: str
    """``component`` or ``load``."""
    name: str
    """The component (``proxy-b``, ``nats``, ``locust``)."""
    message: str
    """The whole sentence: what, which pid, when relative to the fault, whether the fault
    caused it, what was reverted."""
    pid: int | None = None
    caused_by_fault: bool = False
    """False for every casualty the watcher reports: what a fault in effect stops on purpose
    is expected dead and never a casualty, so whatever is named died of something else (the
    fault may have provoked it; the message says what the fault itself stops)."""
    last_alive: float | None = None
    during: str | None = None
    """The innermost fault in effect (``gateway_down b``), or None during the baseline."""

    def as_dict(self, t_ref: float) -> dict[str, object]:
        """Plain data for the report, times in seconds relative to *t_ref* (the fault)."""
        return {"what": self.what, "name": self.name, "pid": self.pid, "t_s": round(self.t - t_ref, 3),
                "last_alive_s": None if self.last_alive is None else round(self.last_alive - t_ref, 3),
                "caused_by_fault": self.caused_by_fault, "during": self.during, "message": self.message}


@dataclass(frozen=True, slots=True)
class Mark:
    """A phase boundary of the drill (``baseline``, ``inject_call``, ``fault``, ...)."""

    t: float
    label: str
    detail: str = ""


WriteOutcome = Literal["ack", "refused", "indeterminate"]


@dataclass(frozen=True, slots=True)
class WriteRec:
    """One write the drill's writer sent to the federation's state layer (DESIGN.md section 9).

    ``outcome``: ``ack`` (the federation answered that it stored it), ``refused`` (it
    answered that it did not, or nothing was reached), ``indeterminate`` (no answer in time,
    or an answer that does not say: it may or may not have been stored)."""

    id: str
    t: float
    """When it was sent."""
    t_done: float
    """When its answer came (or the writer gave up on it)."""
    outcome: WriteOutcome
    region: str | None = None
    """The region that acknowledged it (``ack``)."""
    seq: int | None = None
    """The store's sequence number for it (``ack``)."""
    error: str | None = None
    entry: str | None = None
    """The address it was sent to."""
    kind: Literal["write", "task"] = "write"
    """``write``: a record stored by id; ``task``: a task added to the background workers' queue."""
    epoch: int | None = None
    """The primary's epoch that acknowledged it, where the store says (``async``)."""


@dataclass(frozen=True, slots=True)
class ReadRec:
    """One read-after-write read: a writer client reading back, through the global entry, a
    write it already had acknowledged (DESIGN.md section 9's stale reads).

    ``found``: True, the federation served it; False, it answered that it does not hold it (a
    stale read); None, it did not answer (not a stale read: the read path was down)."""

    id: str
    client: int
    t_ack: float
    """When the write's acknowledgement came."""
    t: float
    """When the read was sent."""
    t_done: float
    found: bool | None
    region: str | None = None
    """The region that served the read, where the answer says."""
    error: str | None = None
    entry: str | None = None
    """The address it was sent to."""


@dataclass(frozen=True)
class DataCheck:
    """The read-back of the drill's writes once the federation was steady again: which
    acknowledged writes the store no longer holds (DESIGN.md section 9's RPO)."""

    t: float
    """When the read-back was made."""
    acked: tuple[str, ...]
    """The acknowledged writes it looked for (those acknowledged before it started)."""
    missing: tuple[str, ...]
    """Acknowledged, and not in the store: lost."""
    unread: tuple[str, ...] = ()
    """Acknowledged, and the store did not answer for them: not known either way."""
    indeterminate_found: tuple[str, ...] = ()
    """Indeterminate writes that turned up in the store (recovered)."""
    indeterminate: int = 0
    """Indeterminate writes looked for."""
    error: str | None = None
    """Why the read-back could not be made at all (None: it was)."""
    where: str = ""
    """Through what it read (the entry address)."""
    tasks_acked: tuple[str, ...] | None = None
    """The acknowledged tasks it looked for (None: the federation has no task queue)."""
    processed: Mapping[str, int] = field(default_factory=dict)
    """Task id -> times processed (absent: never), once every acknowledged task was or a wait ran out."""
    tasks_error: str | None = None
    """Why the processed counts could not be read."""


@dataclass
class Timeline:
    """Thread-safe append-only record of one drill."""

    t0: float = 0.0
    nodes: list[NodeObs] = field(default_factory=list)
    dns: list[DnsObs] = field(default_factory=list)
    cp: list[CpObs] = field(default_factory=list)
    regional_cp: list[RegionalCpObs] = field(default_factory=list)
    """Regional control planes' versions (R14); kept apart from :attr:`cp`, the global one."""
    alarms: list[AlarmObs] = field(default_factory=list)
    util: list[UtilObs] = field(default_factory=list)
    requests: list[RequestRec] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    liveness: list[ComponentObs] = field(default_factory=list)
    writes: list[WriteRec] = field(default_factory=list)
    """The writer's writes (a state layer only), in the order they were answered."""
    reads: list[ReadRec] = field(default_factory=list)
    """The writer's read-after-write reads of its acknowledged writes, in the order answered."""
    data_check: DataCheck | None = None
    """The read-back of the writes after the restore (None: not made)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, obs: NodeObs | DnsObs | CpObs | RegionalCpObs | AlarmObs | UtilObs | RequestRec | Mark
            | ComponentObs | WriteRec | ReadRec) -> None:
        with self._lock:
            if isinstance(obs, WriteRec):
                self.writes.append(obs)
            elif isinstance(obs, ReadRec):
                self.reads.append(obs)
            elif isinstance(obs, RegionalCpObs):
                self.regional_cp.append(obs)
            elif isinstance(obs, NodeObs):
                self.nodes.append(obs)
            elif isinstance(obs, DnsObs):
                self.dns.append(obs)
            elif isinstance(obs, CpObs):
                self.cp.append(obs)
            elif isinstance(obs, AlarmObs):
                self.alarms.append(obs)
            elif isinstance(obs, UtilObs):
                self.util.append(obs)
            elif isinstance(obs, RequestRec):
                self.requests.append(obs)
            elif isinstance(obs, ComponentObs):
                self.liveness.append(obs)
            else:
                self.marks.append(obs)

    def extend_requests(self, recs: list[RequestRec]) -> None:
        with self._lock:
            self.requests.extend(recs)

    def mark(self, t: float, label: str, detail: str = "") -> Mark:
        m = Mark(t, label, detail)
        self.add(m)
        return m

    def mark_time(self, label: str) -> float | None:
        """The time of the last mark called *label*, or None."""
        with self._lock:
            for m in reversed(self.marks):
                if m.label == label:
                    return m.t
        return None

    def copy(self) -> Timeline:
        """A consistent snapshot (lists copied under the lock)."""
        with self._lock:
            return Timeline(
                t0=self.t0, nodes=list(self.nodes), dns=list(self.dns), cp=list(self.cp),
                regional_cp=list(self.regional_cp),
                alarms=list(self.alarms), util=list(self.util),
                requests=sorted(self.requests, key=lambda r: r.t), marks=list(self.marks),
                liveness=list(self.liveness), writes=list(self.writes), reads=list(self.reads),
                data_check=self.data_check,
            )


@dataclass
class FaultWindow:
    """When a fault was injected and reverted, on the timeline's clock.

    ``t_fault`` is when the injection call returned (the fault is in effect); the call
    started at ``t_call``: ``t_fault - t_call`` is the injection uncertainty.
    """

    kind: str
    region: str | None
    t_call: float
    t_fault: float
    t_revert: float | None = None
    """When the revert call returned."""
    t_restored: float | None = None
    """When steady state was observed again after the revert."""
    t_observed: float | None = None
    """When the observation of the fault ended: after the steady state, and the extra
    observation its test asked for (``observe_after``, ``observe_until``: e.g. until the
    restore's version was recorded). The version check judges up to here."""
    aborted: str | None = None
    """Why the drill did not complete its observation (None: it did): a stop condition or a
    casualty reverted the fault early, or its block was left by a signal or an error
    (:func:`abort_reason`). The history keeps aborted drills out of the trend and the
    regression verdict."""
    params: dict[str, object] = field(default_factory=dict)
    t_revert_call: float | None = None
    """When the revert call started: the federation may react (a version for the restore)
    before the call returns, e.g. while a region's processes are resumed one by one."""

    @property
    def injection_uncertainty(self) -> float:
        return self.t_fault - self.t_call


def latest_per_node(obs: Iterable[NodeObs], *, nodes: Collection[str] | None = None, since: float | None = None,
                    until: float | None = None) -> dict[str, NodeObs]:
    """Each entry node's last reading of *obs* (in the order given), of *nodes* only if given,
    taken in ``[since, until]`` (either end open when None)."""
    latest: dict[str, NodeObs] = {}
    for o in obs:
        if (nodes is None or o.node in nodes) and (since is None or o.t >= since) and (until is None or o.t <= until):
            latest[o.node] = o
    return latest


def abort_reason(exc: BaseException) -> str | None:
    """Why a fault block that *exc* left did not complete its observation, for
    :attr:`FaultWindow.aborted`; None for an ``AssertionError`` (a verdict judged inside the
    block: the figures were observed and stand)."""
    if isinstance(exc, AssertionError):
        return None
    text = next(iter(str(exc).splitlines()), "").strip()
    if isinstance(exc, KeyboardInterrupt):  # gameday's signal handler names the signal
        return f"interrupted by {text}" if text else "interrupted (KeyboardInterrupt)"
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


@dataclass(frozen=True)
class PollRate:
    """How often one source was read and answered over the observer's life."""

    source: str
    """``gateway-a``, ``dns``, ``control_plane``, ``alarms proxy-a``, ``utilisation a``."""
    description: str
    nominal_hz: float
    """The rate asked for (1 / the observer interval; lower for utilisation)."""
    achieved_hz: float
    """Polls completed per second over the observer's life: each is an observation on the
    timeline, answered or not (a stopped gateway refusing at 10 Hz is observed at 10 Hz)."""
    polls: int
    """Reads completed (answered or not)."""
    answered: int
    """Reads the source answered (ok)."""
    skipped: int
    """Ticks at which its previous read was still in flight (it fell behind)."""
    max_gap_s: float
    """Longest time between two consecutive completed reads."""
    last_error: str | None = None
    answered_hz: float | None = None
    """Polls answered per second (None: not computed)."""
    span_s: float | None = None
    """The length of the window the rate is over, seconds (None: not known)."""

    @property
    def behind(self) -> bool:
        """Observed at less than 80 % of its nominal rate: the gaps between its observations,
        and so the resolution of what it measures, are wider than the observer's interval."""
        return self.achieved_hz < 0.8 * self.nominal_hz

    def as_dict(self) -> dict[str, object]:
        return {"source": self.source, "description": self.description, "nominal_hz": round(self.nominal_hz, 2),
                "achieved_hz": round(self.achieved_hz, 2),
                "answered_hz": None if self.answered_hz is None else round(self.answered_hz, 2),
                "polls": self.polls, "answered": self.answered, "skipped": self.skipped,
                "max_gap_s": round(self.max_gap_s, 3), "behind": self.behind, "last_error": self.last_error,
                "span_s": None if self.span_s is None else round(self.span_s, 2)}
