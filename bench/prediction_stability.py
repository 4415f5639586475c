"""Stability of the vs-prediction verdicts (issue 16): seeded headline drills on a healthy
local federation, every failed verdict counted (the goal is 0), and the distribution of
measured minus predicted for each figure.

Each drill is a real ``gameday drill --seed N`` (the headline test, its own federation, real
load), run one after the other. Per figure: measured - latest (positive: later than the
window's end; the verdict tolerates the figure's resolution + the slack above it) and
measured - earliest (negative: earlier than the window's start). The load average is
recorded before and after each drill: on a shared machine the outliers are read with it.

    .venv/bin/python bench/prediction_stability.py                 # 30 drills, seeds 1..30
    .venv/bin/python bench/prediction_stability.py --drills 10 --first-seed 100

Writes bench/results/prediction-<stamp>.json (every drill's figures, windows and verdicts)
and .md (the tables). Exits 0 whatever the verdicts: a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt, loadavg, md_table, median, percentile

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
FIGURES = ("switchover", "dns_convergence", "client_recovery")


def _drill(seed: int, reports: Path) -> dict[str, Any]:
    before = loadavg()
    t0 = time.monotonic()
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "gameday"), "drill", "--seed", str(seed), "--reports",
                           str(reports)], capture_output=True, text=True, timeout=900, check=False, cwd=REPO)
    wall = time.monotonic() - t0
    found = [json.loads(f.read_text()) for f in reports.glob("runs/*/drills/*/figures-*.json")]
    mine = [d for d in found if d.get("seed") == seed]
    out: dict[str, Any] = {"seed": seed, "rc": proc.returncode, "wall_s": round(wall, 1), "load_before": before,
                           "load_after": loadavg()}
    if not mine:
        out["error"] = (proc.stdout + proc.stderr)[-1500:]
        return out
    d = mine[-1]
    out["region"] = d.get("region")
    out["verdicts"] = {v["name"]: v["outcome"] for v in d.get("verdicts", [])}
    out["failed"] = {v["name"]: v["detail"] for v in d.get("verdicts", []) if v["outcome"] == "fail"}
    out["injection_uncertainty_s"] = d.get("injection_uncertainty_s")
    windows = (d.get("prediction") or {}).get("windows", {})
    for name in FIGURES:
        f, w = d.get(name) or {}, windows.get(name) or {}
        value = f.get("value_s")
        out[name] = {"value_s": value, "resolution_s": f.get("resolution_s"), "earliest_s": w.get("earliest_s"),
                     "latest_s": w.get("latest_s"),
                     "minus_latest_s": None if value is None or "latest_s" not in w
                     else round(value - w["latest_s"], 3),
                     "minus_earliest_s": None if value is None or "earliest_s" not in w
                     else round(value - w["earliest_s"], 3)}
    return out


def _render(drills: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    ok = [d for d in drills if "verdicts" in d]
    failed: dict[str, int] = {}
    for d in ok:
        for name in d["failed"]:
            failed[name] = failed.get(name, 0) + 1
    lines = [f"# vs-prediction stability: {len(ok)} headline drills (seeds {meta['seeds']}), "
             f"{sum(1 for d in ok if d['failed'])} with a failed verdict", "",
             f"load average at start {meta['load_start']}, at end {meta['load_end']}; slack "
             f"{meta['slack']} s (--gameday-prediction-slack default)", ""]
    lines += ["## failed verdicts (goal 0)", "",
              md_table(["verdict", "drills failed"], sorted(failed.items()) or [("(none)", 0)]), ""]
    rows = []
    for name in FIGURES:
        late = [d[name]["minus_latest_s"] for d in ok if d[name]["minus_latest_s"] is not None]
        early = [d[name]["minus_earliest_s"] for d in ok if d[name]["minus_earliest_s"] is not None]
        if late:
            rows.append([name, len(late), fmt(min(late), 2), fmt(median(late), 2), fmt(percentile(late, 95), 2),
                         fmt(max(late), 2), fmt(min(early), 2)])
    lines += ["## measured minus predicted (s)", "",
              md_table(["figure", "n", "min - latest", "p50 - latest", "p95 - latest", "max - latest",
                        "min - earliest"], rows), ""]
    lines += ["## every drill", "", md_table(
        ["seed", "region", "switchover", "dns", "client recovery", "failed", "load before/after"],
        [[d["seed"], d.get("region", "-"),
          *(f"{d[n]['value_s']:.2f} [{d[n]['earliest_s']:.2f}-{d[n]['latest_s']:.2f}]"
            if "verdicts" in d and d[n]["value_s"] is not None and d[n]["latest_s"] is not None else "-"
            for n in FIGURES),
          ", ".join(d.get("failed", {})) or ("ERROR" if "error" in d else "-"),
          f"{d['load_before'][0]:.1f}/{d['load_after'][0]:.1f}"] for d in drills]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drills", type=int, default=30)
    p.add_argument("--first-seed", type=int, default=1)
    a = p.parse_args(argv)
    from gameday.runtime.settings import SLO

    seeds = list(range(a.first_seed, a.first_seed + a.drills))
    meta: dict[str, Any] = {"seeds": f"{seeds[0]}..{seeds[-1]}", "load_start": loadavg(),
                            "slack": SLO().prediction_slack}
    drills = []
    with tempfile.TemporaryDirectory(prefix="gameday-prediction-") as tmp:
        for seed in seeds:
            d = _drill(seed, Path(tmp) / "reports")
            drills.append(d)
            print(f"seed {seed}: rc {d['rc']} region {d.get('region')} failed {list(d.get('failed', {}))} "
                  f"({d['wall_s']} s, load {d['load_before'][0]:.1f})", flush=True)
    meta["load_end"] = loadavg()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"prediction-{stamp}.json").write_text(json.dumps({"meta": meta, "drills": drills}, indent=1))
    md = _render(drills, meta)
    (RESULTS / f"prediction-{stamp}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
