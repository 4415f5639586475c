"""R3's slow full pass observed at the default cadence (300 s), not forced (issue 28).

A per-commit run forces the 5-minute pass (``--gameday-cadence-patience`` defaults to 10 s, and the
check says "forced"). This runs the R3 conformance check the way the nightly workflow does, with
``--gameday-cadence-patience=310``, against two federations side by side (both mostly wait, so
they share the machine without starving each other):

- **healthy**: the default topology (``reconcile_interval: 300``): the check must pass on the
  federation's own pass, which must come within 300 + 2 s of the last one;
- **never reconciles**: the same topology stating 300 s, with ``defects.reconcile_every: 3600``
  (its control plane runs the pass hourly): the check must fail, "none ran in 302 s".

    .venv/bin/python bench/r3_cadence.py        # about 6 minutes, mostly waiting

Writes bench/results/r3-cadence-<stamp>.json and .md: each run's outcome, wall time, the check's
``r3_full_pass`` property (when the pass came) or its failure message. Exits 0 whatever the
outcomes: a measurement, not a test; the table says whether each came out as it must.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import loadavg, md_table

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
TEST = "suites/conformance/test_r03_slow_state.py"
PATIENCE = 310
RUNS: dict[str, tuple[dict[str, Any], str]] = {
    "healthy": ({}, "passed"),
    "never reconciles": ({"defects": {"reconcile_every": 3600}}, "failed"),
}
"""Name -> (changes merged into clusters/local.yaml, the outcome the check must have)."""


def _topology(changes: dict[str, Any], path: Path) -> Path:
    topo = yaml.safe_load((REPO / "clusters" / "local.yaml").read_text())
    for key, value in changes.items():
        topo.setdefault(key, {}).update(value)
    path.write_text(yaml.safe_dump(topo))
    return path


def _start(name: str, changes: dict[str, Any], tmp: Path) -> tuple[subprocess.Popen[str], Path, float]:
    slug = name.replace(" ", "-")
    junit = tmp / f"junit-{slug}.xml"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:locust", "-q", "-rP", TEST,
            f"--gameday-topology={_topology(changes, tmp / f'{slug}.yaml')}",
            f"--gameday-cadence-patience={PATIENCE}", f"--gameday-reports={tmp / slug}",
            f"--junitxml={junit}", f"--basetemp={tmp / f'base-{slug}'}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    return proc, junit, time.monotonic()


def _read(junit: Path) -> dict[str, Any]:
    try:
        case = ET.parse(junit).getroot().find(".//testcase")
    except (OSError, ET.ParseError):
        return {"outcome": "error", "detail": "no JUnit XML"}
    if case is None:
        return {"outcome": "error", "detail": "no test case in the JUnit XML"}
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    bad = case.find("failure")
    if bad is None:
        bad = case.find("error")
    skipped = case.find("skipped")
    outcome = "failed" if bad is not None else ("skipped" if skipped is not None else "passed")
    detail = (bad.get("message") or "")[:500] if bad is not None else str(props.get("r3_full_pass", ""))
    return {"outcome": outcome, "test_s": round(float(case.get("time", "nan")), 1), "detail": detail}


def main() -> int:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO, check=False).stdout.strip()
    load_start = loadavg()
    with tempfile.TemporaryDirectory(prefix="gameday-r3-cadence-") as t:
        tmp = Path(t)
        started = {name: (*_start(name, changes, tmp), must) for name, (changes, must) in RUNS.items()}
        rows: list[dict[str, Any]] = []
        for name, (proc, junit, t0, must) in started.items():
            out, _ = proc.communicate(timeout=PATIENCE + 600)
            row = {"run": name, "must": must, "rc": proc.returncode, "wall_s": round(time.monotonic() - t0, 1),
                   **_read(junit)}
            if row["outcome"] == "error":
                row["detail"] = out[-1500:]
            rows.append(row)
    meta = {"commit": commit, "patience_s": PATIENCE, "load_start": load_start, "load_end": loadavg()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    base = RESULTS / f"r3-cadence-{stamp}"
    base.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": rows}, indent=2) + "\n")
    lines = [f"# R3's slow full pass at the default 300 s cadence, observed (--gameday-cadence-patience "
             f"{PATIENCE})", "",
             f"`{TEST}` at {commit}, both runs side by side; load average at start {load_start}, "
             f"at end {meta['load_end']}.", "",
             md_table(["federation", "must", "outcome", "as it must", "test s", "wall s", "what the check said"],
                      [[r["run"], r["must"], r["outcome"], "yes" if r["outcome"] == r["must"] else "NO",
                        r.get("test_s", "-"), r["wall_s"], str(r["detail"]).replace("|", "/").replace("\n", " ")]
                       for r in rows]), ""]
    base.with_suffix(".md").write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"written: {base}.json, {base}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
