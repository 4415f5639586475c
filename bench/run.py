"""Run gameday's benchmarks and write bench/results/<stamp>.json and .md (and latest.*).

    .venv/bin/python bench/run.py                 # everything (~10 min on 2 cores)
    .venv/bin/python bench/run.py --quick         # fewer rounds (~3-4 min)
    .venv/bin/python bench/run.py --only gateway_cost,propagation

Benchmarks (see bench/README.md): gateway_cost (a), propagation (b), bringup (c),
calibrated_drill (d), drill_wall (e), observer_rate (f), regional (g), drill_split (h), dns_read (i). Not
timed tests: they measure and report; the Markdown says PASS/FAIL against each issue's target
but the exit code is 0 unless a benchmark crashed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import BenchResult, loadavg  # noqa: E402  (bench/ is not a package)

NAMES = ("gateway_cost", "propagation", "bringup", "calibrated_drill", "drill_wall", "observer_rate", "regional",
         "drill_split", "dns_read")


def _timed(name: str, fn: Callable[[], list[BenchResult]]) -> list[BenchResult]:
    la0, t0 = loadavg(), time.monotonic()
    print(f"== {name}: load average {la0} ...", flush=True)
    try:
        results = fn()
    except Exception as exc:  # noqa: BLE001  (one broken benchmark must not lose the others)
        traceback.print_exc()
        results = [BenchResult(name, name, error=f"{type(exc).__name__}: {exc}"[:800])]
    la1, secs = loadavg(), time.monotonic() - t0
    for r in results:
        r.load_start, r.load_end, r.seconds = la0, la1, round(secs, 1)
        err = f"  ERROR {r.error}" if r.error else ""
        print(f"   {r.name}: {secs:.1f} s, load average at end {la1}{err}")
        for t in r.tables:
            print(t)
        print(flush=True)
    return results


def run(only: list[str], quick: bool, split_ref: str | None = None) -> list[BenchResult]:
    import calibrated_drill
    import dns_read
    import drill_split
    import drill_wall
    import gateway_cost
    import observer_rate
    import regional
    import scale

    results: list[BenchResult] = []
    if "gateway_cost" in only:
        results += _timed("gateway_cost", lambda: [gateway_cost.run(quick)])
    if "propagation" in only or "bringup" in only:
        label = "+".join(n for n in ("propagation", "bringup") if n in only)
        results += _timed(label, lambda: scale.run(quick, bringup="bringup" in only,
                                                   propagation="propagation" in only))
    if "calibrated_drill" in only:
        results += _timed("calibrated_drill", lambda: [calibrated_drill.run(quick)])
    if "drill_wall" in only:
        results += _timed("drill_wall", lambda: [drill_wall.run(quick)])
    if "observer_rate" in only:
        results += _timed("observer_rate", lambda: [observer_rate.run(quick)])
    if "regional" in only:
        results += _timed("regional", lambda: [regional.run(quick)])
    if "drill_split" in only:
        results += _timed("drill_split", lambda: [drill_split.run(quick, split_ref)])
    if "dns_read" in only:
        results += _timed("dns_read", lambda: [dns_read.run(quick)])
    return results


def render(results: list[BenchResult], meta: dict[str, object]) -> str:
    out = ["# gameday benchmark results", "",
           f"- when: {meta['when']}  host: {meta['host']}  cpus: {meta['cpus']}  python: {meta['python']}",
           f"- mode: {'quick' if meta['quick'] else 'full'}  total: {meta['seconds']} s",
           f"- load average (1/5/15 min) at start {meta['load_start']}, at end {meta['load_end']}", ""]
    for r in results:
        out += [f"## {r.title}", "",
                f"{r.seconds} s; load average {r.load_start} -> {r.load_end}", ""]
        if r.error:
            out += [f"**ERROR:** `{r.error}`", ""]
        for t in r.tables:
            out += [t, ""]
        out += [*r.notes, ""] if r.notes else []
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", help=f"comma-separated subset of: {', '.join(NAMES)}")
    p.add_argument("--quick", action="store_true", help="fewer rounds and repetitions (~3-4 min)")
    p.add_argument("--out", type=Path, default=HERE / "results",
                   help="results directory (default: bench/results)")
    p.add_argument("--drill-split-ref", metavar="COMMIT",
                   help="drill_split: also run the drill of COMMIT, alternating with this checkout's")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    only = [n.strip() for n in a.only.split(",")] if a.only else list(NAMES)
    unknown = [n for n in only if n not in NAMES]
    if unknown:
        p.error(f"--only: unknown benchmark(s) {unknown}; choose from {', '.join(NAMES)}")
    la0, t0 = loadavg(), time.monotonic()
    print(f"gameday bench ({'quick' if a.quick else 'full'}): {', '.join(only)}; "
          f"{os.cpu_count()} cpus, load average {la0}", flush=True)
    results = run(only, a.quick, a.drill_split_ref)
    meta: dict[str, object] = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "host": platform.node(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "quick": a.quick, "only": only,
        "seconds": round(time.monotonic() - t0, 1), "load_start": la0, "load_end": loadavg(),
    }
    a.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S") + ("-quick" if a.quick else "")
    data = {"meta": meta, "results": [
        {"name": r.name, "title": r.title, "seconds": r.seconds, "load_start": r.load_start,
         "load_end": r.load_end, "error": r.error, "notes": r.notes, "data": r.data} for r in results]}
    md = render(results, meta)
    for base in (stamp, "latest"):
        (a.out / f"{base}.json").write_text(json.dumps(data, indent=2, default=str))
        (a.out / f"{base}.md").write_text(md)
    print(f"load average at end {meta['load_end']}; {meta['seconds']} s in all")
    print(f"results: {a.out / (stamp + '.md')} (and .json; also latest.md/latest.json)")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
