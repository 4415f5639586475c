"""What a drill evaluates at every observer tick: the stop condition and the live progress line.

Kept apart from the orchestration (:mod:`gameday.drill`), which calls them: both are
pure functions of what the timeline holds at ``now``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gameday.model.timeline import FaultWindow, RequestRec, Timeline, latest_per_node


def recent_error_ratio(requests: Sequence[RequestRec], now: float, window: float = 1.0) -> tuple[float, int]:
    """Client error ratio of the requests completed in the last *window* seconds, and their count.

    Reads only the newest 2000 records: enough for a second at any rate a drill offers.
    """
    recent = [r for r in requests[-2000:] if now - window <= r.t + r.latency <= now]
    if not recent:
        return 0.0, 0
    return sum(r.failed for r in recent) / len(recent), len(recent)


@dataclass
class StopCondition:
    """Abort when the client error ratio stays above *ratio* for *after* seconds."""

    ratio: float
    after: float
    """Seconds the breach must last."""
    breach_since: float | None = None

    def check(self, now: float, ratio: float, n: int) -> str | None:
        """The reason to abort, once the breach has lasted long enough; None otherwise."""
        if n == 0 or ratio <= self.ratio:
            self.breach_since = None
            return None
        if self.breach_since is None:
            self.breach_since = now
            return None
        if now - self.breach_since < self.after:
            return None
        return (f"client error ratio {ratio:.0%} above {self.ratio:.0%} for {now - self.breach_since:.1f} s "
                f"(stop after {self.after:g} s)")


def progress_line(*, phase: str, now: float, ratio: float, watched: str, casualty: str | None,
                  window: FaultWindow | None, timeline: Timeline | None, survivors: tuple[str, ...]) -> str:
    """The live line: the fault, its phase, time since the fault, DNS, entry nodes switched,
    client errors and what the watcher sees (or the casualty failing the drill)."""
    if casualty is not None:
        return f"[gameday] FAILING: {casualty}"[:240]
    if window is None or timeline is None:
        return f"[gameday] {phase}  {watched}".rstrip()
    w, tl = window, timeline
    parts = [f"[gameday] {w.kind} {w.region or ''}".rstrip(), f"{phase:<8}", f"t{now - w.t_fault:+.1f}s"]
    if w.region is not None:
        dns_recent = tl.dns[-5:]
        parts.append("dns converged" if dns_recent and all(w.region not in d.regions for d in dns_recent)
                     else f"dns still answers {w.region}")
        latest = latest_per_node(tl.nodes[-60:])
        surv = [latest[n] for n in survivors if n in latest]
        moved = sum(1 for o in surv if o.ok and o.routable is not None and w.region not in o.routable)
        parts.append(f"entry nodes switched {moved}/{len(survivors)}")
    parts.append(f"client errors {ratio:.1%}")
    if watched:
        parts.append(watched)
    return "  ".join(parts)
