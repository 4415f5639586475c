"""(h) Where a `gameday drill`'s time goes: bring-up, baseline, fault block, restore, teardown, report.

Runs ``gameday drill --reports <fresh tmp dir>`` (a new interpreter, federation and locust,
default options) with ``bench/split_plugin.py`` loaded, which stamps each phase on the drill's
own clock; see that module for the phases' edges. Every phase is reported in seconds and as a
share of pytest's whole session (the ``passed in`` time), with the pytest process's own CPU
seconds beside it (on a loaded machine the wall times stretch, the CPU much less).

With ``--ref COMMIT`` (``bench/run.py --drill-split-ref``) the same drill of that commit runs
side by side, alternating with this checkout's: a ``git worktree`` of the commit, imported
ahead of the installed (editable) gameday through ``PYTHONPATH``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import REPO, VENV_BIN, BenchResult, children_cpu_s, fmt, loadavg, md_table, median, workdir
from split_plugin import phases

HERE = Path(__file__).resolve().parent
PHASES = ("startup", "bring_up", "baseline", "fault_block", "restore", "report", "teardown", "finish")
TARGET_S = 15.0
"""Issue 18: the headline drill's verdicts in 15 s or less of pytest time."""


@contextlib.contextmanager
def _checkout(ref: str | None) -> Iterator[Path]:
    """This checkout (None), or a temporary worktree of *ref*, removed afterwards."""
    if ref is None:
        yield REPO
        return
    wd = workdir("split-ref") / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(wd), ref], check=True,
                   capture_output=True)
    try:
        yield wd
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(wd)], check=False,
                       capture_output=True)
        shutil.rmtree(wd.parent, ignore_errors=True)


def _one(tree: Path) -> dict[str, Any]:
    wd = workdir("split")
    out = wd / "split.json"
    # The tree's own gameday first (the editable install's finder comes after PYTHONPATH), then
    # this directory for the plugin.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(HERE)]), "GAMEDAY_SPLIT_OUT": str(out)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as `make drill` runs it (see the Makefile)
    try:
        la = loadavg()
        t0, cpu0 = time.monotonic(), children_cpu_s()
        proc = subprocess.run([str(VENV_BIN / "gameday"), "drill", "--reports", str(wd / "reports"),
                               "-p", "split_plugin"], cwd=tree, env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        wall, tree_cpu = time.monotonic() - t0, children_cpu_s() - cpu0
        m = re.search(r"(\d+) passed in ([\d.]+)s", proc.stdout)
        r: dict[str, Any] = {"exit_code": proc.returncode, "wall_s": round(wall, 2),
                             "tree_cpu_s": round(tree_cpu, 2),
                             "pytest_s": float(m.group(2)) if m else None, "load_avg_1min": la[0]}
        if out.is_file():
            d = json.loads(out.read_text())
            r["phases_s"] = phases(d["stamps"], d["marks"])
            cpu = d["cpu"]
            r["cpu_s"] = {"bring_up+baseline": round(cpu["call_start"] - cpu["session_start"], 2),
                          "call": round(cpu["call_end"] - cpu["call_start"], 2),
                          "report": round(cpu["call_reported"] - cpu["call_end"], 2),
                          "teardown": round(cpu["teardown_end"] - cpu["teardown_start"], 2),
                          "finish": round(cpu["unconfigure"] - cpu["teardown_end"], 2)}
        if proc.returncode != 0 or not out.is_file():
            r["tail"] = (proc.stdout + proc.stderr)[-1500:]
        return r
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def run(quick: bool, ref: str | None = None) -> BenchResult:
    res = BenchResult("drill_split", "(h) the headline drill's time split (issue 18)")
    reps = 1 if quick else 3
    sides: dict[str, list[dict[str, Any]]] = {"this checkout": []}
    with _checkout(ref) as old:
        if ref is not None:
            sides[f"ref {ref}"] = []
        for _ in range(reps):  # alternating: both sides see the same machine, round by round
            sides["this checkout"].append(_one(REPO))
            if ref is not None:
                sides[f"ref {ref}"].append(_one(old))
    res.data = {"runs": sides, "target_s": TARGET_S, "phases": PHASES}
    for side, runs in sides.items():
        ok = [r for r in runs if "phases_s" in r]
        rows = []
        for p in (*PHASES, "total"):
            vals = [r["phases_s"][p] for r in ok]
            shares = [r["phases_s"][p] / r["phases_s"]["total"] for r in ok if r["phases_s"]["total"] > 0]
            rows.append([p, fmt(median(vals), 2), f"{median(shares):.0%}" if shares else "-",
                         " ".join(fmt(v, 2) for v in vals)])
        for p in ("bring_up.federation", "bring_up.load"):
            vals = [r["phases_s"][p] for r in ok if p in r["phases_s"]]
            rows.append([f"({p})", fmt(median(vals), 2), "-", " ".join(fmt(v, 2) for v in vals)])
        res.tables.append(f"**{side}**\n\n" + md_table(["phase", "median s", "share of total", "each run s"], rows))
        pyt = [r["pytest_s"] for r in runs if r.get("pytest_s") is not None]
        tree = [r["tree_cpu_s"] for r in runs if r.get("tree_cpu_s") is not None]
        walls = [r["wall_s"] for r in runs]
        res.notes.append(
            f"{side}: whole process tree (gameday drill, its federation, locust), each run: wall "
            f"{' '.join(fmt(v, 1) for v in walls)} s, CPU {' '.join(fmt(v, 1) for v in tree)} s "
            f"(median {fmt(median(tree), 1)} CPU-s for {fmt(median(walls), 1)} s of wall)")
        cpu = [r["cpu_s"] for r in ok]
        res.notes.append(
            f"{side}: pytest 'passed in' {' '.join(fmt(v, 1) for v in pyt)} s (median {fmt(median(pyt), 1)}; "
            f"target <= {TARGET_S:g} s on a quiet machine); exit codes {[r['exit_code'] for r in runs]}; "
            f"load average (1 min) at each start {[r['load_avg_1min'] for r in runs]}; pytest process CPU s per "
            f"part, each run: {cpu}")
    res.notes.append(
        "Phases (bench/split_plugin.py): startup = session start to the first gameday fixture; bring_up = "
        "federation and load generator up, health check, observers started; baseline = steady state before the "
        "fault; fault_block = injection call to revert call; restore = revert to the end of the test's call; "
        "report = the call's report (verdicts, timeline plot, Allure); teardown = load and federation stopped; "
        "finish = terminal summary, history, run file. The shares add up to 100 % of the session.")
    return res
