"""The plots: the data behind the timeline shows what happened; every PNG decodes."""

from __future__ import annotations

import io
import subprocess
import sys

import matplotlib.image
import pytest

from gameday.reports import plots
from gameday.reports.history import HistoryRow
from gameday.verdicts.result import DrillResult


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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["pyplot", "agg"], out.stdout
