"""Was the harness able to observe? A starved harness makes a failing verdict *inconclusive*.

Every figure is known to the resolution its sources were read at (DESIGN.md §4: at least every
100 ms). On a busy machine the observer may not get there: its own loop falls behind, or a
source that answers (a loopback GSLB, a surviving gateway) is read at half the asked rate with
second-long gaps, because the CPU that both the observer and a co-located federation need is
taken by something else. A verdict that fails then says something about the machine, not the
federation, and must not blame the federation: it is recorded ``inconclusive`` with the rates
and gaps measured, and raises :class:`gameday.errors.HarnessStarved` (never an
``AssertionError``). A verdict that passes with a starved harness stays a pass: its figure was
within the limit at the (wider) resolution it states.

What counts (:func:`assess`), over the fault's window only (a slow bring-up does not matter):

- ``observer``: the observer's own loop (ticks), always: its rate is the harness's;
- every other source whose every read in the window was answered (a read that failed or hung
  is the fault's doing: a stopped gateway, a blackholed region), read at under
  :data:`STARVED_RATE` of its nominal rate (over a window of at least
  :data:`RATE_MIN_INTERVALS` of its intervals), or with a gap longer than :data:`STARVED_GAP_S`
  (or :data:`STARVED_GAP_POLLS` of its own intervals, for slower sources).

On loopback a read takes milliseconds: a source that answers every read but is read at half
its rate is held back by CPU, on the harness's side or on the federation's (which shares the
machine on the local target). A remote source that is slow to answer for real shows the same
way; its figures cannot be known to DESIGN.md's resolution either, and the verdict says so
rather than fail the federation on them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from gameday.model.timeline import PollRate

STARVED_RATE = 0.5
"""A source read at under this share of its nominal rate is starved (the issue's "under half
the asked rate"): the figure's resolution is at least twice what DESIGN.md asks."""
STARVED_GAP_S = 1.0
"""A 10 Hz source with a gap between two reads longer than this (seconds) is starved: five of
the reference federation's 0.2 s probe intervals, ten observer ticks passed unobserved."""
STARVED_GAP_POLLS = 5
"""For a slower source (utilisation at 2 Hz) the gap limit is this many of its own intervals."""
RATE_MIN_INTERVALS = 10
"""The rate is judged only over a window of at least this many of the source's intervals (1 s
at 10 Hz): over a shorter one, one late read moves it by more than the threshold (an aborted
drill's 0.3 s window showed "3.5 Hz of 10" with its longest gap 0.26 s). The gap is always judged."""
OBSERVER = "observer"
"""The observer's own loop in :meth:`gameday.observers.observer.Observer.poll_rates`."""
CHECK_TIMEOUTS = "federation check timeouts"
"""The source of the federation's own timed-out health checks in the observer's rates."""
EXIT_INCONCLUSIVE = 6
"""The exit status of a run whose only failures were inconclusive (pytest uses 0-5)."""
INCONCLUSIVE = "inconclusive"
"""The outcome a verdict is recorded with (beside ``pass``, ``fail``, ``n/a``)."""


def gap_limit(rate: PollRate) -> float:
    """The longest gap between two reads of *rate*'s source that is not starvation, seconds."""
    if rate.nominal_hz <= 0:
        return float("inf")
    return max(STARVED_GAP_S, STARVED_GAP_POLLS / rate.nominal_hz)


def is_starved(rate: PollRate) -> bool:
    """*rate* (one source over the window) was starved: read too rarely or with too long a gap,
    though it answered every read (the observer's loop: always judged)."""
    if rate.nominal_hz <= 0 or (rate.source != OBSERVER and rate.answered < rate.polls):
        return False
    if rate.source != OBSERVER and rate.polls == 0:
        return False  # never read in the window: the figure says "not observed", not this
    judged_rate = rate.span_s is None or rate.span_s * rate.nominal_hz >= RATE_MIN_INTERVALS
    return (judged_rate and rate.achieved_hz < STARVED_RATE * rate.nominal_hz) or rate.max_gap_s > gap_limit(rate)


def describe(rate: PollRate) -> str:
    """``dns read 4.9 times/s of 10 asked (longest gap 1.07 s, limit 1.00 s)``."""
    what = "the observer's loop ran" if rate.source == OBSERVER else f"{rate.source} was read"
    return (f"{what} {rate.achieved_hz:.1f} times/s of {rate.nominal_hz:g} asked "
            f"(longest gap {rate.max_gap_s:.2f} s, limit {gap_limit(rate):.2f} s)")


@dataclass(frozen=True)
class Starvation:
    """What :func:`assess` found: the starved sources and the federation's checks that timed out
    against regions the drill did not touch (both empty: the harness kept up)."""

    starved: tuple[PollRate, ...] = ()
    window_s: float = 0.0
    """How long the judged window was, seconds."""
    check_timeouts: tuple[tuple[str, int], ...] = ()
    """(region, count): the federation's own health checks of an untouched region that timed out
    in the window: its checker, or that gateway, was starved of CPU."""

    def __bool__(self) -> bool:
        return bool(self.starved or self.check_timeouts)

    def describe(self) -> str:
        """``harness starved over the 12.3 s window: dns was read 4.9 times/s of 10 asked (...)``;
        where the observer's own loop was starved, that alone (its sources follow from it)."""
        shown = self.starved[:1] if self.starved and self.starved[0].source == OBSERVER else self.starved[:3]
        parts = [describe(r) for r in shown]
        more = len(self.starved) - len(shown)
        if more:
            parts[-1] += f", and {more} " + ("source(s) with it" if shown[0].source == OBSERVER else "more source(s)")
        if self.check_timeouts:
            parts.append("the federation's own health checks timed out against regions the drill did not touch ("
                         + ", ".join(f"{r}: {n}" for r, n in self.check_timeouts) + "): its processes were starved")
        return f"harness starved over the {self.window_s:.1f} s window: {'; '.join(parts)}"


def window(rates: Mapping[str, PollRate]) -> float:
    """How long the window of *rates* was, seconds (reads / rate of any source that was read)."""
    return max((r.polls / r.achieved_hz for r in rates.values() if r.achieved_hz > 0), default=0.0)


def assess(rates: Mapping[str, PollRate], check_timeouts: Mapping[str, int] | None = None,
           untouched: Collection[str] = ()) -> Starvation:
    """The starved sources among *rates* (each over the fault's window), the observer's own
    loop first, then the slowest; and the regions among *untouched* (not broken by the drill)
    against which the federation's own health checks timed out in the window (*check_timeouts*)."""
    starved = [r for r in rates.values() if is_starved(r)]
    starved.sort(key=lambda r: (r.source != OBSERVER, r.achieved_hz / r.nominal_hz if r.nominal_hz else 1.0))
    timeouts = tuple(sorted((r, n) for r, n in (check_timeouts or {}).items() if n > 0 and r in untouched))
    return Starvation(tuple(starved), window(rates), timeouts)


def summary(rates: Mapping[str, PollRate], starvation: Starvation | None = None) -> dict[str, object]:
    """For JUnit's ``gameday_harness`` property and figures-N.json: whether the harness was
    starved (*starvation*, default: judged on *rates* alone), the federation's checks that timed
    out against untouched regions, and each source's nominal and achieved rate and longest gap
    over the window."""
    s = starvation if starvation is not None else assess(rates)
    return {"starved": bool(s), "window_s": round(window(rates), 2), "check_timeouts": dict(s.check_timeouts),
            "sources": {k: {"nominal_hz": round(r.nominal_hz, 2), "achieved_hz": round(r.achieved_hz, 2),
                            "max_gap_s": round(r.max_gap_s, 3), "starved": is_starved(r)}
                        for k, r in rates.items()}}
