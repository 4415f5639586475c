"""(e) Cold ``gameday drill`` wall time, and locust's achieved vs target rate.

Runs ``.venv/bin/gameday drill --reports <fresh tmp dir>`` as a subprocess (a new
interpreter, a new federation, a new locust: "cold"), times it on the harness clock,
and reads the drill's ``figures-*.json`` (``load``: achieved rate over the fault window)
and its request records (achieved rate over the whole run).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from typing import Any

from common import REPO, VENV_BIN, BenchResult, fmt, md_table, median, workdir

WALL_TARGET = 30.0
RATE_TOLERANCE = 0.05


def _records_rate(run_dir: Any) -> float | None:
    ts: list[float] = []
    for path in run_dir.glob("load/**/records/requests-*.jsonl"):
        for line in path.read_text(errors="replace").splitlines():
            try:
                ts.append(float(json.loads(line)["t"]))
            except (ValueError, KeyError, TypeError):
                continue
    if len(ts) < 2:
        return None
    return (len(ts) - 1) / (max(ts) - min(ts))


def run(quick: bool) -> BenchResult:
    res = BenchResult("drill_wall", "(e) cold `gameday drill` wall time and locust achieved vs target rate")
    reps = 1 if quick else 2
    runs: list[dict[str, Any]] = []
    for _ in range(reps):
        wd = workdir("drill")
        try:
            t0 = time.monotonic()
            proc = subprocess.run([str(VENV_BIN / "gameday"), "drill", "--reports", str(wd)], cwd=REPO,
                                  capture_output=True, text=True, timeout=300, check=False)
            wall = time.monotonic() - t0
            m = re.search(r"passed|failed|error", proc.stdout.splitlines()[-1] if proc.stdout else "")
            pytest_s = re.search(r" in ([\d.]+)s", proc.stdout)
            r: dict[str, Any] = {"wall_s": round(wall, 2), "exit_code": proc.returncode,
                                 "outcome": m.group(0) if m else None,
                                 "pytest_s": float(pytest_s.group(1)) if pytest_s else None}
            figs = sorted(wd.glob("runs/*/drills/*/figures-*.json"))
            if figs:
                f = json.loads(figs[0].read_text())
                load = f.get("load") or {}
                r.update(target_rps=load.get("target_rps"), achieved_rps=load.get("achieved_rps"),
                         switchover_s=(f.get("switchover") or {}).get("value_s"), region=f.get("region"))
            runs_dirs = sorted(wd.glob("runs/*"))
            r["achieved_rps_whole_run"] = _records_rate(runs_dirs[0]) if runs_dirs else None
            if proc.returncode != 0:
                r["tail"] = (proc.stdout + proc.stderr)[-1500:]
            runs.append(r)
        finally:
            shutil.rmtree(wd, ignore_errors=True)
    res.data = {"runs": runs, "wall_target_s": WALL_TARGET, "rate_tolerance": RATE_TOLERANCE}
    rows = []
    for i, r in enumerate(runs):
        tgt, ach = r.get("target_rps"), r.get("achieved_rps")
        ratio = ach / tgt if tgt and ach is not None else None
        rows.append([i + 1, r["exit_code"], fmt(r["wall_s"], 1), fmt(r["pytest_s"], 1),
                     "PASS" if r["wall_s"] <= WALL_TARGET else "FAIL", r.get("region", "-"),
                     fmt(r.get("switchover_s"), 2), fmt(tgt, 1), fmt(ach, 2),
                     fmt(r.get("achieved_rps_whole_run"), 2), fmt(ratio, 3),
                     ("PASS" if abs(ratio - 1) <= RATE_TOLERANCE else "FAIL") if ratio is not None else "-"])
    res.tables.append(md_table(
        ["run", "exit", "wall s", "pytest s", "<= 30 s", "region", "switchover s", "target rps",
         "achieved rps (fault window)", "achieved rps (whole run)", "achieved/target", "within 5 %"], rows))
    walls = [r["wall_s"] for r in runs]
    res.notes.append(
        f"median wall {fmt(median(walls), 1)} s over {len(runs)} cold run(s) "
        "(subprocess, fresh reports dir). "
        "'fault window': the figure the drill itself records (t_fault..t_revert); 'whole run': every request "
        "record from the first to the last.")
    return res
