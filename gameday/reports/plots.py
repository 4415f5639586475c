"""Plots drawn with matplotlib (PNG): a drill's timeline, switchover across rounds, the trend.

The data behind each plot is computed apart from the drawing (:func:`timeline_series`), so
what a plot shows can be checked from its numbers. matplotlib is imported inside the
drawing functions, with the Agg backend: no display, no GUI toolkit, safe in threads of a
pytest run, and no import cost for runs that draw nothing.
"""

from __future__ import annotations

import atexit
import io
import math
import statistics
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gameday.verdicts.result import DrillResult

BIN_S = 0.5
"""Step of the timeline's bins, seconds (five observer ticks)."""
RATE_WINDOW = (1.0, 1.0, 0.0)
"""Weights of the bins before, at and after a bin for its served rate: the second up to the
bin's end, every 0.5 s. Locust's users send in step, so plain 0.5 s counts alternate high and
low (80, 40, 80 req/s for a steady 60) and hide the change the plot is for; a trailing
window (not a centred one) never shows a change before it happened."""
WIDTH_IN, DPI = 10.0, 100
"""1000 px wide: Allure's attachment pane shows it whole; text stays legible full-size."""
REGION_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
MARKER_STYLE = {"fault": ("#d62728", "-"), "switchover": ("#9467bd", "--"), "DNS convergence": ("#17becf", "--"),
                "client recovery": ("#2ca02c", "--"), "restore": ("#1f77b4", "-")}


@dataclass
class Lane:
    """An entry node's readings: when, its route version, whether it routed to the failed region."""

    node: str
    t: list[float] = field(default_factory=list)
    version: list[int | None] = field(default_factory=list)
    to_failed: list[bool | None] = field(default_factory=list)
    """True: routes to the failed region; False: excludes it; None: did not answer."""


@dataclass
class TimelineSeries:
    """What the timeline plot draws; times in seconds relative to the fault."""

    title: str
    failed_region: str | None
    regions: list[str]
    bins: list[float]
    """Start of each bin."""
    served: dict[str, list[float]]
    """Region -> requests/s it served in the second up to each bin's end (successful
    responses, by served-by header; see :data:`RATE_WINDOW`)."""
    error_ratio: list[float | None]
    """Client error ratio of the requests sent in each bin (None: no request in it)."""
    dns_share: dict[str, list[float | None]]
    """Region -> its share of the GSLB's answers per bin (None: no answer in it)."""
    lanes: list[Lane]
    alarms: list[tuple[float, str]]
    """Stale-snapshot alarms: (t, node)."""
    markers: dict[str, float]
    """fault, switchover, DNS convergence, client recovery, restore (those that happened)."""
    predicted: dict[str, tuple[float, float]] = field(default_factory=dict)
    """switchover, DNS convergence, client recovery -> the window the federation's timing
    predicts, ``(earliest, latest)`` s after the fault (those with a window)."""
    writes: dict[str, list[float]] = field(default_factory=dict)
    """The state layer's writes (DESIGN.md section 9): outcome (``ack``, ``refused``,
    ``indeterminate``) -> writes per second sent in each bin; empty: the drill wrote nothing."""
    lost_writes: list[float] = field(default_factory=list)
    """When each write found lost after the restore had been acknowledged, s after the fault."""

    def mean_served(self, region: str, lo: float, hi: float) -> float:
        """Mean served rate of *region* over the bins starting in ``[lo, hi)``, req/s."""
        vals = [v for b, v in zip(self.bins, self.served.get(region, []), strict=False) if lo <= b < hi]
        return sum(vals) / len(vals) if vals else 0.0


def _bin(t: float, start: float) -> int:
    return int((t - start) // BIN_S)


def _window(values: list[float]) -> list[tuple[float, float]]:
    """Per bin: the :data:`RATE_WINDOW`-weighted sum of its neighbourhood, and the weights
    that fell inside the timeline (a bin at the edge has fewer neighbours)."""
    out = []
    for k in range(len(values)):
        acc = weight = 0.0
        for off, w in zip((-1, 0, 1), RATE_WINDOW, strict=True):
            if 0 <= k + off < len(values):
                acc += w * values[k + off]
                weight += w
        out.append((acc, weight))
    return out


def timeline_series(res: DrillResult) -> TimelineSeries:
    """The numbers the timeline plot draws, from the drill's timeline."""
    tl = res.timeline.copy()
    w = res.fault
    tf = w.t_fault
    start = min([tl.t0, *(m.t for m in tl.marks)]) if tl.marks else tl.t0
    end = max([w.t_restored or 0.0, w.t_revert or 0.0, *(o.t for o in tl.nodes), *(d.t for d in tl.dns),
               *(r.t for r in tl.requests), start + BIN_S])
    n = max(1, math.ceil((end - start) / BIN_S))
    regions = sorted({*res.capacity, *res.weights, *(r.region for r in tl.requests if r.region)})
    counts = {r: [0.0] * n for r in regions}
    total, failed = [0.0] * n, [0.0] * n
    for r in tl.requests:
        k = _bin(r.t, start)
        if not 0 <= k < n:
            continue
        total[k] += 1
        failed[k] += r.failed
        if not r.failed and r.region in counts:
            counts[r.region][k] += 1
    served = {r: [v / (BIN_S * w) if w else 0.0 for v, w in _window(c)] for r, c in counts.items()}

    answers: list[dict[str, int]] = [defaultdict(int) for _ in range(n)]
    for d in tl.dns:
        k = _bin(d.t, start)
        if d.ok and 0 <= k < n:
            for a in d.answers or d.regions:
                answers[k][a] += 1
    dns_share: dict[str, list[float | None]] = {
        r: [(a[r] / sum(a.values())) if sum(a.values()) else None for a in answers] for r in regions}
    lanes: dict[str, Lane] = {}
    # Only a fault that takes its region out has a "failed region" to route away from (a store
    # node killed in region a leaves a's gateway serving: routing to a is right, not red).
    out_region = w.region if res.removes_region else None
    for o in sorted(tl.nodes, key=lambda o: o.t):
        lane = lanes.setdefault(o.node, Lane(o.node))
        lane.t.append(o.t - tf)
        lane.version.append(o.version if o.ok else None)
        lane.to_failed.append(None if not o.ok or o.routable is None or out_region is None
                              else out_region in o.routable)
    markers = {"fault": 0.0}
    if res.removes_region:
        for name, f in (("switchover", res.switchover()), ("DNS convergence", res.dns_convergence()),
                        ("client recovery", res.client_recovery())):
            if f.value is not None:
                markers[name] = f.value
    if w.t_revert is not None:
        markers["restore"] = w.t_revert - tf
    predicted = {}
    if res.prediction is not None and res.removes_region:
        for name, key in (("switchover", "switchover"), ("DNS convergence", "dns_convergence"),
                          ("client recovery", "client_recovery")):
            window = res.prediction.window(key)
            if window.known:
                predicted[name] = (window.earliest, window.latest)
    writes: dict[str, list[float]] = {}
    for wr in tl.writes:
        k = _bin(wr.t, start)
        if wr.kind == "write" and 0 <= k < n:
            writes.setdefault(wr.outcome, [0.0] * n)[k] += 1 / BIN_S
    acked_at = {wr.id: wr.t_done for wr in tl.writes if wr.outcome == "ack"}
    lost = [acked_at[i] - tf for i in (tl.data_check.missing if tl.data_check else ()) if i in acked_at]
    return TimelineSeries(
        writes=writes, lost_writes=sorted(lost),
        title=f"{w.kind} {w.region or ''}".strip() + f" - seed {res.seed}, round {res.round + 1}",
        failed_region=out_region, regions=regions, bins=[start - tf + k * BIN_S for k in range(n)], served=served,
        error_ratio=[f / t if t else None for f, t in zip(failed, total, strict=True)], dns_share=dns_share,
        lanes=[lanes[k] for k in sorted(lanes)],
        alarms=[(a.t - tf, a.node) for a in tl.alarms if a.event == "stale_snapshot"], markers=markers,
        predicted=predicted)


_prewarm_thread: threading.Thread | None = None


def prewarm() -> threading.Thread:
    """Import matplotlib (the Agg backend and pyplot) in a daemon thread, now.

    A drill calls it as it starts: the import (about half a drill plot's CPU) then runs while
    the drill mostly waits (steady state, the fault block), not on the way to its verdicts
    when the plot is drawn. Drawing still imports it itself (a no-op, or a wait on the
    import lock until this thread is done).

    The interpreter never exits with the import still running: an exit handler waits for it.
    A daemon thread left inside a C++ extension's initialisation (matplotlib's pybind11
    modules) when Python finalises is unwound through a noexcept frame, and the C++ runtime
    aborts the process ("terminate called without an active exception", exit -6), after a
    run that had passed (seen once, on a 1.7 s dry run)."""
    global _prewarm_thread  # noqa: PLW0603  (one import per process)
    if _prewarm_thread is None:
        _prewarm_thread = threading.Thread(target=_pyplot, name="gameday-matplotlib-import", daemon=True)
        _prewarm_thread.start()
        atexit.register(_prewarm_thread.join, PREWARM_JOIN_S)
    return _prewarm_thread


# matplotlib imports in ~0.5 s of CPU; a minute covers a machine loaded many times over.
PREWARM_JOIN_S = 60.0


def _pyplot() -> Any:
    import matplotlib  # noqa: PLC0415  (heavy; only runs that draw pay for it)

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    fig.clear()
    _pyplot().close(fig)
    return buf.getvalue()


def _colour(regions: list[str], region: str) -> str:
    return REGION_COLOURS[regions.index(region) % len(REGION_COLOURS)] if region in regions else "#7f7f7f"


def not_observed(series: TimelineSeries) -> dict[str, str]:
    """Panel -> what it says when nothing was observed for it (no source, or no reading):
    ``served``, ``errors``, ``dns``, ``lanes``. A blank panel would look like zero."""
    out: dict[str, str] = {}
    if all(e is None for e in series.error_ratio):
        out["served"] = out["errors"] = "not observed: no client requests recorded (no load generator)"
    if all(v is None for r in series.regions for v in series.dns_share[r]):
        out["dns"] = "not observed: no DNS answers recorded"
    if not series.lanes:
        out["lanes"] = "not observed: no entry-node source"
    return out


def timeline_png(series: TimelineSeries) -> bytes:
    """The drill timeline as a PNG: served req/s per region (stacked), the client error
    ratio, the GSLB's answer share per region, one lane per entry node (its route version;
    red while it still routes to the failed region), stale alarms, the phase markers, and each
    figure's predicted window as a band on its lane."""
    return _png(timeline_figure(series))


def timeline_figure(series: TimelineSeries) -> Any:
    """The figure :func:`timeline_png` draws (a ``matplotlib.figure.Figure``). Legends sit
    outside the panels, never over the data; a panel with nothing observed says so."""
    plt = _pyplot()
    lanes = series.lanes
    heights = [3.0, 1.4, 1.6, max(1.2, 0.32 * len(lanes))] + ([1.4] if series.writes else [])
    fig, axes = plt.subplots(len(heights), 1, sharex=True, figsize=(WIDTH_IN, 2.0 + sum(heights)),
                             gridspec_kw={"height_ratios": heights}, layout="constrained")
    ax_served, ax_err, ax_dns, ax_lanes = axes[:4]
    if series.writes:
        _writes_panel(axes[4], series, [b + BIN_S / 2 for b in series.bins])
    fig.suptitle(series.title, fontsize=11, x=0.01, ha="left")
    x = [b + BIN_S / 2 for b in series.bins]
    colours = [_colour(series.regions, r) for r in series.regions]
    _served_panel(ax_served, series, x, colours)
    _errors_panel(ax_err, series, x)
    _dns_panel(ax_dns, series, x, colours)
    _lanes_panel(ax_lanes, series)
    handles = _predicted_bands(series, {"switchover": ax_lanes, "DNS convergence": ax_dns,
                                        "client recovery": ax_err})
    for name, t in series.markers.items():
        colour, style = MARKER_STYLE[name]
        for ax in axes:
            line = ax.axvline(t, color=colour, linestyle=style, linewidth=1.3)
        handles.append(line)
        line.set_label(f"{name} {t:+.2f} s")
    # The markers' legend below the panels: instants close together (switchover and DNS
    # convergence often are) stay readable, which labels on the lines would not.
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=8,
               frameon=False)
    panels = {"served": ax_served, "errors": ax_err, "dns": ax_dns, "lanes": ax_lanes}
    for name, text in not_observed(series).items():
        panels[name].text(0.5, 0.5, text, transform=panels[name].transAxes, ha="center", va="center",
                          fontsize=9, color="#555555", zorder=10,
                          bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.9})
    for ax in axes:
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=8)
    return fig


WRITE_COLOURS = {"ack": "#2ca02c", "indeterminate": "#ff7f0e", "refused": "#d62728"}


def _writes_panel(ax: Any, series: TimelineSeries, x: list[float]) -> None:
    """The drill's writes per second by outcome (stacked, by send time), and a cross at the
    acknowledgement of every write found lost after the restore."""
    kinds = [k for k in ("ack", "indeterminate", "refused") if k in series.writes]
    ax.stackplot(x, [series.writes[k] for k in kinds], labels=[f"{k}ed" if k == "ack" else k for k in kinds],
                 colors=[WRITE_COLOURS[k] for k in kinds], step="mid", alpha=0.8)
    if series.lost_writes:
        top = max((sum(v) for v in zip(*series.writes.values(), strict=True)), default=1.0)
        ax.plot(series.lost_writes, [top * 0.9] * len(series.lost_writes), "x", color="black", markersize=6,
                label=f"lost ({len(series.lost_writes)})")
    ax.set_ylabel("writes/s")
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0, title="writes", fontsize=8,
              title_fontsize=8)


def _served_panel(ax: Any, series: TimelineSeries, x: list[float], colours: list[str]) -> None:
    """Requests served per second, stacked by the region that served them."""
    if series.regions:
        ax.stackplot(x, [series.served[r] for r in series.regions], labels=series.regions, colors=colours,
                     step="mid", alpha=0.85)
    ax.set_ylabel("served req/s")
    # Right of the panel, not over it: the stacked areas reach the panel's top-left corner.
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0, title="served by",
              fontsize=8, title_fontsize=8)


def _errors_panel(ax: Any, series: TimelineSeries, x: list[float]) -> None:
    """The client error ratio, in percent (at least 0-5 %)."""
    err = [float("nan") if e is None else 100 * e for e in series.error_ratio]
    ax.fill_between(x, err, step="mid", color="#d62728", alpha=0.6)
    ax.set_ylabel("client\nerrors %")
    seen = [e for e in err if not math.isnan(e)]
    ax.set_ylim(0, max(5.0, *seen) if seen else 5.0)


def _dns_panel(ax: Any, series: TimelineSeries, x: list[float], colours: list[str]) -> None:
    """The GSLB's answers, stacked by region, in percent."""
    shares = [[float("nan") if v is None else 100 * v for v in series.dns_share[r]] for r in series.regions]
    if series.regions:
        ax.stackplot(x, [[0.0 if math.isnan(v) else v for v in s] for s in shares], colors=colours,
                     step="mid", alpha=0.85)
    ax.set_ylabel("GSLB\nanswers %")
    ax.set_ylim(0, 100)


def _lanes_panel(ax: Any, series: TimelineSeries) -> None:
    """One lane per entry node: whether it routes to the failed region, its route versions, and
    its stale-snapshot alarms."""
    lanes = series.lanes
    for i, lane in enumerate(lanes):
        last_v: int | None = None
        # One bar per run of readings in one colour, all of a lane's bars in one collection
        # (drawn in order, as one call per reading drew them): a call per reading (10 Hz,
        # per lane) made drawing cost seconds of CPU per drill.
        bars: list[tuple[float, float]] = []
        bar_colours: list[str] = []
        for j, t in enumerate(lane.t):
            t_next = lane.t[j + 1] if j + 1 < len(lane.t) else t + 0.1
            state = lane.to_failed[j]
            colour = ("#bbbbbb" if lane.version[j] is None and state is None else
                      "#d62728" if state and 0 <= t < series.markers.get("restore", math.inf) else
                      "#9ecae1" if state else "#74c476")
            end = t + max(t_next - t, 0.05)
            if bars and bar_colours[-1] == colour and t <= bars[-1][0] + bars[-1][1]:
                start, width = bars[-1]
                bars[-1] = (start, max(start + width, end) - start)
            else:
                bars.append((t, end - t))
                bar_colours.append(colour)
            v = lane.version[j]
            if v is not None and v != last_v:
                ax.text(t, i, f"v{v}", fontsize=7, va="center", ha="left", clip_on=True)
                last_v = v
        if bars:
            ax.broken_barh(bars, (i - 0.4, 0.8), color=bar_colours, linewidth=0)
    nodes = [lane.node for lane in lanes]
    for t, node in series.alarms:
        if node in nodes:
            ax.plot([t], [nodes.index(node)], marker="v", color="#ff7f0e", markersize=8, markeredgecolor="black")
    ax.set_yticks(range(len(lanes)), nodes, fontsize=8)
    ax.set_ylim(-0.6, max(len(lanes), 1) - 0.4)
    ax.invert_yaxis()
    ax.set_ylabel("entry nodes\n(route version)")
    ax.set_xlabel(f"seconds relative to the fault (red: still routes to {series.failed_region or '-'}; "
                  "green: excludes it; blue: routes to it outside the fault; grey: no answer; "
                  "orange triangle: stale alarm)", fontsize=8)


def _predicted_bands(series: TimelineSeries, where: dict[str, Any]) -> list[Any]:
    """Each figure's predicted window as a band on the panel that shows it (DESIGN.md §8); the
    bands, for the legend."""
    handles = []
    for name, ax in where.items():
        if name in series.predicted:
            lo, hi = series.predicted[name]
            # over the stacked areas (translucent, edged), or they would hide it
            band = ax.axvspan(lo, max(hi, lo + 0.02), facecolor=MARKER_STYLE[name][0], alpha=0.3, zorder=3,
                              edgecolor=MARKER_STYLE[name][0], linewidth=1.0, hatch="//")
            band.set_label(f"{name} predicted {lo:.2f}-{hi:.2f} s")
            handles.append(band)
    return handles


def rounds_png(title: str, switchovers: list[float], limit: float | None = None) -> bytes:
    """The distribution of switchover across rounds: a strip of every round over a box plot."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.2), layout="constrained")
    if switchovers:
        ax.boxplot([switchovers], orientation="horizontal", widths=0.5, showmeans=True)
        ax.plot(switchovers, [1.0] * len(switchovers), "o", color="#1f77b4", alpha=0.6)
        p50 = statistics.median(switchovers)
        ax.set_title(f"{title}: switchover over {len(switchovers)} rounds (median {p50:.2f} s, "
                     f"max {max(switchovers):.2f} s)", fontsize=11, loc="left")
    else:
        ax.set_title(f"{title}: no round measured a switchover", fontsize=11, loc="left")
    if limit is not None and switchovers and limit < 3 * max(switchovers):
        ax.axvline(limit, color="#d62728", linestyle="--", label=f"limit {limit:g} s")
        ax.legend(fontsize=8)
    ax.set_yticks([])
    ax.set_xlabel("switchover, seconds (dots: rounds; box: quartiles; line: median; triangle: mean)")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


class TrendRow(Protocol):
    """What the trend reads of a history row (:class:`gameday.reports.history.HistoryRow`, or
    the strictly checked row ``gameday report`` reads)."""

    @property
    def time(self) -> Any: ...
    @property
    def run(self) -> str: ...
    @property
    def test(self) -> str: ...
    @property
    def fault(self) -> str: ...
    @property
    def passed(self) -> bool: ...
    @property
    def aborted(self) -> str | None: ...
    @property
    def switchover_s(self) -> float | None: ...
    @property
    def dns_converge_s(self) -> float | None: ...
    @property
    def client_recovery_s(self) -> float | None: ...


def trend_png(rows: Sequence[TrendRow]) -> bytes:
    """Switchover, DNS convergence and client recovery across runs, one line per drill
    (test and fault); failed drills drawn as red crosses. Aborted drills (their observation
    did not complete) are grey rings apart from the line: their figures are in no run's median."""
    plt = _pyplot()
    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(WIDTH_IN, 7.5), layout="constrained")
    runs = list(dict.fromkeys(r.run for r in sorted(rows, key=lambda r: r.time)))
    index = {run: i for i, run in enumerate(runs)}
    series: dict[tuple[str, str], list[TrendRow]] = defaultdict(list)
    for r in rows:
        series[(r.test.split("::")[-1], r.fault)].append(r)
    any_aborted = False
    for ax, (attr, label) in zip(axes, (("switchover_s", "switchover s"), ("dns_converge_s", "DNS converge s"),
                                        ("client_recovery_s", "client recovery s")), strict=True):
        for (test, fault), rs in sorted(series.items()):
            per_run: dict[int, list[TrendRow]] = defaultdict(list)
            aborted = [(index[r.run], getattr(r, attr)) for r in rs if r.aborted and getattr(r, attr) is not None]
            for r in rs:
                if getattr(r, attr) is not None and not r.aborted:
                    per_run[index[r.run]].append(r)
            # One point per run: the median of its rounds; failed when any round failed.
            pts = [(i, statistics.median(getattr(r, attr) for r in group), all(r.passed for r in group))
                   for i, group in sorted(per_run.items())]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4, label=f"{test} ({fault})")
                bad = [p for p in pts if not p[2]]
                ax.plot([p[0] for p in bad], [p[1] for p in bad], "x", color="#d62728", markersize=9)
            if aborted:
                any_aborted = True
                ax.plot([a[0] for a in aborted], [a[1] for a in aborted], "o", markerfacecolor="none",
                        markeredgecolor="#7f7f7f", markersize=7)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    rings = "; grey ring: aborted, not in the line" if any_aborted else ""
    axes[0].set_title(f"trend over {len(runs)} runs (red cross: the drill failed{rings})", fontsize=11, loc="left")
    if series:
        axes[0].legend(fontsize=8, loc="upper left")
    step = max(1, len(runs) // 12)
    axes[-1].set_xticks(range(0, len(runs), step), [runs[i][:15] for i in range(0, len(runs), step)],
                        rotation=30, ha="right", fontsize=7)
    axes[-1].set_xlabel("run")
    return _png(fig)
