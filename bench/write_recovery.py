"""Write recovery of a sync store that loses its leader, over N drills, beside its prediction (issue 27).

Runs the state layer's drill (``suites/gameday/test_store_down.py``: the store node that leads the
data is killed with ``kill -9`` under the writer) N times on the default topology (JetStream,
``sync``), each in its own pytest process with a fresh seed and its own federation, and tabulates
what each measured: write recovery (the first write *sent after* the fault that was
acknowledged), its resolution, the window the prediction states for it (nats-server's Raft
election: 3.00-10.80 s on the defaults), where the figure fell in it, and every state verdict's
outcome (data loss, duplicates, stale reads, fencing). A drill whose harness was starved is
counted apart (inconclusive), not as a measurement.

    .venv/bin/python bench/write_recovery.py                       # 30 drills, 2 at a time (~8 min)
    .venv/bin/python bench/write_recovery.py --drills 10 --parallel 1

Writes bench/results/write-recovery-<stamp>-n<N>.json (every drill) and .md (the distribution and
the table). Exits 0 whatever the figures: a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt, loadavg, md_table, median, percentile

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
DRILL = "suites/gameday/test_store_down.py"
STATE_VERDICTS = ("write_recovery", "write_recovery_vs_prediction", "data_loss", "data_loss_vs_prediction",
                  "stale_reads", "duplicates", "fencing")


def _run(i: int, seed: int, tmp: Path) -> dict[str, Any]:
    reports = tmp / f"reports-{i}"
    before = loadavg()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:gameday_plots",
                           "-p", "no:gameday_history", "-q", DRILL, f"--gameday-seed={seed}",
                           f"--gameday-reports={reports}"],
                          capture_output=True, text=True, timeout=600, check=False, cwd=REPO)
    out: dict[str, Any] = {"drill": i, "seed": seed, "rc": proc.returncode, "wall_s": round(time.monotonic() - t0, 1),
                           "load_before": before, "starved": "HarnessStarved" in proc.stdout}
    figures = sorted(reports.glob("runs/*/drills/*/figures-*.json"))
    if not figures:
        out["error"] = (proc.stdout + proc.stderr)[-800:]
        return out
    data = json.loads(figures[0].read_text())
    wr = (data.get("state") or {}).get("write_recovery") or {}
    # the window is the verdict's: "predicted 3.00-10.80 s (+ resolution + 0.5 s slack)", its derivation the detail
    vs = next((v for v in data.get("verdicts", []) if v["name"] == "write_recovery_vs_prediction"), {})
    window = re.search(r"predicted (\d+(?:\.\d+)?)-(\d+(?:\.\d+)?) s", str(vs.get("limit", "")))
    out.update({
        "region": data.get("region"), "value_s": wr.get("value_s"), "resolution_s": wr.get("resolution_s"),
        "detail": wr.get("detail"), "window": [float(window[1]), float(window[2])] if window else None,
        "derivation": vs.get("detail"),
        "verdicts": {v["name"]: v["outcome"] for v in data.get("verdicts", []) if v["name"] in STATE_VERDICTS},
        "acked": ((data.get("state") or {}).get("writes") or {}).get("ack"),
        "lost": ((data.get("state") or {}).get("data_loss") or {}).get("lost"),
    })
    return out


def _render(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    measured = [r for r in runs if r.get("value_s") is not None and r.get("window") and not r.get("starved")]
    values = [float(r["value_s"]) for r in measured]
    windows = {tuple(r["window"]) for r in measured}
    lines = [f"# write recovery of a sync store losing its leader: {len(runs)} of {meta['drills']} drills "
             f"({len(measured)} measured)", "",
             f"At {meta['commit']}, `{DRILL}` on `clusters/local.yaml` (JetStream, sync), {meta['parallel']} at a "
             f"time, a fresh seed each; load average at start {meta['load_start']}, at end {meta['load_end']}.", ""]
    if values:
        lo, hi = min(w[0] for w in windows), max(w[1] for w in windows)
        inside = sum(1 for r in measured if r["window"][0] - r["resolution_s"] <= r["value_s"]
                     <= r["window"][1] + r["resolution_s"])
        lines += ["## distribution", "", md_table(
            ["drills", "min s", "p5 s", "median s", "p95 s", "max s", "predicted window s", "inside (± resolution)"],
            [[len(values), fmt(min(values), 2), fmt(percentile(values, 5), 2), fmt(median(values), 2),
              fmt(percentile(values, 95), 2), fmt(max(values), 2), f"{lo:.2f}-{hi:.2f}",
              f"{inside} of {len(values)}"]]),
            "", f"The window: {measured[0].get('derivation')}", ""]
        # where in the window: a histogram of 1 s bins
        bins: dict[int, int] = {}
        for v in values:
            bins[int(v)] = bins.get(int(v), 0) + 1
        lines += ["| s after the fault | drills |", "|---|---|"]
        lines += [f"| {b}-{b + 1} | {'#' * n} {n} |" for b, n in sorted(bins.items())]
        lines.append("")
    failed = {name: sum(1 for r in measured if r["verdicts"].get(name) == "fail") for name in STATE_VERDICTS}
    lines += ["## state verdicts (failures over the measured drills)", "",
              md_table(list(STATE_VERDICTS), [[failed[n] for n in STATE_VERDICTS]]), ""]
    lines += ["## every drill", "", md_table(
        ["drill", "seed", "rc", "wall s", "region", "write recovery s", "± s", "window s", "acked", "lost", "starved",
         "failed verdicts"],
        [[r["drill"], r["seed"], r["rc"], r["wall_s"], r.get("region"), fmt(r.get("value_s"), 2),
          fmt(r.get("resolution_s"), 2), "-" if not r.get("window") else f"{r['window'][0]}-{r['window'][1]}",
          r.get("acked"), r.get("lost"), r.get("starved"),
          ", ".join(n for n, o in (r.get("verdicts") or {}).items() if o == "fail") or r.get("error", "")[:80]]
         for r in sorted(runs, key=lambda r: r["drill"])]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drills", type=int, default=30, help="how many drills (default 30)")
    p.add_argument("--parallel", type=int, default=2, help="drills at a time (default 2)")
    a = p.parse_args(argv)
    if a.drills < 1 or a.parallel < 1:
        p.error("--drills and --parallel must be >= 1")
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=REPO,
                            check=False).stdout.strip()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    meta: dict[str, Any] = {"commit": commit, "drills": a.drills, "parallel": a.parallel, "load_start": loadavg()}
    rng = random.Random()
    seeds = [rng.randrange(1, 1 << 30) for _ in range(a.drills)]
    RESULTS.mkdir(parents=True, exist_ok=True)
    base = RESULTS / f"write-recovery-{stamp}-n{a.drills}"
    runs: list[dict[str, Any]] = []

    def write() -> None:  # after every drill: an interrupted bench keeps what it measured
        meta["load_end"] = loadavg()
        base.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=2))
        base.with_suffix(".md").write_text(_render(runs, meta))

    with tempfile.TemporaryDirectory(prefix="gd-wr-") as tmp, ThreadPoolExecutor(a.parallel) as pool:
        for r in pool.map(lambda i: _run(i, seeds[i], Path(tmp)), range(a.drills)):
            runs.append(r)
            print(f"drill {r['drill']}: write recovery {fmt(r.get('value_s'), 2)} s, rc {r['rc']}"
                  + (" (starved)" if r.get("starved") else ""), flush=True)
            write()
    print(base.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
