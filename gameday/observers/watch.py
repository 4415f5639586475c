"""The drill's watcher: is everything the drill relies on still there?

The observer records every process's liveness on the timeline (a
:class:`~gameday.model.timeline.ComponentObs` at each change); the watcher reads it, and the
load generator's achieved rate, every tick and says when a drill must stop at once:

- a component died that no fault in effect stops (the fault's own work - ``gateway_down
  b`` stopping ``gateway-b`` - is expected and never a casualty);
- the load generator exited, or its achieved rate collapsed: the verdicts would then
  judge a load nobody offered ("clients did not recover" at 0.2 of 60 req/s).

It only decides; the drill reverts and raises. No I/O here: everything it reads is on
the timeline or in the load generator's records, stamped on the drill's one clock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from gameday.errors import ComponentDied, DrillAborted, LoadCollapsed
from gameday.model.parts import LOAD_ROLE, SUPERVISOR_ROLE
from gameday.model.timeline import Casualty, ComponentObs, Timeline, latest_per_node


class LoadGauge(Protocol):
    """What the watcher reads of a load generator (:class:`gameday.load.runner.LoadRunner`)."""

    rate: float
    users: int
    timeout: float

    @property
    def first_request_at(self) -> float | None: ...

    def completed_rate(self, start: float, end: float) -> float: ...


@dataclass(frozen=True)
class LoadBounds:
    """When achieved load counts as offered, and when as collapsed. Seconds and fractions."""

    ramp: float = 1.0
    """After the first request, the time locust takes to start every user (the runner asks
    for a spawn rate of ``users`` per second, so 1 s)."""
    lag: float = 0.5
    """How far behind now the rate window ends: a completed request reaches the harness
    after locust's 0.2 s buffer flush and the next 0.1 s poll; 0.5 s leaves margin."""
    window: float = 2.5
    """Collapse window: long enough that a 1 s request timeout cannot empty it, short
    enough that a stalled generator is named within ~3 s."""
    collapse: float = 0.2
    """Collapsed below this fraction of the offered rate (but see :meth:`collapse_bound`)."""
    baseline: float = 0.5
    """Before injecting, at least this fraction of the offered rate must be achieved. A
    healthy local federation answers in milliseconds, so a constant-throughput generator
    achieves ~95-100 %; half leaves room for a busy 2-core CI machine, yet a generator
    below it would have the N-1 and recovery verdicts judge less than half the load they
    name."""
    baseline_window: float = 1.0
    """Baseline rate window, seconds (at least ten requests' worth at the offered rate)."""

    def collapse_bound(self, rate: float, users: int, timeout: float) -> float:
        """The achieved rate (req/s) below which the generator itself has failed.

        A fault can slow each request to at most its timeout, and a constant-throughput user
        then still sends ``1 / timeout`` requests per second: ``users / timeout`` survives a
        total outage. Half of that (one DNS and one HTTP timeout in a row) or
        :attr:`collapse` of the offered rate, whichever is lower, so that no fault in the
        catalogue - a blackhole included - can look like a collapse.
        """
        return min(self.collapse * rate, 0.5 * users / timeout)


@dataclass(frozen=True)
class InEffect:
    """A fault in effect (or being injected) and the components it stops on purpose."""

    label: str
    """``gateway_down b``."""
    t_fault: float | None
    """When it took effect; None while it is still being injected."""
    stops: frozenset[str]


class Watcher:
    """Decides, from the timeline and the load records, whether a drill must stop now.

    Thread use: :meth:`expect`/:meth:`unexpect` from the test thread, :meth:`check` from
    the observer thread; a lock keeps the expected set consistent between them.
    """

    def __init__(self, timeline: Timeline, *, load: LoadGauge | None, liveness_observed: bool,
                 bounds: LoadBounds | None = None) -> None:
        self.tl = timeline
        self.load = load
        self.liveness_observed = liveness_observed
        self.bounds = bounds or LoadBounds()
        self._lock = threading.Lock()
        self._faults: dict[str, InEffect] = {}
        # name -> when it stopped being expected dead: a death seen before that instant
        # (e.g. just before a revert restarted it) is the fault's work, not a casualty.
        self._expected_until: dict[str, float] = {}

    # -- what the faults in effect stop -----------------------------------------------------
    def expect(self, token: str, fault: InEffect) -> None:
        """Fault *token* is being injected: what it stops is expected dead from now on."""
        with self._lock:
            self._faults[token] = fault

    def took_effect(self, token: str, t_fault: float) -> None:
        with self._lock:
            f = self._faults.get(token)
            if f is not None:
                self._faults[token] = InEffect(f.label, t_fault, f.stops)

    def unexpect(self, token: str, now: float) -> None:
        """Fault *token* was reverted (its components run again)."""
        with self._lock:
            f = self._faults.pop(token, None)
            if f is not None:
                for name in f.stops:
                    self._expected_until[name] = now

    def in_effect(self) -> list[InEffect]:
        with self._lock:
            return list(self._faults.values())

    # -- the checks ---------------------------------------------------------------------------
    def latest(self) -> dict[str, ComponentObs]:
        """The last liveness observation of every process."""
        out: dict[str, ComponentObs] = {}
        for o in list(self.tl.liveness):
            out[o.name] = o
        return out

    def check(self, now: float, *, baseline_start: float | None = None) -> Casualty | None:
        """A casualty if one is visible now, else None.

        Args:
            now: the observer tick's time.
            baseline_start: while no fault is in effect yet, when the baseline began (the
                instant messages are relative to).
        """
        faults = self.in_effect()
        expected = frozenset().union(*(f.stops for f in faults)) if faults else frozenset()
        # A dead supervisor first: the components it started died because it did.
        for o in sorted(self.latest().values(), key=lambda o: o.role != SUPERVISOR_ROLE):
            if o.alive or (o.name in expected and o.role != LOAD_ROLE):
                continue
            if o.t <= self._expected_until.get(o.name, float("-inf")):
                continue  # seen dead while its fault was still in effect; the revert restarts it
            return self._death(o, faults, baseline_start)
        return self._collapse(now, faults)

    def _ref(self, faults: list[InEffect], baseline_start: float | None) -> tuple[str, float | None, str]:
        """(how to write an instant, its reference time, the context) for messages."""
        effective = [f for f in faults if f.t_fault is not None]
        if effective:
            f = effective[-1]
            return "t", f.t_fault, f"during {f.label}"
        if faults:
            return "baseline", baseline_start, f"while {faults[-1].label} was being injected"
        return "baseline", baseline_start, "before anything was injected"

    @staticmethod
    def _at(t: float, ref: float | None, how: str) -> str:
        if ref is None:
            return "now"
        # Two decimals: liveness is read every 0.1 s, so the last-alive/first-dead pair
        # brackets the death to about that, and t-0.0 s would hide which side of the fault it was.
        return f"t{t - ref:+.2f} s" if how == "t" else f"{t - ref:.2f} s into the baseline"

    def _death(self, o: ComponentObs, faults: list[InEffect], baseline_start: float | None) -> Casualty:
        how, ref, context = self._ref(faults, baseline_start)
        pid = f" (pid {o.pid})" if o.pid is not None else ""
        if o.last_alive is None:
            seen = " (already dead when first observed)"
        else:
            seen = f" (last seen alive {self._at(o.last_alive, ref, how)})" if ref is not None else ""
        if o.role == LOAD_ROLE:
            cause = "not caused by the fault: no fault stops the load generator"
            what = "load"
            offering = f", offering {self.load.rate:g} req/s," if self.load is not None else ""
            head = f"load generator {o.name}{pid}{offering} {o.detail.split(';')[0] or 'exited'}"
        else:
            stops = sorted({n for f in faults for n in f.stops})
            labels = ", ".join(f.label for f in faults)
            verb = "stops" if len(faults) == 1 else "stop"
            cause = ("not caused by a fault" if not faults else
                     f"not caused by the fault: {labels} {verb} only {', '.join(stops)}" if stops else
                     f"not caused by the fault: {labels} {verb} no component")
            what = "component"
            head = f"{o.name}{pid} exited"
        detail = o.detail.split("; ", 1)[1] if "; " in o.detail else ""
        message = f"{head} at {self._at(o.t, ref, how)}{seen} {context}; {cause}"
        if detail:
            message += f"; {detail}"
        return Casualty(t=o.t, what=what, name=o.name, message=message, pid=o.pid, caused_by_fault=False,
                        last_alive=o.last_alive, during=faults[-1].label if faults else None)

    def _collapse(self, now: float, faults: list[InEffect]) -> Casualty | None:
        """The achieved rate over the last window, once the ramp is over and a fault is in
        effect (before that, :meth:`baseline_load` judges the load against the stricter bound)."""
        if self.load is None or not faults:
            return None
        b = self.bounds
        first = self.load.first_request_at
        end = now - b.lag
        start = end - b.window
        if first is None or start < first + b.ramp:
            return None
        rate = self.load.completed_rate(start, end)
        bound = b.collapse_bound(self.load.rate, self.load.users, self.load.timeout)
        if rate >= bound:
            return None
        how, ref, context = self._ref(faults, None)
        floor = self.load.users / self.load.timeout
        message = (
            f"load generator collapsed at {self._at(now, ref, how)} {context}: it completed {rate:.1f} req/s "
            f"over [{self._at(start, ref, how)}, {self._at(end, ref, how)}], {rate / self.load.rate:.0%} of the "
            f"{self.load.rate:g} req/s offered, below the {bound:.3g} req/s bound; every locust process still "
            f"runs: not caused by the fault (with every request timing out, {self.load.users} users still "
            f"send {floor:.3g} req/s), the load generator itself stalled")
        return Casualty(t=now, what="load", name="locust", message=message,
                        during=faults[-1].label)

    def baseline_load(self, now: float) -> tuple[bool, float | None, str]:
        """Is the offered load achieved before injecting?

        Returns:
            (ok, the achieved rate or None while still ramping, what was seen).
        """
        if self.load is None:
            return True, None, "no load generator attached"
        b = self.bounds
        first = self.load.first_request_at
        window = max(b.baseline_window, 10.0 / self.load.rate)
        end = now - b.lag
        start = end - window
        if first is None or start < first + b.ramp:
            return False, None, "the load generator is still ramping up"
        rate = self.load.completed_rate(start, end)
        need = b.baseline * self.load.rate
        seen = (f"achieved load {rate:.1f} req/s over the last {window:.1f} s of {self.load.rate:g} req/s offered "
                f"(needs >= {b.baseline:.0%}, {need:.3g} req/s)")
        return rate >= need, rate, seen

    def summary(self, now: float) -> str:
        """For the live progress line: ``alive 19/19  load 59/60 req/s``."""
        parts = []
        latest = [o for o in self.latest().values() if o.role != LOAD_ROLE]
        if not self.liveness_observed:
            parts.append("liveness not observed")
        elif latest:
            stops = frozenset().union(*(f.stops for f in self.in_effect()))
            by_fault = sum(1 for o in latest if not o.alive and o.name in stops)
            parts.append(f"alive {sum(o.alive for o in latest)}/{len(latest)}"
                         + (f" ({by_fault} stopped by the fault)" if by_fault else ""))
        if self.load is not None:
            end = now - self.bounds.lag
            first = self.load.first_request_at
            if first is None or end - self.bounds.window < first + self.bounds.ramp:
                parts.append("load ramping up")
                return "  ".join(parts)
            parts.append(f"load {self.load.completed_rate(end - self.bounds.window, end):.0f}/"
                         f"{self.load.rate:g} req/s")
        return "  ".join(parts)


def abort_error(c: Casualty, reverted: list[tuple[str, float]], not_reverted: list[str],
                extra: str = "") -> DrillAborted:
    """The error a casualty fails the drill with: its message, then what was reverted.

    Args:
        reverted: ``(fault, seconds after it took effect)`` for each fault the casualty reverted.
        not_reverted: faults whose revert failed (the ledger keeps them).
        extra: a last clause (``gateway_down b was not injected``).
    """
    parts = [c.message]
    if reverted:
        parts.append("reverted at once: " + ", ".join(f"{label} at t{dt:+.2f} s" for label, dt in reverted))
    if not_reverted:
        parts.append("NOT reverted (the ledger keeps them; run `gameday restore`): " + ", ".join(not_reverted))
    if extra:
        parts.append(extra)
    cls = LoadCollapsed if c.what == "load" else ComponentDied
    return cls("; ".join(parts), casualty=c)


def steady_state(snap: Timeline, t0: float, nodes: tuple[str, ...], want: set[str], *,
                 control_plane: bool = True) -> tuple[bool, str]:
    """The steady-state hypothesis on the observations since *t0*: every entry node in
    *nodes* answered routing to every region in *want* (with a version, where its source
    gives one), the control plane answered (where there is a *control_plane* source), and the
    GSLB answered its latest query and every region in *want* at least once (its answers
    are weighted single addresses, so "at least once" is what the baseline can require).

    Returns:
        (whether it holds, what was seen, for the refusal message).
    """
    latest = latest_per_node(snap.nodes, nodes=nodes, since=t0)
    steady = {n for n, o in latest.items() if o.ok and (o.version is None or o.version)
              and (o.routable is None or want <= set(o.routable))}
    cp_seen = any(c.version for c in snap.cp if c.source == "poll" and c.t >= t0)
    dns = [d for d in snap.dns if d.t >= t0]
    dns_regions = {r for d in dns if d.ok for r in d.regions}
    dns_ok = bool(dns) and dns[-1].ok and want <= dns_regions
    dns_seen = ("no answer" if not any(d.ok for d in dns) else
                f"answered {sorted(dns_regions)}" + ("" if dns[-1].ok else ", but not its latest query"))
    cp_words = ("seen" if cp_seen else "not seen") if control_plane else "not observed (no source)"
    seen = (f"entry nodes routing to {sorted(want)}: {sorted(steady)} of {sorted(nodes)}; control plane "
            f"{cp_words}; GSLB (expected to answer {sorted(want)}): {dns_seen}")
    return steady == set(nodes) and (cp_seen or not control_plane) and dns_ok, seen
