"""The plots: the data behind the timeline shows what happened; every PNG decodes."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from dataclasses import replace

import matplotlib.axes
import matplotlib.image
import pytest

from gameday.model.timeline import DataCheck, WriteRec
from gameday.reports import plots
from gameday.reports.history import HistoryRow
from gameday.verdicts.predict import StatedTiming, predict
from gameday.verdicts.result import DrillResult
from tests.reports.conftest import handmade


def decoded(png: bytes) -> tuple[int, int]:
    """(width, height) of a PNG that matplotlib could decode."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    img = matplotlib.image.imread(io.BytesIO(png), format="png")
    return img.shape[1], img.shape[0]


def test_the_failed_regions_traffic_moves_to_the_others(drill_result: DrillResult) -> None:
    s = plots.timeline_series(drill_result)
    assert s.regions == ["a", "b", "c"] and s.failed_region == "b"
    before = {r: s.mean_served(r, -8, -0.5) for r in s.regions}
    during = {r: s.mean_served(r, 2.5, 10) for r in s.regions}  # clients moved (t+2 s) until the revert (t+10 s)
    assert before == {"a": 30.0, "b": 20.0, "c": 10.0}
    assert during["b"] == 0.0
    assert during["a"] > before["a"] and during["c"] > before["c"]
    assert sum(during.values()) == sum(before.values())  # nothing lost once clients moved
    assert s.mean_served("b", 11, 15) == before["b"]  # back after the restore
    assert s.markers == pytest.approx({"fault": 0.0, "switchover": 1.0, "DNS convergence": 1.5,
                                       "client recovery": 2.0, "restore": 10.0})
    # errors only while b's clients had not moved; the GSLB stopped answering b at t+1.5 s
    errs = dict(zip(s.bins, s.error_ratio, strict=True))
    assert errs[-1.0] == 0.0 and errs[0.5] is not None and errs[0.5] > 0.25 and errs[3.0] == 0.0
    shares = dict(zip(s.bins, s.dns_share["b"], strict=True))
    assert shares[-1.0] == 0.25 and shares[2.0] == 0.0
    lane = next(lane for lane in s.lanes if lane.node == "gateway-a")
    assert lane.to_failed[lane.t.index(0.5)] is True and lane.to_failed[lane.t.index(1.5)] is False
    assert lane.version[lane.t.index(1.5)] == 2
    assert [lane.node for lane in s.lanes if None in lane.version] == ["gateway-b"]  # stopped: no answer
    assert s.alarms == [(5.0, "proxy-c")]


def test_the_predicted_windows_are_drawn_where_the_drill_has_them(drill_result: DrillResult) -> None:
    assert plots.timeline_series(drill_result).predicted == {}  # no prediction: no band
    timing = StatedTiming(source="t", probe_interval=0.2, probe_timeout=0.15, fall=3, dns_ttl=1.0,
                          entry_propagation=0.1)
    predicted = dataclasses.replace(drill_result, prediction=predict(timing, "gateway_down", "at once",
                                                                     entry_nodes_route=True))
    s = plots.timeline_series(predicted)
    assert {k: pytest.approx(v) for k, v in s.predicted.items()} == {
        "switchover": (0.4, 0.7), "DNS convergence": (0.4, 0.6), "client recovery": (0.0, 2.6)}
    assert decoded(plots.timeline_png(s))[0] == 1000


def test_the_timeline_png_decodes_at_a_readable_size(drill_result: DrillResult) -> None:
    w, h = decoded(plots.timeline_png(plots.timeline_series(drill_result)))
    assert w == 1000 and 700 <= h <= 1400


def test_rounds_and_trend_pngs_decode() -> None:
    assert decoded(plots.rounds_png("test_x", [0.5, 0.6, 0.9], 180))[0] == 1000
    assert decoded(plots.rounds_png("test_x", []))[0] == 1000
    rows = [HistoryRow(time=f"2026-12-0{i}T00:00:00Z", run=f"run{i}", commit=None, target="local", topology="t",
                       seed=i, test="suites/x.py::test_a", fault="gateway_down", region="b", round=0,
                       switchover_s=0.5 + i / 10, dns_converge_s=1.0, client_recovery_s=None, passed=i != 2)
            for i in range(1, 5)]
    assert decoded(plots.trend_png(rows))[0] == 1000
    assert decoded(plots.trend_png([]))[0] == 1000


def test_aborted_drills_are_drawn_apart_from_the_trend_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The line goes through the completed drills only; an aborted one is a grey ring."""
    drawn: list[tuple[list[float], list[float], dict[str, object]]] = []
    real = matplotlib.axes.Axes.plot

    def spy(self: matplotlib.axes.Axes, *args: object, **kwargs: object) -> object:
        drawn.append((list(args[0]), list(args[1]), {"fmt": args[2] if len(args) > 2 else None, **kwargs}))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    rows = [HistoryRow(time=f"2026-12-0{i}T00:00:00Z", run=f"run{i}", commit=None, target="local", topology="t",
                       seed=i, test="suites/x.py::test_a", fault="gateway_down", region="b", round=0,
                       switchover_s=9.0 if i == 3 else 1.0, dns_converge_s=1.0, client_recovery_s=None,
                       passed=i != 3, aborted="interrupted by SIGTERM" if i == 3 else None)
            for i in range(1, 5)]
    assert decoded(plots.trend_png(rows))[0] == 1000
    switchover_line, _crosses, rings = drawn[0], drawn[1], drawn[2]
    assert switchover_line[0] == [0, 1, 3] and switchover_line[1] == [1.0, 1.0, 1.0]  # run3 (index 2) left out
    assert rings[0] == [2] and rings[1] == [9.0] and rings[2]["markerfacecolor"] == "none"


def test_the_timeline_legends_sit_outside_the_data(drill_result: DrillResult) -> None:
    fig = plots.timeline_figure(plots.timeline_series(drill_result))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        served_ax = fig.axes[0]
        legend = served_ax.get_legend()
        assert legend is not None
        box, panel = legend.get_window_extent(renderer), served_ax.get_window_extent(renderer)
        assert box.x0 >= panel.x1 - 1, (box, panel)  # right of the panel, not over its stacked areas
        for ax in fig.axes:  # the markers' legend is below every panel
            for fl in fig.legends:
                assert not fl.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    finally:
        plots._pyplot().close(fig)


def test_a_panel_without_a_source_says_not_observed(drill_result: DrillResult) -> None:
    full = plots.timeline_series(drill_result)
    assert plots.not_observed(full) == {}  # negative control: everything observed, nothing said
    bare = replace(full, lanes=[], error_ratio=[None] * len(full.error_ratio),
                   dns_share={r: [None] * len(v) for r, v in full.dns_share.items()})
    said = plots.not_observed(bare)
    assert said == {"served": "not observed: no client requests recorded (no load generator)",
                    "errors": "not observed: no client requests recorded (no load generator)",
                    "dns": "not observed: no DNS answers recorded", "lanes": "not observed: no entry-node source"}
    fig = plots.timeline_figure(bare)
    try:
        texts = {t.get_text() for ax in fig.axes for t in ax.texts}
        assert set(said.values()) <= texts
    finally:
        plots._pyplot().close(fig)
    assert decoded(plots.timeline_png(bare))[0] == 1000


def test_prewarm_imports_matplotlib_with_agg_in_a_thread_of_its_own() -> None:
    """A drill imports matplotlib while it waits (plots.prewarm); importing plots alone does not."""
    code = ("import sys, threading\n"
            "from gameday.reports import plots\n"
            "assert 'matplotlib' not in sys.modules, 'imported with plots'\n"
            "t = plots.prewarm()\n"
            "assert t is not threading.main_thread() and t.daemon\n"
            "t.join(120)\n"
            "import matplotlib\n"
            "print('pyplot' if 'matplotlib.pyplot' in sys.modules else 'none', matplotlib.get_backend().lower())\n")
    assert _python(code) == ["pyplot", "agg"]


def test_the_interpreter_never_exits_while_prewarm_is_still_importing() -> None:
    """An exit right after prewarm waits for the import: a daemon thread left inside
    matplotlib's C++ initialisation at finalisation aborts the process (exit -6, "terminate
    called without an active exception"), which failed a passing 1.7 s dry run in CI. The
    check below is registered first, so it runs after every exit handler gameday registers;
    without the wait the thread is still importing when it runs (the import takes ~0.5 s)."""
    code = ("import atexit, sys, threading\n"
            "def check():\n"
            "    alive = [t.name for t in threading.enumerate() if t.name == 'gameday-matplotlib-import']\n"
            "    print('alive' if alive else 'joined', 'pyplot' in ' '.join(sys.modules))\n"
            "atexit.register(check)\n"
            "from gameday.reports import plots\n"
            "plots.prewarm()\n"
            "assert plots.prewarm() is plots.prewarm()  # one import thread per process\n")
    assert _python(code) == ["joined", "True"]


def _python(code: str) -> list[str]:
    """What a fresh interpreter running *code* prints (split into words); it must exit 0."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_writes_panel_shows_each_outcome_and_marks_the_lost_writes(drill_result: DrillResult) -> None:

    tl = drill_result.timeline
    tf = drill_result.fault.t_fault
    for i in range(20):  # 2 writes/s from t-5 s: acknowledged, refused while the fault holds, then again
        t = tf - 5 + i * 0.5
        outcome = "refused" if tf <= t < tf + 2 else "ack"
        tl.add(WriteRec(f"w{i}", t, t + 0.01, outcome, "a" if outcome == "ack" else None))
    tl.data_check = DataCheck(t=tf + 6, acked=tuple(f"w{i}" for i in range(20) if not 10 <= i < 14),
                              missing=("w8", "w9"))
    s = plots.timeline_series(drill_result)
    assert set(s.writes) == {"ack", "refused"}
    per_bin = dict(zip(s.bins, s.writes["refused"], strict=True))
    assert sum(per_bin.values()) * plots.BIN_S == 4  # the 4 refused writes, all in the fault's first 2 s
    assert all(0 <= b < 2 for b, v in per_bin.items() if v)
    assert s.lost_writes == pytest.approx([-0.99, -0.49])
    png = plots.timeline_png(s)
    assert png.startswith(b"\x89PNG")
    without = plots.timeline_series(handmade())
    assert without.writes == {} and without.lost_writes == []  # no state layer: no panel
