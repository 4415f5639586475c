"""How often the understated-interval negative control passes by luck (issue 28, item 4).

``tests/foreign/test_foreign_prediction.py::test_a_profile_stating_a_shorter_check_interval_than_powerdns_runs_fails_its_prediction``
drills a federation whose PowerDNS checks every 8 s with a profile stating 1 s; the control holds
when a round fails its DNS vs-prediction verdict. A round passes by luck with p ~ 0.18 (its
module docstring), the control only when all of its rounds do: p ** ROUNDS. This runs the test
itself N times, one after the other (its own foreign federation each time, a fresh seed each
time, as in CI), and puts the observed rates beside the stated ones:

- **runs passed by luck** (the control failed because no round failed): observed k of N, the
  95 % upper bound on the true rate (Clopper-Pearson), and the chance of seeing k or more if the
  stated probability were the truth;
- **rounds passed by luck**: the same per round (the rounds a run ran: it stops at its first
  failure; passes / rounds is the rate's maximum-likelihood estimate under that stopping rule);
- **phases**: per round, the time from the gateway's stop to PowerDNS's next check round, as the
  test records it from the checker's own connects: uniform over 0-8 s when the rounds start at
  random phases (``--gameday-round-jitter``); one value again and again when they do not;
- every run: outcome, seed, rounds, wall time, load average.

    .venv/bin/python bench/prediction_control.py              # 20 runs (~10-15 min on 2 cores)
    .venv/bin/python bench/prediction_control.py --runs 3

Writes bench/results/prediction-control-<stamp>.json (every run) and .md (the tables), N in
the title. Exits 0 whatever the outcomes: a measurement, not a test. Needs the Debian nginx and
PowerDNS of tests/foreign/debian-packages.sh.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import binom_tail, fmt, loadavg, md_table, median, upper_bound

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
TEST_FILE = "tests/foreign/test_foreign_prediction.py"
TEST = "test_a_profile_stating_a_shorter_check_interval_than_powerdns_runs_fails_its_prediction"
PROPERTY = "prediction_control"
LUCK_MESSAGE = "failed its prediction"
"""In the test's assertion when no round failed (``no round of N failed its prediction``)."""


def stated() -> tuple[int, float, float]:
    """(rounds, a round's chance of passing by luck, the control's) as the test states them."""
    sys.path.insert(0, str(REPO))
    from tests.foreign import test_foreign_prediction as t

    return t.ROUNDS, t.LUCK_PER_ROUND, t.LUCK_PER_ROUND ** t.ROUNDS


def _run(i: int, tmp: Path) -> dict[str, Any]:
    junit = tmp / f"junit-{i}.xml"
    before = loadavg()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           f"{TEST_FILE}::{TEST}", f"--junitxml={junit}", f"--basetemp={tmp / f'run-{i}'}"],
                          capture_output=True, text=True, timeout=1200, check=False, cwd=REPO)
    out: dict[str, Any] = {"run": i, "rc": proc.returncode, "wall_s": round(time.monotonic() - t0, 1),
                           "load_before": before, "load_after": loadavg()}
    record: dict[str, Any] | None = None
    message = ""
    try:
        case = ET.parse(junit).getroot().find(".//testcase")
    except (OSError, ET.ParseError):
        case = None
    if case is not None:
        out["test_s"] = round(float(case.get("time", "nan")), 1)
        for prop in case.iter("property"):
            if prop.get("name") == PROPERTY:
                record = json.loads(prop.get("value") or "{}")
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            message = (bad.get("message") or "")[:600]
    if record is not None:
        out["seed"], out["rounds"] = record["seed"], record["rounds"]
    if proc.returncode == 0 and record is not None:
        out["outcome"] = "held"  # a round failed its prediction, as it must
    elif record is not None and LUCK_MESSAGE in message and all(
            r["dns_vs_prediction"] == "pass" for r in record["rounds"]):
        out["outcome"] = "passed by luck"
    else:
        out["outcome"] = "error"
        out["error"] = message or (proc.stdout + proc.stderr)[-1500:]
    return out


def _render(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    n_rounds, p_round, p_run = meta["rounds_max"], meta["p_round"], meta["p_run"]
    judged = [r for r in runs if r["outcome"] != "error"]
    lucky = [r for r in judged if r["outcome"] == "passed by luck"]
    rounds = [x for r in judged for x in r["rounds"]]
    lucky_rounds = [x for x in rounds if x["dns_vs_prediction"] == "pass"]
    n, k, m, j = len(judged), len(lucky), len(rounds), len(lucky_rounds)
    lines = [f"# prediction control: N = {meta['runs']} runs of the understated-interval control "
             f"({n} judged, {len(runs) - n} errors), {k} passed by luck", "",
             f"`{TEST_FILE}::{TEST}` at {meta['commit']}; up to {n_rounds} rounds a run, stopping at the first "
             f"that fails; --gameday-round-jitter 8 s, a fresh seed each run. Load average at start "
             f"{meta['load_start']}, at end {meta['load_end']}.", ""]
    lines += ["## observed beside stated", "", md_table(
        ["what", "stated", "observed", "95 % upper bound", "P(>= observed) if stated is true"],
        [["run passes by luck (the control fails)", f"{p_run:.1e} ({p_round:.3f}^{n_rounds})",
          f"{k} of {n}" + (f" = {k / n:.3f}" if n else ""), fmt(upper_bound(k, n), 3) if n else "-",
          f"{binom_tail(k, n, p_run):.3g}" if n else "-"],
         ["round passes by luck", f"{p_round:.3f}", f"{j} of {m}" + (f" = {j / m:.3f}" if m else ""),
          fmt(upper_bound(j, m), 3) if m else "-", f"{binom_tail(j, m, p_round):.3g}" if m else "-"]]), ""]
    phases = [x["next_check_s"] for x in rounds if x.get("next_check_s") is not None]
    counts = [sum(1 for w in phases if b <= w < b + 1) for b in range(8)]
    lines += ["## phases: gateway stop to PowerDNS's next check round (s)", "",
              f"{len(phases)} rounds; uniform over 0-8 s expects {len(phases) / 8:.1f} a bin.", "",
              md_table([f"{b}-{b + 1}" for b in range(8)], [counts]), ""]
    walls = [r["wall_s"] for r in runs]
    lines += [f"Wall time of a run (pytest process, its own federation included): median {fmt(median(walls), 1)} s, "
              f"max {fmt(max(walls) if walls else None, 1)} s; rounds a run: "
              f"{', '.join(str(len(r.get('rounds', []))) for r in runs)}.", ""]
    lines += ["## every run", "", md_table(
        ["run", "outcome", "seed", "rounds: region, jitter, next check, dns (verdict)", "wall s", "load before/after"],
        [[r["run"], r["outcome"], r.get("seed", "-"),
          "; ".join(f"{x['region']} {x['jitter_s']:.2f}/{fmt(x.get('next_check_s'), 2)}/{x['dns_s']:.2f} s "
                    f"({x['dns_vs_prediction']})" for x in r.get("rounds", [])) or r.get("error", "-")[:200],
          r["wall_s"], f"{r['load_before'][0]:.1f}/{r['load_after'][0]:.1f}"] for r in runs]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="how many times to run the control (default 20)")
    a = p.parse_args(argv)
    if a.runs < 1:
        p.error("--runs must be >= 1")
    rounds_max, p_round, p_run = stated()
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=REPO,
                            check=False).stdout.strip()
    meta: dict[str, Any] = {"runs": a.runs, "rounds_max": rounds_max, "p_round": p_round, "p_run": p_run,
                            "commit": commit or "?", "load_start": loadavg()}
    runs = []
    with tempfile.TemporaryDirectory(prefix="gameday-prediction-control-") as tmp:
        for i in range(1, a.runs + 1):
            r = _run(i, Path(tmp))
            runs.append(r)
            print(f"run {i}/{a.runs}: {r['outcome']} seed {r.get('seed')} rounds "
                  f"{[x['dns_vs_prediction'] for x in r.get('rounds', [])]} ({r['wall_s']} s, load "
                  f"{r['load_before'][0]:.1f})", flush=True)
    meta["load_end"] = loadavg()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    base = RESULTS / f"prediction-control-{stamp}-n{a.runs}"
    base.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    md = _render(runs, meta)
    base.with_suffix(".md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
