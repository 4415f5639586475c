"""How often each random negative control passes by luck, beside the chance it states (issue 28, item 4).

A negative control whose outcome is random (which writes land in the moments that decide it,
which clients hold the failed address) states its chance of passing by luck: the ``FALSE_PASS``
table of its test module (``tests/negative/test_state_controls.py``,
``tests/negative/test_prediction_controls.py``). This runs each such control N times (its own
broken federation each time, a fresh seed each time, as in CI) and puts the observed rate beside
the stated one:

- **held**: the control test passed (the broken federation failed the verdict it must, and only it);
- **not held**: the control test failed for any other reason than a starved harness: passed by luck,
  or broke (the message is kept);
- **inconclusive**: the test's drill had a starved harness (``HarnessStarved``): neither.

For each control: held / not held / inconclusive, the 95 % upper bound of the not-held rate
(Clopper-Pearson) and the chance of seeing that many or more were the stated probability true.
The PowerDNS check-interval control has its own bench (``bench/prediction_control.py``: it also
records each round's phase).

    .venv/bin/python bench/control_odds.py                  # 20 runs of each (about 1 h on 2 cores)
    .venv/bin/python bench/control_odds.py --runs 5 --only stale_reads
    .venv/bin/python bench/control_odds.py --parallel 2     # two runs at a time, as make test's workers

Writes bench/results/control-odds-<stamp>-n<N>.json (every run) and .md (the table). Exits 0 whatever
the outcomes: a measurement, not a test.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import binom_tail, fmt, loadavg, md_table, median, upper_bound

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
MODULES = ("tests.negative.test_state_controls", "tests.negative.test_prediction_controls")
STARVED = "HarnessStarved"


def stated() -> dict[str, float]:
    """Node id -> the control's stated chance of passing by luck, from each module's ``FALSE_PASS``."""
    sys.path.insert(0, str(REPO))
    out: dict[str, float] = {}
    for name in MODULES:
        module = importlib.import_module(name)
        path = name.replace(".", "/") + ".py"
        for test, p in module.FALSE_PASS.items():
            assert callable(getattr(module, test, None)), f"{path}: FALSE_PASS names no test {test}"
            out[f"{path}::{test}"] = p
    return out


def _run(nodeid: str, i: int, tmp: Path) -> dict[str, Any]:
    slug = f"{nodeid.rsplit('::', 1)[1][:40]}-{i}"
    junit = tmp / f"junit-{slug}.xml"
    before = loadavg()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", nodeid,
                           f"--junitxml={junit}", f"--basetemp={tmp / f'run-{slug}'}"],
                          capture_output=True, text=True, timeout=1200, check=False, cwd=REPO)
    out: dict[str, Any] = {"control": nodeid, "run": i, "rc": proc.returncode,
                           "wall_s": round(time.monotonic() - t0, 1), "load_before": before}
    message = text = ""
    try:
        case = ET.parse(junit).getroot().find(".//testcase")
    except (OSError, ET.ParseError):
        case = None
    if case is not None:
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            message, text = bad.get("message") or "", bad.text or ""
    if proc.returncode == 0 and case is not None:
        out["outcome"] = "held"
    elif STARVED in message:  # the failure itself (tests/conftest.py turns it into HarnessStarved), not
        out["outcome"] = "inconclusive"  # the source lines a traceback quotes
        out["detail"] = message[:400]
    else:
        out["outcome"] = "not held"
        out["detail"] = (f"{message}\n{text[-1200:]}" if message else (proc.stdout + proc.stderr)[-1500:])[:1500]
    return out


def _render(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    rows = []
    for nodeid, p in meta["stated"].items():
        mine = [r for r in runs if r["control"] == nodeid]
        if not mine:
            continue
        held = sum(r["outcome"] == "held" for r in mine)
        lost = sum(r["outcome"] == "not held" for r in mine)
        starved = sum(r["outcome"] == "inconclusive" for r in mine)
        n = held + lost
        rows.append([nodeid.rsplit("::", 1)[1], f"{p:.1e}", f"{held} of {n}", lost, starved,
                     fmt(upper_bound(lost, n), 3) if n else "-", f"{binom_tail(lost, n, p):.3g}" if n else "-",
                     fmt(median([r["wall_s"] for r in mine]), 0)])
    lines = [f"# control odds: N = {meta['runs']} runs of each random negative control ({meta['done']} of "
             f"{meta['runs'] * len(meta['stated'])} done)", "",
             f"At {meta['commit']}, {meta['parallel']} run(s) at a time; load average at start {meta['load_start']}, "
             f"at end {meta['load_end']}. A control **holds** when its test passes (the broken federation failed "
             "the verdict it must, and only it); it is **not held** when its test fails for any reason but a "
             "starved harness (passed by luck, or broke); **inconclusive** when its drill's harness was starved.", "",
             md_table(["control", "stated P(pass by luck)", "held", "not held", "inconclusive",
                       "95 % upper bound of not held", "P(>= not held) if stated is true", "median wall s"], rows), ""]
    bad = [r for r in runs if r["outcome"] != "held"]
    if bad:
        lines += ["## runs that did not hold", "", md_table(
            ["control", "run", "outcome", "what it said"],
            [[r["control"].rsplit("::", 1)[1], r["run"], r["outcome"],
              str(r.get("detail", "")).replace("|", "/").replace("\n", " ")[:300]] for r in bad]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="how many times to run each control (default 20)")
    p.add_argument("--only", action="append", default=[], metavar="SUBSTRING",
                   help="run only the controls whose test name contains SUBSTRING (repeatable)")
    p.add_argument("--parallel", type=int, default=1, help="runs at a time (default 1)")
    a = p.parse_args(argv)
    if a.runs < 1 or a.parallel < 1:
        p.error("--runs and --parallel must be >= 1")
    controls = {k: v for k, v in stated().items() if not a.only or any(s in k for s in a.only)}
    if not controls:
        p.error(f"no random control matches {a.only}; they are: {', '.join(stated())}")
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=REPO,
                            check=False).stdout.strip()
    meta: dict[str, Any] = {"runs": a.runs, "parallel": a.parallel, "stated": controls, "commit": commit or "?",
                            "load_start": loadavg()}
    # interleaved (control 1 run 1, control 2 run 1, ...): a slow hour of the machine spreads over all
    jobs = [(nodeid, i) for i in range(1, a.runs + 1) for nodeid in controls]
    runs: list[dict[str, Any]] = []
    RESULTS.mkdir(parents=True, exist_ok=True)
    base = RESULTS / f"control-odds-{time.strftime('%Y%m%d-%H%M%S')}-n{a.runs}"

    def write() -> str:  # after every run: an interrupted bench keeps what it measured
        meta["load_end"], meta["done"] = loadavg(), len(runs)
        base.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
        md = _render(runs, meta)
        base.with_suffix(".md").write_text(md)
        return md

    with tempfile.TemporaryDirectory(prefix="gameday-control-odds-") as tmp, \
            ThreadPoolExecutor(max_workers=a.parallel) as pool:
        for r in pool.map(lambda job: _run(job[0], job[1], Path(tmp)), jobs):
            runs.append(r)
            write()
            print(f"{r['control'].rsplit('::', 1)[1][:70]} run {r['run']}: {r['outcome']} ({r['wall_s']} s, load "
                  f"{r['load_before'][0]:.1f})", flush=True)
    print(write())
    return 0


if __name__ == "__main__":
    sys.exit(main())
