"""Every verdict a drill can reach, in one table (:data:`VERDICTS`): the one place to add one.

An entry (:class:`VerdictKind`) says what a verdict is, and everything that reads verdicts
reads it from here:

- the verdict table's columns and their cells (:mod:`gameday.reports.table`; ``column`` and
  ``cell``), the Allure table's details and one-line verdict (``detail``, ``in_line``);
- when a verdict is not applicable and why (``needs``): ``DrillResult.not_applicable``,
  the ``n/a: <reason>`` an ``assert_*`` records, the table cell, run.json's
  ``not_applicable``, JUnit's ``gameday_na`` properties, and the skip of a test whose every
  verdict was not applicable (:mod:`gameday.plugin.reporting`) all come from it;
- the list of verdicts in README's "Verdicts" section (:func:`markdown_table`; a test keeps
  the README's copy in step).

How to add a verdict
--------------------

1. Measure the figure: a pure function of the drill's timeline (no I/O, no clocks), tested
   on hand-made timelines. In gameday it goes in :mod:`gameday.verdicts.measure` or
   :mod:`gameday.verdicts.capacity` beside the built-ins'; in a conftest, beside its entry
   (the example below measures inside its ``check``).
2. Register a :class:`VerdictKind`: its name, title and unit, the input it needs (``needs``
   returns the reason it is not applicable, or None), and ``check``, which measures and
   judges in one call and returns a :class:`Reading` (figure, limit, passed, and a failure
   message saying expected, seen, where and when).
3. A test asserts it with ``result.assert_verdict(name, **limits)``: n/a with the reason
   when its input is missing, else recorded pass or fail with its figure and limit (an
   Allure step, the verdict table's column, run.json), failing the test with the message.

The built-in verdicts predate ``check``: each has its own ``assert_*`` method on
:class:`gameday.verdicts.result.DrillResult` (named in ``asserts``, which a test keeps in
step with the class) because their return values are part of the API (a
:class:`~gameday.verdicts.measure.Figure`, a list of checks). A new verdict in gameday itself
may do the same; one from a conftest or plugin uses ``check``. Either way the entry is the
one place its n/a reason, column and documentation live.

A conftest or plugin adds one without touching gameday (``tests/test_verdict_registry.py``
runs this example, and drills with it from a conftest)::

    from gameday.verdicts.registry import VERDICTS, Reading, VerdictKind

    def _p99_latency(drill, limit=1.0):
        lo, hi = drill.fault.t_fault, drill.fault.t_revert or drill.fault.t_fault
        served = [r for r in drill.timeline.copy().requests if lo <= r.t <= hi and not r.failed]
        lat = sorted(r.latency for r in served)
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("inf")
        return Reading(figure=f"{p99 * 1000:.0f} ms", limit=f"{limit * 1000:.0f} ms", passed=p99 <= limit,
                       message=f"p99 latency {p99 * 1000:.0f} ms during the fault, limit {limit * 1000:.0f} ms")

    VERDICTS.add(VerdictKind(
        name="p99_latency", title="p99 latency of served requests during the fault", unit="ms",
        needs=lambda drill: None if drill.timeline.requests else "no client requests recorded",
        input="client requests (a load generator)", check=_p99_latency, column="p99 latency",
        measures="the 99th percentile latency of the requests served between the fault and its revert",
        judged="at most the limit (default 1 s)"))

and a test then says ``result.assert_verdict("p99_latency", limit=0.5)``.

Where the input of a built-in verdict comes from is the target's sources (DESIGN.md §7): a
verdict whose input the federation does not expose is never a pass.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gameday.model.tables import Table

if TYPE_CHECKING:
    from gameday.model.timeline import FaultWindow, Timeline
    from gameday.runtime.settings import SLO

NA = "n/a: "
"""How a verdict without input reads, before its reason."""

Summary = Mapping[str, Any]
"""A drill's summary as reports see it (``DrillResult.summary()`` plus the session's keys,
possibly read back from run.json)."""


class DrillInputs(Protocol):
    """What a verdict's ``needs`` and ``check`` see of a drill (a
    :class:`~gameday.verdicts.result.DrillResult` is one)."""

    @property
    def fault(self) -> FaultWindow: ...
    @property
    def timeline(self) -> Timeline: ...
    @property
    def slo(self) -> SLO: ...
    @property
    def capacity(self) -> Mapping[str, float | None]: ...
    @property
    def control_plane_source(self) -> bool: ...
    @property
    def alarm_sources(self) -> bool: ...
    @property
    def survivors(self) -> tuple[str, ...]: ...
    @property
    def lost(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, kw_only=True)
class Reading:
    """What a verdict's ``check`` measured and how it judged it."""

    figure: str
    """What was measured, as shown (``412 ms``)."""
    passed: bool
    limit: str = ""
    """What it was judged against, as shown."""
    message: str = ""
    """Why it failed: expected, seen, where, when (the test's assertion message)."""
    resolution: str = ""
    """How precisely the figure is known (``± 0.10 s``); empty: exact."""
    detail: str = ""
    """For a pass: anything the reader should know about what it was judged on."""


Check = Callable[..., Reading]
"""``check(drill, **limits) -> Reading``: measure and judge one verdict on *drill* (a
:class:`DrillInputs`); the keyword arguments are the test's ``assert_verdict`` limits."""


@dataclass(frozen=True, kw_only=True)
class VerdictKind:
    """One verdict: what it is, what it needs, how it is judged and shown."""

    name: str
    """The name its outcomes are recorded under (``Verdict.name``, run.json, JUnit)."""
    title: str
    """What it judges, in a few words (docs)."""
    unit: str
    """The figure's unit (``s``, ``%``, ``alarms``); empty: a pass/fail check."""
    measures: str
    """How the figure is measured, one sentence (docs)."""
    judged: str
    """What it is judged against, one sentence (docs)."""
    needs: Callable[[DrillInputs], str | None] | None = None
    """The reason it is not applicable on *drill* (its input is missing), or None; None
    here: it always has its input."""
    input: str = ""
    """The input :attr:`needs` looks for, in words (docs); empty: always there."""
    asserts: tuple[str, ...] = ()
    """The ``DrillResult`` methods that judge it (the built-ins); empty: ``assert_verdict``."""
    check: Check | None = None
    """Measures and judges it for ``DrillResult.assert_verdict``; None: judged by :attr:`asserts`."""
    records: tuple[str, ...] = ()
    """The names its outcomes are recorded under when not :attr:`name` (``vs_prediction``
    records one per figure)."""
    column: str | None = None
    """Its column in the verdict table; None: it has none (its failure shows under the table)."""
    cell: Callable[[Summary], str] | None = None
    """Its cell in the table from a drill's summary; None: :func:`asserted_cell`."""
    detail: Callable[[Summary], str] | None = None
    """Its detail beside the cell in the Allure table; None: the summary's ``<name>.detail``."""
    in_line: bool = False
    """Shown in the drill's one-line verdict (the Allure description)."""

    def cell_of(self, summary: Summary) -> str:
        return self.cell(summary) if self.cell is not None else asserted_cell(summary, self.name)

    def detail_of(self, summary: Summary) -> str:
        if self.detail is not None:
            return self.detail(summary)
        fig = summary.get(self.name)
        return str(fig.get("detail") or "") if isinstance(fig, dict) else ""


class VerdictTable(Table[VerdictKind]):
    """The verdicts a drill can reach, by name, in the verdict table's column order."""

    def __init__(self, kinds: tuple[VerdictKind, ...] = ()) -> None:
        super().__init__("verdict", {k.name: k for k in kinds})

    def add(self, kind: VerdictKind, *, replace: bool = False) -> VerdictKind:
        """Register *kind* under its own name (after the built-ins: its column comes last)."""
        return self.register(kind.name, kind, replace=replace)

    def columns(self) -> list[VerdictKind]:
        """The verdicts with a column in the verdict table, in order."""
        return [k for k in self.values() if k.column is not None]

    def not_applicable(self, drill: DrillInputs) -> dict[str, str]:
        """Verdict -> why it has no input on *drill* (only the verdicts that have none)."""
        return {k.name: reason for k in self.values() if k.needs is not None and (reason := k.needs(drill)) is not None}


# -- how the built-ins are shown (cells of a summary; pure) ----------------------------------
def na_cell(d: Summary, name: str) -> str | None:
    """``n/a: <reason>`` when verdict *name* had no input in this drill, else None."""
    reason = (d.get("not_applicable") or {}).get(name)
    return f"{NA}{reason}" if reason else None


def asserted(d: Summary, name: str) -> str | None:
    """How the test's assertion of verdict *name* ended (``ok``, ``FAIL``, ``n/a: ...``), or None."""
    outcomes = [v for v in d.get("verdicts") or [] if v.get("name") == name]
    if not outcomes:
        return None
    if any(v["outcome"] == "fail" for v in outcomes):
        return "FAIL"
    if any(v["outcome"] == "inconclusive" for v in outcomes):
        return "INCONCLUSIVE"
    if all(v["outcome"] == "n/a" for v in outcomes):
        return NA + str(outcomes[0].get("detail", ""))
    return "ok"


def asserted_cell(d: Summary, name: str) -> str:
    """The default cell: n/a with the reason, else the last figure recorded and how the
    assertion ended (``412 ms ok``), ``-`` when the test did not assert it."""
    na = na_cell(d, name)
    if na:
        return na
    recorded = [v for v in d.get("verdicts") or [] if v.get("name") == name]
    verdict = asserted(d, name)
    if verdict is None:
        return "-"
    figure = str(recorded[-1].get("figure") or "")
    return f"{figure} {verdict}" if figure and not verdict.startswith(NA) else verdict


def figure_cell(name: str) -> Callable[[Summary], str]:
    """The cell of a duration figure (``0.82±0.14s``; the definition named when not §4's)."""
    def cell(d: Summary) -> str:
        f = d.get(name)
        if not isinstance(f, dict):
            return "-"
        # A definition other than the §4 one is named in the cell: the figure means something else.
        how = f" ({f['definition']})" if f.get("definition") not in (None, "", "entry-node versions") else ""
        if f.get("value_s") is None:
            return "not reached" + how
        return f"{f['value_s']:.2f}±{f['resolution_s']:.2f}s{how}"
    return cell


def _versions_cell(d: Summary) -> str:
    return na_cell(d, "versions") or ("ok" if (d.get("versions") or {}).get("passed") else "FAIL")


def _stale_alarms_cell(d: Summary) -> str:
    return na_cell(d, "stale_alarms") or str(len(d.get("stale_alarms") or []))


def _stale_alarms_detail(d: Summary) -> str:
    return json.dumps(d["stale_alarms"], default=str)[:300] if d.get("stale_alarms") else ""


def _headroom_cell(d: Summary) -> str:
    """Worst surviving utilisation against the limit (``71%/80%``), with the verdict when asserted."""
    na = na_cell(d, "headroom")
    if na:
        return na
    peak = d.get("peak_utilisation")
    fig = f"{peak['utilisation']:.0%}/{peak['limit']:.0%}" if isinstance(peak, dict) else ""
    verdict = asserted(d, "headroom")
    return " ".join(p for p in (fig, verdict) if p) or "-"


_SHORT = {"switchover": "sw", "dns_convergence": "dns", "client_recovery": "clients"}


def _vs_prediction_cell(d: Summary) -> str:
    """``ok`` when every figure is inside its predicted window; else each one that is not
    (``sw +1.10s late``); ``n/a`` with the first reason when none has a window; ``(not
    asserted)`` after it when the test did not call ``assert_as_predicted``."""
    cell = _vs_prediction_figures(d)
    done = any(str(v.get("name", "")).endswith("_vs_prediction") for v in d.get("verdicts") or [])
    return cell if done or cell == "-" else f"{cell} (not asserted)"


def _vs_prediction_figures(d: Summary) -> str:
    vs = d.get("vs_prediction")
    if not isinstance(vs, dict) or not vs:
        return "-"
    cells = {k: v for k, v in vs.items() if isinstance(v, dict)}
    if all(v.get("outcome") == "n/a" for v in cells.values()):
        first = next(iter(cells.values()), {})
        return f"{NA}{first.get('detail', '')}"[:60]
    bad = []
    for name, v in cells.items():
        how, by = v.get("how"), v.get("by_s")
        if v.get("outcome") == "fail":
            bad.append(f"{_SHORT.get(name, name)} {'+' if how == 'late' else '-'}{by or 0:.2f}s {how}"
                       if how in ("late", "early") else f"{_SHORT.get(name, name)} {how}")
    if not bad and any(v.get("outcome") == "inconclusive" for v in cells.values()):
        return "INCONCLUSIVE (harness starved)"
    if not bad:
        na = [_SHORT.get(n, n) for n, v in cells.items() if v.get("outcome") == "n/a"]
        return "ok" + (f" ({', '.join(na)} n/a)" if na else "")
    return "FAIL " + ", ".join(bad)


# -- what the built-ins need (DESIGN.md §7: without it, n/a with the reason) --------------------
def _needs_control_plane(drill: DrillInputs) -> str | None:
    return None if drill.control_plane_source else "no control-plane version source"


def _needs_capacities(drill: DrillInputs) -> str | None:
    missing = sorted(r for r, c in drill.capacity.items() if c is None or c <= 0)
    if missing:
        return f"no declared capacity for region(s) {', '.join(missing)}"
    return None if drill.capacity else "no declared capacities"


def _needs_alarms(drill: DrillInputs) -> str | None:
    return None if drill.alarm_sources else "no alarm source"


VERDICTS = VerdictTable((
    VerdictKind(
        name="switchover", title="switchover time", unit="s", column="switchover", cell=figure_cell("switchover"),
        in_line=True, asserts=("assert_switchover_under",),
        measures="first instant every surviving entry node routes without the failed region, minus t_fault "
                 "(from routable sets or DNS answers where entry nodes report no versions or routes)",
        judged="at most the limit (the SLO, 180 s)"),
    VerdictKind(
        name="dns_convergence", title="DNS convergence", unit="s", column="dns converge",
        cell=figure_cell("dns_convergence"), in_line=True, asserts=("assert_dns_converged",),
        measures="first instant after which the GSLB no longer answers with the failed region, minus t_fault",
        judged="at most the limit (the SLO, 180 s)"),
    VerdictKind(
        name="client_recovery", title="client recovery", unit="s", column="client recovery",
        cell=figure_cell("client_recovery"), in_line=True, asserts=("assert_client_recovered",),
        measures="start of the first recovery window whose client error ratio is within the SLO, minus t_fault",
        judged="at most the limit (the SLO, 180 s); false-failure probability <= 0.001"),
    VerdictKind(
        name="versions", title="control-plane and entry-node versions", unit="", column="versions",
        cell=_versions_cell, in_line=True, needs=_needs_control_plane, input="a control-plane version source",
        asserts=("assert_versions_incremented", "assert_versions_monotonic"),
        measures="the control plane's version sequence and every entry node's",
        judged="never back; for a region outage, up once for the fault and once for the restore"),
    VerdictKind(
        name="stale_alarms", title="stale-snapshot alarms", unit="alarms", column="stale alarms",
        cell=_stale_alarms_cell, detail=_stale_alarms_detail, in_line=True, needs=_needs_alarms,
        input="an alarm source",
        asserts=("assert_no_stale_snapshot_alarms", "assert_stale_snapshot_alarm_fired"),
        measures="alarm events from the entry nodes inside the drill window (not from regions cut off)",
        judged="0 (or at least 1 where staleness is real: the control plane down)"),
    VerdictKind(
        name="headroom", title="N-1 and dynamic headroom", unit="%", column="headroom", cell=_headroom_cell,
        needs=_needs_capacities, input="a declared capacity for every region", asserts=("assert_headroom",),
        measures="static N-1 capacity before the fault; surviving regions' utilisation and overload "
                 "responses during it",
        judged="capacity(all but r) >= offered x (1 + margin); utilisation within the limit (80 %) and "
               "overload within the SLO; false-failure probability <= 0.001"),
    VerdictKind(
        name="vs_prediction", title="figures against their predicted windows (DESIGN.md §8)", unit="s",
        column="vs prediction", cell=_vs_prediction_cell, asserts=("assert_as_predicted",),
        input="a predicted window (the stated timing), per figure: judged inside assert_as_predicted",
        records=("switchover_vs_prediction", "dns_convergence_vs_prediction", "client_recovery_vs_prediction"),
        measures="switchover, DNS convergence and client recovery, each against the window the federation's "
                 "stated timing predicts",
        judged="inside the window plus resolution and slack; n/a per figure whose input is unknown"),
    VerdictKind(
        name="error_ratio", title="client error ratio during the fault", unit="%",
        asserts=("assert_error_ratio_under",),
        measures="failed client requests over all between the fault and its revert",
        judged="at most the limit (the SLO, 1 %)"),
    VerdictKind(
        name="route_changes", title="no route changes (no flapping)", unit="changes",
        asserts=("assert_no_route_changes",),
        measures="entry-node route changes, control-plane version moves and GSLB answers lost during the fault",
        judged="none"),
    VerdictKind(
        name="readmission", title="gradual re-admission (R10)", unit="%", asserts=("assert_gradual_readmission",),
        measures="the returning region's DNS answer share right after the restore, at the end, and by weight",
        judged="the first share below 60 % of the end's and of the weight's"),
))
"""Every verdict a drill can reach. Extend it with :meth:`VerdictTable.add`."""


def markdown_table(kinds: Mapping[str, VerdictKind] | None = None) -> str:
    """The verdicts as README's table (name, what, unit, table column, asserted by)."""
    rows = ["| verdict | unit | measured | judged | n/a without | table column | asserted by |",
            "|---|---|---|---|---|---|---|"]
    for k in (VERDICTS if kinds is None else kinds).values():
        how = ", ".join(f"`{a}()`" for a in k.asserts) or f'`assert_verdict("{k.name}")`'
        rows.append(f"| `{k.name}`: {k.title} | {k.unit or '-'} | {k.measures} | {k.judged} | {k.input or '-'} | "
                    f"{k.column or '-'} | {how} |")
    return "\n".join(rows) + "\n"
