"""The run history: one JSON line per drill in ``reports/history.jsonl``, appended by every run.

Each line is one :class:`HistoryRow`::

    {"time": "2026-12-01T12:00:00Z", "run": "20261201-120000-seed3-...", "commit": "b9ab3f1..." | null,
     "target": "local", "topology": "clusters/local.yaml", "seed": 3,
     "test": "suites/gameday/test_gateway_outage.py::test_random_gateway_outage",
     "fault": "gateway_down", "region": "b", "round": 0,
     "switchover_s": 2.31 | null, "dns_converge_s": 5.2 | null, "client_recovery_s": 6.0 | null,
     "passed": true, "aborted": "interrupted by Ctrl-C (SIGINT)" | null,
     "predicted_s": {"switchover": [0.4, 0.7], ...} | null,
     "vs_prediction": {"switchover": "pass", "dns_convergence": "fail", ...} | null}

``aborted`` says why a drill did not complete its observation (a signal, a casualty, a stop
condition, an error in its block; absent in lines written before it existed): its figures
are partial, so the regression verdict's median and the trend's line leave it out.
``predicted_s`` and ``vs_prediction`` (the prediction of DESIGN.md §8 and how each figure
compared with it) are absent from rows written before predictions existed.

``test`` is the node id without its parameters (``[round2]``), so rounds, seeds and regions
of one drill share a series. :func:`regression` compares a run's switchover with the median
of the previous runs of the same test and fault.
"""

from __future__ import annotations

import json
import logging
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger(__name__)

REGRESSION_FACTOR = 1.5
"""A switchover more than 50 % above the median of the previous runs is a regression."""
REGRESSION_MIN_RUNS = 3
"""Fewer previous runs than this give no median worth comparing with: no verdict, said so."""


@dataclass(frozen=True, kw_only=True)
class HistoryRow:
    """One drill of one run, as the history keeps it (seconds; None: not measured)."""

    time: str
    """When the run recorded it, ISO-8601 UTC (``2026-12-01T12:00:00Z``)."""
    run: str
    """The run's id (its run directory's name)."""
    commit: str | None
    """The git commit of the working directory the run started in, or None outside git."""
    target: str
    topology: str
    """The topology file, or the profile of an external target."""
    seed: int
    test: str
    """The test's node id without parameters."""
    fault: str
    region: str
    round: int
    switchover_s: float | None
    dns_converge_s: float | None
    client_recovery_s: float | None
    passed: bool
    """Every verdict the test asserted on this drill passed (and the test did not fail)."""
    aborted: str | None = None
    """Why the drill did not complete its observation (None: it did); see the module doc."""
    predicted_s: dict[str, list[float]] | None = None
    """Figure -> its predicted window ``[earliest, latest]`` (figures without one left out)."""
    vs_prediction: dict[str, str] | None = None
    """Figure -> ``pass``, ``fail`` or ``n/a`` against its predicted window."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HistoryRow:
        """Raises:
            ValueError: a field is missing or has the wrong type (the field is named).
        """
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")  # noqa: TRY004  (one error kind for a bad line)
        kinds: dict[str, tuple[type, ...]] = {
            "time": (str,), "run": (str,), "commit": (str, type(None)), "target": (str,), "topology": (str,),
            "seed": (int,), "test": (str,), "fault": (str,), "region": (str,), "round": (int,),
            "switchover_s": (int, float, type(None)), "dns_converge_s": (int, float, type(None)),
            "client_recovery_s": (int, float, type(None)), "passed": (bool,),
        }
        for name, types in kinds.items():
            if name not in data:
                raise ValueError(f"field {name!r} is missing")
            value = data[name]
            # bool is an int in Python: a seed of `true` is not a seed.
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise ValueError(f"field {name!r} must be {' or '.join(t.__name__ for t in types)} (got {value!r})")
        aborted = data.get("aborted")  # optional: lines written before it existed lack it
        if aborted is not None and not isinstance(aborted, str):
            raise ValueError(f"field 'aborted' must be str or NoneType (got {aborted!r})")
        values: dict[str, Any] = {k: (float(v) if k.endswith("_s") and v is not None else v)
                                  for k, v in data.items() if k in kinds}
        predicted, vs = data.get("predicted_s"), data.get("vs_prediction")
        if predicted is not None and not (isinstance(predicted, dict) and all(
                isinstance(w, list) and len(w) == 2 and all(isinstance(x, (int, float)) for x in w)
                for w in predicted.values())):
            raise ValueError(f"field 'predicted_s' must be an object of [earliest, latest] (got {predicted!r})")
        if vs is not None and not (isinstance(vs, dict) and all(isinstance(x, str) for x in vs.values())):
            raise ValueError(f"field 'vs_prediction' must be an object of strings (got {vs!r})")
        values["predicted_s"] = predicted
        values["vs_prediction"] = vs
        return cls(**values, aborted=aborted)


def append_history(path: Path, rows: list[HistoryRow]) -> None:
    """Append *rows* to the history at *path*, one JSON object per line (the file and its
    directory are created). A line is written whole with one ``write``: readers never see
    half a row from a run that is still writing."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r.as_dict(), sort_keys=True) + "\n" for r in rows)
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def load_history(path: Path) -> list[HistoryRow]:
    """Every valid row of the history at *path*, oldest first ([] when there is none).

    A line that is not a valid row (a run killed mid-write, a hand edit) is skipped with a
    warning naming the file, the line and what is wrong: one bad line must not hide the
    rest of the series.
    """
    if not path.exists():
        return []
    rows: list[HistoryRow] = []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(HistoryRow.from_dict(json.loads(line)))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            log.warning("%s line %d skipped: %s", path, n, exc)
    return rows


@dataclass(frozen=True)
class RegressionCheck:
    """How a drill's switchover compares with its history."""

    status: Literal["regression", "ok", "no verdict"]
    message: str
    """The sentence to show (with the figures, or why there is no verdict)."""
    flag: str
    """The short form for a table cell: ``REGRESSION +62%``, ``ok (+3%)``, ``no history (2/3)``."""
    median_s: float | None = None
    previous: int = 0
    """How many previous runs with a switchover the median is of."""


def _series(previous_rows: list[HistoryRow], test: str | None, fault: str | None) -> list[float]:
    rows = [r for r in previous_rows if (test is None or r.test == test) and (fault is None or r.fault == fault)]
    keys = {(r.test, r.fault) for r in rows}
    if len(keys) > 1:
        raise ValueError(f"regression: previous rows of {len(keys)} different test/fault pairs; pass test= and "
                         f"fault= (or rows of one drill): {sorted(keys)[:3]}")
    # One figure per run (the median of its rounds): a run of ten rounds is one run, not ten.
    # An aborted drill's switchover is not a figure of the federation: left out.
    by_run: dict[str, list[float]] = {}
    for r in rows:
        if r.switchover_s is not None and r.aborted is None:
            by_run.setdefault(r.run, []).append(r.switchover_s)
    return [statistics.median(v) for v in by_run.values()]


def check_regression(previous_rows: list[HistoryRow], current_switchover_s: float | None, *,
                     test: str | None = None, fault: str | None = None,
                     aborted: str | None = None) -> RegressionCheck:
    """Compare *current_switchover_s* with the median of the previous runs' switchovers.

    Args:
        previous_rows: earlier rows of this drill; or of any, with *test* and *fault* to pick.
        current_switchover_s: this run's switchover, seconds (None: not measured).
        aborted: why this drill did not complete its observation (no verdict then).

    Each previous run counts once (the median of its rounds); aborted drills do not count. A
    regression is strictly
    more than 50 % above the median of at least 3 previous runs
    (exactly 1.5 x the median is not one). With fewer runs, or no switchover measured, the
    status is "no verdict" and the message says why: no history is said, never assumed fine.

    Raises:
        ValueError: *previous_rows* mix drills and *test*/*fault* do not pick one.
    """
    values = _series(previous_rows, test, fault)
    if aborted is not None:
        return RegressionCheck("no verdict", f"no regression verdict: the drill was aborted ({aborted})",
                               "aborted", previous=len(values))
    if current_switchover_s is None:
        return RegressionCheck("no verdict", "no regression verdict: no switchover measured in this run",
                               "no switchover", previous=len(values))
    if len(values) < REGRESSION_MIN_RUNS:
        return RegressionCheck("no verdict", f"no regression verdict: {len(values)} previous run(s) with a "
                               f"switchover, {REGRESSION_MIN_RUNS} needed",
                               f"no history ({len(values)}/{REGRESSION_MIN_RUNS})", previous=len(values))
    median = statistics.median(values)
    above = current_switchover_s / median - 1 if median > 0 else float("inf")
    if current_switchover_s > REGRESSION_FACTOR * median:
        return RegressionCheck("regression", f"REGRESSION: switchover {current_switchover_s:.2f} s is "
                               f"{above:+.0%} against the median {median:.2f} s of {len(values)} previous runs "
                               f"(limit +{REGRESSION_FACTOR - 1:.0%})", f"REGRESSION {above:+.0%}", median, len(values))
    return RegressionCheck("ok", f"no regression: switchover {current_switchover_s:.2f} s is {above:+.0%} against "
                           f"the median {median:.2f} s of {len(values)} previous runs (limit "
                           f"+{REGRESSION_FACTOR - 1:.0%})", f"ok ({above:+.0%})", median, len(values))


def regression(previous_rows: list[HistoryRow], current_switchover_s: float | None, *,
               test: str | None = None, fault: str | None = None) -> str | None:
    """The regression sentence when *current_switchover_s* is more than 50 % above the median
    of at least 3 previous runs (see :func:`check_regression`), else None. None also when
    there is no verdict: use :func:`check_regression` to say why."""
    c = check_regression(previous_rows, current_switchover_s, test=test, fault=fault)
    return c.message if c.status == "regression" else None
