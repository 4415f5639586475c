"""How a verdict is recorded: :class:`Verdict`, and the recording half of a drill's result.

:class:`Judged` adds to :class:`~gameday.verdicts.figures.DrillFigures` the verdicts asserted so
far and the one way each ``assert_*`` records its outcome (:meth:`Judged._verdict`): ``pass``,
``fail`` (its ``AssertionError``), ``n/a`` with the reason, or ``inconclusive`` where the harness
was starved (:mod:`gameday.verdicts.harness`; raised as :class:`gameday.errors.HarnessStarved`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from gameday.errors import HarnessStarved
from gameday.verdicts import harness
from gameday.verdicts.figures import DrillFigures
from gameday.verdicts.measure import Figure
from gameday.verdicts.registry import NA


@dataclass(frozen=True)
class Verdict:
    """One ``assert_*`` call and how it ended."""

    name: str
    """The verdict's name in :data:`~gameday.verdicts.registry.VERDICTS` (``switchover``,
    ``versions``, ...; ``<figure>_vs_prediction`` for the predicted windows)."""
    outcome: Literal["pass", "fail", "n/a", "inconclusive"]
    """``inconclusive``: it would have failed, but the harness was starved (the detail says how,
    and what it would have said); neither a pass nor a fail of the federation."""
    detail: str = ""
    """The failure message, the reason it is not applicable, or for a pass what it was judged on
    where a part of it had no input (the headroom's utilisation without a utilisation source)."""
    figure: str = ""
    """What was measured, as shown (``2.31 s``, ``71 % peak utilisation``); empty: no figure."""
    resolution: str = ""
    """How precisely it is known (``± 0.10 s``); empty: exact or not a duration."""
    limit: str = ""
    """What it was judged against (``180 s``, ``80 %``, ``0 alarms``)."""
    false_failure: str = ""
    """For a statistical verdict, the most probability with which it fails a healthy federation
    (``0.001``, :mod:`gameday.verdicts.stats`); empty: not statistical."""

    def __str__(self) -> str:
        return f"{NA}{self.detail}" if self.outcome == "n/a" else self.outcome

    def as_dict(self) -> dict[str, str]:
        out = {"name": self.name, "outcome": self.outcome, "detail": self.detail, "figure": self.figure,
               "resolution": self.resolution, "limit": self.limit}
        if self.false_failure:
            out["false_failure"] = self.false_failure
        return out


@dataclass
class _Measured:
    """What an ``assert_*`` fills in while it judges (the figure, resolution and limit it used)."""

    figure: str = ""
    resolution: str = ""
    limit: str = ""
    detail: str = ""
    """For a pass: what it was judged on, where part of its input was missing."""
    false_failure: str = ""
    borderline: bool = False
    """A pass that its figure's resolution does not settle (the limit lies within it): with a
    starved harness, whose resolution is wider than asked for, that pass is inconclusive."""
    exact: bool = False
    """Set before a failure that no sampling rate can explain (a version that went back, N-1
    arithmetic over declared capacities): a starved harness does not make it inconclusive."""

    def duration(self, f: Figure, limit: float) -> None:
        self.figure = "not reached" if f.value is None else f"{f.value:.2f} s"
        self.resolution = "" if f.value is None else f"± {f.resolution:.2f} s"
        self.limit = f"{limit:g} s"
        self.borderline = f.value is not None and f.value <= limit < f.value + f.resolution


_JUDGED = "; judged on that observation: "
"""Between what starved the harness and what a verdict would have said, in an inconclusive one."""

VerdictHook = Callable[["Verdict", BaseException | None], None]
"""Called as each ``assert_*`` ends with its verdict and the assertion it raised (None: it
passed or was not applicable); a report renders it (an Allure step that fails with it)."""


@dataclass
class Judged(DrillFigures):
    """A drill's figures and the verdicts asserted on them, each recorded as it ends."""

    verdicts: list[Verdict] = field(default_factory=list)
    """Every ``assert_*`` called on this result, in order."""
    on_verdict: VerdictHook | None = None
    """Told of every verdict as its ``assert_*`` ends (the report's steps)."""


    @contextmanager
    def _verdict(self, name: str, *, exact: bool = False) -> Iterator[_Measured]:
        """Record how the ``assert_*`` in the block ended, with what it measured; an *exact*
        verdict (exact counts, not samples at a rate) is never made inconclusive."""
        m = _Measured()
        try:
            yield m
        except AssertionError as exc:
            first = str(exc).splitlines()[0][:300] if str(exc) else ""
            if not (exact or m.exact) and (starved := self.starvation()):
                inconclusive = self._inconclusive(name, first, starved)
                self._record(Verdict(name, "inconclusive", str(inconclusive), m.figure, m.resolution, m.limit,
                                     m.false_failure), inconclusive)
                raise inconclusive from exc
            self._record(Verdict(name, "fail", first, m.figure, m.resolution, m.limit, m.false_failure), exc)
            raise
        if m.borderline and (starved := self.starvation()):
            inconclusive = self._inconclusive(name, f"{m.figure} {m.resolution} against {m.limit}: the limit lies "
                                                    "within the widened resolution", starved)
            self._record(Verdict(name, "inconclusive", str(inconclusive), m.figure, m.resolution, m.limit,
                                 m.false_failure), inconclusive)
            raise inconclusive
        self._record(Verdict(name, "pass", m.detail, m.figure, m.resolution, m.limit, m.false_failure), None)

    @staticmethod
    def _inconclusive(name: str, would: str, starved: harness.Starvation) -> HarnessStarved:
        return HarnessStarved(f"{name} inconclusive: {starved.describe()}{_JUDGED}{would}")

    def _record(self, v: Verdict, exc: BaseException | None) -> None:
        self.verdicts.append(v)
        if self.on_verdict is not None:
            self.on_verdict(v, exc)

    def _na(self, name: str) -> str | None:
        """The reason *name* is not applicable (recorded as its verdict), or None."""
        reason = self.not_applicable().get(name)
        if reason is not None:
            self._record(Verdict(name, "n/a", reason), None)
        return reason
