"""Every verdict a drill can reach, in one table (:data:`VERDICTS`): the one place to add one.

An entry (:class:`VerdictKind`) says what a verdict is, and everything that reads verdicts
reads it from here:

- the verdict table's columns and their cells (:mod:`gameday.reports.table`; ``column`` and
  ``cell``), the Allure table's details and one-line verdict (``detail``, ``in_line``);
- when a verdict is not applicable and why (``needs``): ``DrillResult.not_applicable``,
  the ``n/a: <reason>`` an ``assert_*`` records, the table cell, run.json's
  ``not_applicable``, JUnit's ``gameday_na`` properties, and the skip of a test whose every
  verdict was not applicable (:mod:`gameday.plugin.reporting`) all come from it;
- the verdict reference of the documentation (``docs/reference/verdicts.md``, generated from
  :func:`markdown_table` by ``docs/gen_ref.py`` on every documentation build).

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
from gameday.verdicts.predict import Prediction, Window, judge
from gameday.verdicts.state import (
    StatedReplication,
    StoreEffect,
    data_loss,
    duplicates,
    fencing,
    outcomes,
    rpo_vs_prediction,
    stale_reads,
    write_recovery,
    write_recovery_window,
)

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
    def silent_alarm_sources(self) -> Mapping[str, str]: ...
    @property
    def state_source(self) -> bool: ...
    @property
    def stated_replication(self) -> StatedReplication | None: ...
    @property
    def write_timeout(self) -> float | None: ...
    @property
    def store_effect(self) -> StoreEffect | None: ...
    @property
    def state_primary(self) -> str | None: ...
    @property
    def prediction(self) -> Prediction | None: ...
    @property
    def task_queue(self) -> bool: ...
    @property
    def reads_own_writes(self) -> bool: ...
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
    exact: bool = False
    """Decided from exact counts, not from samples taken at a rate (a lost write, a version
    that went back): a starved harness cannot have changed it, so its failure is never made
    inconclusive (:mod:`gameday.verdicts.harness`)."""

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


def _client_recovery_cell(d: Summary) -> str:
    """Client recovery, and the p99 latency of the requests served during the fault."""
    cell = figure_cell("client_recovery")(d)
    lat = d.get("read_latency")
    if cell == "-" or not isinstance(lat, dict) or lat.get("p99_s") is None:
        return cell
    return f"{cell} p99 {lat['p99_s'] * 1000:.0f}ms"


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
    if not drill.alarm_sources:
        return "no alarm source"
    silent = drill.silent_alarm_sources
    if silent:
        first, error = next(iter(silent.items()))
        more = f" (and {len(silent) - 1} more)" if len(silent) > 1 else ""
        return f"alarm source {first} never answered{more} (last error: {error})"
    return None


def _needs_state(drill: DrillInputs) -> str | None:
    return None if drill.state_source else "no state layer (no write path)"


# -- the state layer (DESIGN.md section 9) ------------------------------------------------------
def _data_loss_check(drill: DrillInputs, max_lost: int = 0) -> Reading:
    tl = drill.timeline.copy()
    loss = data_loss(tl, drill.fault)
    counts = outcomes(tl)
    limit = f"<= {max_lost} lost"
    if loss.error is not None:
        return Reading(figure=loss.shown(), limit=limit, passed=False,
                       message=f"data loss not known: {loss.error}")
    if loss.acked == 0:
        return Reading(figure="0 acknowledged", limit=limit, passed=False,
                       message=f"data loss: no write was acknowledged during the drill ({counts['refused']} refused, "
                               f"{counts['indeterminate']} indeterminate): the write path never worked")
    passed = len(loss.lost) <= max_lost and not loss.unread
    return Reading(figure=loss.shown(), limit=limit, passed=passed, detail=loss.describe(),
                   message=f"data loss: {loss.describe()}; at most {max_lost} may be lost "
                           f"({drill.fault.kind} {drill.fault.region or ''})".replace(" )", ")"))


def _needs_stated_replication(drill: DrillInputs) -> str | None:
    if not drill.state_source:
        return _needs_state(drill)
    return None if drill.stated_replication is not None else "the federation states no replication mode"


def _rpo_vs_prediction_check(drill: DrillInputs) -> Reading:
    stated = drill.stated_replication
    assert stated is not None  # needs() made it n/a otherwise
    loss = data_loss(drill.timeline.copy(), drill.fault)
    inside, why = rpo_vs_prediction(stated, loss, drill.slo.prediction_slack)
    figure = loss.shown() if not loss.lost else f"{loss.shown()}, RPO {loss.rpo_s:.2f} s"
    return Reading(figure=figure, limit=f"as stated: {stated.shown()}", passed=inside, detail=why,
                   message=f"data loss against the stated replication: {loss.describe()}; {why}")


def _needs_task_queue(drill: DrillInputs) -> str | None:
    if not drill.state_source:
        return _needs_state(drill)
    return None if drill.task_queue else "no task queue"


def _duplicates_check(drill: DrillInputs) -> Reading:
    tl = drill.timeline.copy()
    dup = duplicates(tl)
    if dup.error is not None:
        return Reading(figure=dup.shown(), limit="0 twice, 0 never", passed=False, message=f"duplicates: {dup.error}")
    if dup.acked == 0:
        counts = outcomes(tl, "task")
        return Reading(figure="0 acknowledged", limit="0 twice, 0 never", passed=False,
                       message=f"duplicates: no task was acknowledged during the drill ({counts['refused']} refused, "
                               f"{counts['indeterminate']} indeterminate): the task queue never worked")
    return Reading(figure=dup.shown(), limit="0 twice, 0 never", passed=not dup.twice and not dup.never,
                   detail=dup.describe(), message=f"duplicates: {dup.describe()}")


def _needs_own_reads(drill: DrillInputs) -> str | None:
    if not drill.state_source:
        return _needs_state(drill)
    if not drill.reads_own_writes:
        return "the state source cannot read one write back as its client would (ReadsOwnWrites)"
    return None


def _stale_reads_check(drill: DrillInputs, max_staleness: float = 0.0) -> Reading:
    tl = drill.timeline.copy()
    st = stale_reads(tl)
    limit = "0 stale" if max_staleness <= 0 else f"none still stale {max_staleness:g} s after its ack"
    if st.reads == 0:
        counts = outcomes(tl)
        why = (f"no acknowledged write was read back ({counts['ack']} acknowledged, {st.unanswered} reads not "
               f"answered)")
        return Reading(figure="0 reads", limit=limit, passed=False, message=f"stale reads: {why}")
    if max_staleness <= 0:
        passed = not st.stale
    else:
        passed = not st.never_seen and (st.longest_s is None or st.longest_s <= max_staleness)
    figure = st.shown() + (f", {st.longest_s:.2f} s" if st.longest_s is not None else "")
    return Reading(figure=figure, limit=limit, passed=passed, detail=st.describe(),
                   message=f"stale reads: {st.describe()}")


def _needs_epochs(drill: DrillInputs) -> str | None:
    if not drill.state_source:
        return _needs_state(drill)
    if fencing(drill.timeline.copy(), drill.fault.t_fault) is None:
        return "no acknowledgement named the primary's epoch (a quorum store has none to fence)"
    return None


def _fencing_check(drill: DrillInputs) -> Reading:
    f = fencing(drill.timeline.copy(), drill.fault.t_fault)
    assert f is not None  # needs() made it n/a otherwise
    figure = f"{len(f.stale)} stale" + (f" (epochs {'/'.join(map(str, f.epochs))})" if len(f.epochs) > 1 else "")
    return Reading(figure=figure, limit="0", passed=not f.stale, detail=f.describe(),
                   message=f"fencing: split brain: {f.describe()}")


def _write_recovery_check(drill: DrillInputs, limit: float | None = None) -> Reading:
    lim = drill.slo.switchover_limit if limit is None else limit
    rec = write_recovery(drill.timeline.copy(), drill.fault.t_fault)
    if rec.value is None:
        return Reading(figure="not reached", limit=f"{lim:g} s", passed=False,
                       message=f"write recovery: {rec.describe()}")
    return Reading(figure=f"{rec.value:.2f} s", resolution=f"± {rec.resolution:.2f} s", limit=f"{lim:g} s",
                   passed=rec.value <= lim, detail=rec.describe(),
                   message=f"write recovery {rec.value:.2f} s, limit {lim:g} s: {rec.describe()}")


def _write_window(drill: DrillInputs) -> Window:
    """The predicted write-recovery window of *drill* (unknown, with the reason, where it cannot be)."""
    client = drill.prediction.window("client_recovery") if drill.prediction is not None else None
    if drill.lost and (client is None or not client.known):
        why = client.unknown if client is not None else "no prediction for this drill"
        return Window(figure="write_recovery", unknown=f"the fault takes region {', '.join(drill.lost)} out and its "
                      f"clients' move is not predicted ({why})")
    if drill.write_timeout is None:
        return Window(figure="write_recovery", unknown="the state source states no write timeout (its timeout)")
    return write_recovery_window(drill.stated_replication, effect=drill.store_effect, region=drill.fault.region,
                                 primary=drill.state_primary,
                                 region_out_latest=client.latest if drill.lost and client is not None else None,
                                 write_timeout=drill.write_timeout)


def _needs_write_prediction(drill: DrillInputs) -> str | None:
    if not drill.state_source:
        return _needs_state(drill)
    w = _write_window(drill)
    return None if w.known else w.unknown


def _write_recovery_vs_prediction_check(drill: DrillInputs) -> Reading:
    w = _write_window(drill)
    rec = write_recovery(drill.timeline.copy(), drill.fault.t_fault)
    slack = drill.slo.prediction_slack
    j = judge(w, rec.value, rec.resolution, slack=slack, injection_uncertainty=drill.fault.injection_uncertainty)
    limit = f"predicted {w.shown()} (+ resolution + {slack:g} s slack)"
    if rec.value is None:
        return Reading(figure="not reached", limit=limit, passed=False,
                       message=f"write recovery vs prediction: {rec.describe()}; predicted {w.shown()}: {w.derivation}")
    figure, res = f"{rec.value:.2f} s", f"± {rec.resolution:.2f} s"
    if j.passed:
        return Reading(figure=figure, resolution=res, limit=limit, passed=True, detail=w.derivation)
    how = (f"{j.by:.2f} s later than predicted {w.shown()} (+ {j.tolerance_late:.2f} s resolution and slack)"
           if j.outcome == "late" else
           f"{j.by:.2f} s earlier than the stated configuration allows (earliest {w.earliest:.2f} s): the fault did "
           "not take effect as declared, or the stated failover is wrong")
    return Reading(figure=figure, resolution=res, limit=limit, passed=False, detail=w.derivation,
                   message=f"write recovery vs prediction: {rec.value:.2f} s ± {rec.resolution:.2f} s is {how}: "
                           f"{rec.describe()}; predicted from {w.derivation}")


def _state_cell(key: str, shown: Callable[[Mapping[str, Any]], str]) -> Callable[[Summary], str]:
    def cell(d: Summary) -> str:
        na = na_cell(d, key)
        if na:
            return na
        st = d.get("state")
        fig = shown(st) if isinstance(st, dict) else ""
        verdict = asserted(d, key)
        return " ".join(p for p in (fig, verdict) if p) or "-"
    return cell


def _data_loss_shown(st: Mapping[str, Any]) -> str:
    loss = st.get("data_loss") or {}
    if loss.get("error"):
        return "not read back"
    return f"{loss.get('lost', 0)}/{loss.get('acked_read_back', 0)}"


def _write_recovery_shown(st: Mapping[str, Any]) -> str:
    rec = st.get("write_recovery") or {}
    lat = st.get("write_latency") or {}
    if rec.get("value_s") is None:
        return "not reached"
    p99 = f" p99 {lat['p99_s'] * 1000:.0f}ms" if lat.get("p99_s") is not None else ""
    return f"{rec['value_s']:.2f}s{p99}"


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
        cell=_client_recovery_cell, in_line=True, asserts=("assert_client_recovered",),
        measures="start of the first recovery window whose client error ratio is within the SLO, minus t_fault "
                 "(beside it, the p99 latency of the requests served between the fault and its revert)",
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
        name="data_loss", title="acknowledged writes lost (RPO, DESIGN.md §9)", unit="writes", column="data lost",
        cell=_state_cell("data_loss", _data_loss_shown), in_line=True, needs=_needs_state, exact=True,
        input="a state layer's write path (state: in the topology)", check=_data_loss_check,
        measures="the acknowledged writes the store no longer holds once steady after the restore; RPO = t_fault "
                 "minus the earliest acknowledgement among them; indeterminate writes apart",
        judged="at most max_lost (default 0) lost, and every acknowledged write read back"),
    VerdictKind(
        name="data_loss_vs_prediction", title="data loss against the stated replication (DESIGN.md §9)",
        unit="writes", needs=_needs_stated_replication, exact=True, check=_rpo_vs_prediction_check,
        input="a state layer whose replication is stated (topology state.replication, a profile's state)",
        measures="the data_loss figures (lost count, RPO) against what the stated replication allows",
        judged="sync: 0 lost; async with max lag L: RPO <= L (+ slack); none: nothing acknowledged after the fault"),
    VerdictKind(
        name="fencing", title="no writes taken at an old epoch after a promotion (split brain, DESIGN.md §9)",
        unit="writes", needs=_needs_epochs, exact=True, check=_fencing_check,
        input="acknowledgements that name the primary's epoch (the reference app's async store)",
        measures="writes acknowledged at an older epoch after the first acknowledgement at the newest one, and "
                 "how many of them the promoted primary does not hold",
        judged="none (budget 0)"),
    VerdictKind(
        name="duplicates", title="tasks processed exactly once (DESIGN.md §9)", unit="tasks", column="tasks twice",
        cell=_state_cell("duplicates", lambda st: (
            f"{(st.get('tasks') or {}).get('processed_twice', 0)}/{(st.get('tasks') or {}).get('acked', 0)}"
            if st.get("tasks") else "")),
        needs=_needs_task_queue, exact=True, check=_duplicates_check,
        input="a state layer with a task queue (the reference app's background workers; a profile's queue)",
        measures="the tasks added during the drill processed more than once, and those acknowledged and never "
                 "processed, read once the queue drained after the restore",
        judged="none twice, none never"),
    VerdictKind(
        name="stale_reads", title="read-your-writes through the global entry (stale reads, DESIGN.md §9)",
        unit="reads", column="stale reads",
        cell=_state_cell("stale_reads", lambda st: (
            f"{(st.get('stale_reads') or {}).get('stale', 0)}/{(st.get('stale_reads') or {}).get('reads', 0)}"
            if st.get("stale_reads") else "")),
        needs=_needs_own_reads, exact=True, check=_stale_reads_check,
        input="a state source that reads one write back as its client (the reference app's GET /data/<id>; a "
              "profile's read_back get)",
        measures="each acknowledged write read back at once by the client that wrote it, through the global "
                 "entry, and every 0.25 s while not found (for up to 5 s): reads answered 'not found', the writes "
                 "they hit, and the longest time a write was still missing after its acknowledgement",
        judged="none stale (max_staleness=S: none still missing S s after its acknowledgement, every one seen)"),
    VerdictKind(
        name="write_recovery", title="write recovery (write RTO, DESIGN.md §9)", unit="s", column="write recovery",
        cell=_state_cell("write_recovery", _write_recovery_shown), needs=_needs_state,
        input="a state layer's write path (state: in the topology)", check=_write_recovery_check,
        measures="first acknowledgement of a write sent at or after t_fault, minus t_fault (p99 write latency "
                 "during the fault beside it)",
        judged="at most the limit (the SLO, 180 s)"),
    VerdictKind(
        name="write_recovery_vs_prediction", title="write recovery against the stated failover (DESIGN.md §9)",
        unit="s", needs=_needs_write_prediction, check=_write_recovery_vs_prediction_check,
        input="a stated replication, the fault's effect on the store and where the data was led (async: the "
              "store's stated failover timing; sync: its Raft election timing)",
        measures="the write_recovery figure against the window the stated configuration predicts: the primary "
                 "lost (async), detection + the lease + a promotion check + the announcement + one write; the "
                 "leader lost (sync), the election timeout from the last heartbeat + a second vote round + one "
                 "write; any other fault, one write, or the clients' move where it takes a region's entry out",
        judged="inside the window plus resolution and slack (n/a where the store's failover is not stated: a "
               "single copy, a sync store whose election timing is not stated)"),
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
    """The verdicts as the reference's table (name, what, unit, table column, asserted by)."""
    rows = ["| verdict | unit | measured | judged | n/a without | table column | asserted by |",
            "|---|---|---|---|---|---|---|"]
    for k in (VERDICTS if kinds is None else kinds).values():
        how = ", ".join(f"`{a}()`" for a in k.asserts) or f'`assert_verdict("{k.name}")`'
        rows.append(f"| `{k.name}`: {k.title} | {k.unit or '-'} | {k.measures} | {k.judged} | {k.input or '-'} | "
                    f"{k.column or '-'} | {how} |")
    return "\n".join(rows) + "\n"
