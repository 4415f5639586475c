"""What a run's reports say about the run itself: its context, environment and history rows."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from gameday.reports.history import HistoryRow
from gameday.version import __version__


def context(settings: Any, profile: Any) -> dict[str, str]:
    """``target`` and ``topology`` (the profile's file for an external target)."""
    where = str(profile.path) if profile is not None else str(settings.topology or "clusters/local.yaml")
    return {"target": str(settings.target), "topology": where}


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def environment(settings: Any, profile: Any, regions: list[str],
                software: Mapping[str, str] | None = None) -> dict[str, str]:
    """environment.properties: what a reviewer needs to know the run was what they think.
    *software*: what the target said its federation runs (:class:`gameday.HasSoftware`)."""
    ctx = context(settings, profile)
    return {"target": ctx["target"], "topology": ctx["topology"], "regions": ", ".join(regions),
            "seed": str(settings.seed), "rounds": str(settings.rounds), "gameday": __version__,
            **dict(software or {}), "locust": _version("locust"),
            "allure-pytest": _version("allure-pytest"), "python": platform.python_version(),
            "switchover limit": f"{settings.slo.switchover_limit:g} s"}


def git_commit(cwd: Path | None = None) -> str | None:
    """The commit checked out where the run started (``GITHUB_SHA`` on Actions), or None."""
    if os.environ.get("GITHUB_SHA"):
        return os.environ["GITHUB_SHA"]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10,
                             check=False)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


def _value(d: dict[str, Any], name: str) -> float | None:
    f = d.get(name)
    v = f.get("value_s") if isinstance(f, dict) else None
    return float(v) if isinstance(v, int | float) else None


def _predicted(d: dict[str, Any]) -> dict[str, list[float]] | None:
    pred = d.get("prediction")
    windows = pred.get("windows") if isinstance(pred, dict) else None
    if not isinstance(windows, dict):
        return None
    return {k: [w["earliest_s"], w["latest_s"]] for k, w in windows.items()
            if isinstance(w, dict) and "earliest_s" in w and "latest_s" in w}


def _vs(d: dict[str, Any]) -> dict[str, str] | None:
    vs = d.get("vs_prediction")
    return {k: str(v.get("outcome")) for k, v in vs.items() if isinstance(v, dict)} if isinstance(vs, dict) else None


def history_rows(drills: list[dict[str, Any]], *, run: str, commit: str | None, settings: Any, profile: Any,
                 failed_tests: set[str], now: dt.datetime | None = None) -> list[HistoryRow]:
    """One row per drill of the run (its summary dicts), for ``reports/history.jsonl``.

    A drill passed when none of its verdicts failed, it was not aborted, and its test did
    not fail for another reason (*failed_tests*: node ids).
    """
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ctx = context(settings, profile)
    rows = []
    for d in drills:
        nodeid = str(d.get("test", ""))
        verdicts = d.get("verdicts") or []
        passed = (not any(v.get("outcome") in ("fail", "inconclusive") for v in verdicts) and not d.get("aborted")
                  and not d.get("casualty") and nodeid not in failed_tests)
        # An inconclusive drill (a starved harness) is no figure of the federation: kept out of
        # the trend and the regression verdict, as an aborted one is.
        inconclusive = any(v.get("outcome") == "inconclusive" for v in verdicts)
        rows.append(HistoryRow(time=stamp, run=run, commit=commit, target=ctx["target"], topology=ctx["topology"],
                               seed=int(d.get("seed") or settings.seed), test=nodeid.split("[", maxsplit=1)[0],
                               fault=str(d.get("fault")), region=str(d.get("region") or "-"),
                               round=int(d.get("round") or 0), switchover_s=_value(d, "switchover"),
                               dns_converge_s=_value(d, "dns_convergence"),
                               client_recovery_s=_value(d, "client_recovery"), passed=passed,
                               aborted=str(d["aborted"]) if d.get("aborted") else
                               "inconclusive: harness starved" if inconclusive else None,
                               predicted_s=_predicted(d), vs_prediction=_vs(d)))
    return rows
