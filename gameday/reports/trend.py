"""The trend across runs, for ``gameday report``: reading ``reports/history.jsonl`` strictly
(a malformed line is an error naming the file, line and field; the drill's own reader,
:func:`gameday.reports.history.load_history`, skips such lines). The plot is
:func:`gameday.reports.plots.trend_png`, the one the drill's results use.

One JSON object per line, one per drill of a run::

    {"time": ISO-8601 UTC, "run": run id, "commit": sha|null, "target", "topology", "seed": int,
     "test": stable test id, "fault", "region", "round": int, "switchover_s": float|null,
     "dns_converge_s": float|null, "client_recovery_s": float|null, "passed": bool,
     "aborted": why the drill did not complete its observation | null (absent in older lines)}

(The drill appends the lines; this module only reads them.)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from gameday.errors import ReportError

FIGURES = (("switchover_s", "switchover"), ("dns_converge_s", "DNS convergence"),
           ("client_recovery_s", "client recovery"))
"""The headline figures of a drill (history field, label), in seconds."""


@dataclass(frozen=True, kw_only=True)
class HistoryRow:
    time: datetime
    run: str
    commit: str | None
    test: str
    fault: str
    region: str
    seed: int | None
    round: int
    switchover_s: float | None
    dns_converge_s: float | None
    client_recovery_s: float | None
    passed: bool
    aborted: str | None = None
    """Why the drill did not complete its observation: drawn apart, out of the trend's line."""

    def figure(self, key: str) -> float | None:
        value: float | None = getattr(self, key)
        return value


def _seconds(obj: dict[str, Any], key: str, where: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ReportError(f"{where}: field {key!r} is {value!r:.60}, expected seconds >= 0 or null")
    return float(value)


def read_history(path: Path) -> list[HistoryRow]:
    """The rows of *path*, oldest first; [] when the file does not exist. A malformed line is
    a ReportError naming the file, the line and the field."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read the history ({exc})") from exc
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ReportError(f"{where}: not a JSON object ({exc})") from exc
        if not isinstance(obj, dict):
            raise ReportError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        try:
            when = datetime.fromisoformat(str(obj.get("time")))
        except ValueError as exc:
            raise ReportError(f"{where}: field 'time' is {obj.get('time')!r:.60}, expected an ISO-8601 time") from exc
        if not isinstance(obj.get("test"), str) or not obj["test"]:
            raise ReportError(f"{where}: field 'test' is {obj.get('test')!r:.60}, expected the test id (a string)")
        seed, rnd = obj.get("seed"), obj.get("round", 0)
        if not isinstance(rnd, int) or (seed is not None and not isinstance(seed, int)):
            raise ReportError(f"{where}: fields 'seed'/'round' are {seed!r:.30}/{rnd!r:.30}, expected integers")
        aborted = obj.get("aborted")
        if aborted is not None and not isinstance(aborted, str):
            raise ReportError(f"{where}: field 'aborted' is {aborted!r:.60}, expected why the drill was aborted "
                              "(a string) or null")
        rows.append(HistoryRow(time=when, aborted=aborted, run=str(obj.get("run") or ""), commit=obj.get("commit"),
                               test=obj["test"], fault=str(obj.get("fault") or ""),
                               region=str(obj.get("region") or ""), seed=seed, round=rnd,
                               switchover_s=_seconds(obj, "switchover_s", where),
                               dns_converge_s=_seconds(obj, "dns_converge_s", where),
                               client_recovery_s=_seconds(obj, "client_recovery_s", where),
                               passed=bool(obj.get("passed"))))
    return sorted(rows, key=lambda r: r.time)


def runs_of(rows: list[HistoryRow]) -> list[str]:
    """The run ids in the order the runs happened (first appearance)."""
    return list(dict.fromkeys(r.run for r in rows))
