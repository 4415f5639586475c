"""Where a headline drill's CPU goes, process by process (issue 31; issue 27's state-layer budget).

Runs ``gameday drill --seed N`` (the headline drill on the embedded federation) and, every 0.2 s
while it runs, reads the CPU time (user + system) of every process in its tree from /proc
(``psutil``): the pytest process, locust, the launcher and every component it forked (named by
role from the federation's ``state.json``: gateway, app, agent, proxy, GSLB, control plane, NATS,
store nodes). A process's last reading is its CPU; the sum is checked against the reaped tree's
``RUSAGE_CHILDREN`` (a process that lived less than one sampling period is missed).

With ``--compare-state`` each round runs the default topology and the same without ``state``
(no store nodes, no writer), side by side with the same seed, so the state layer's cost is read
per process (issue 27's budget: a drill's CPU at most 15 % more).

    .venv/bin/python bench/drill_cpu.py                      # 2 drills (~1 min)
    .venv/bin/python bench/drill_cpu.py --drills 3 --compare-state

Writes bench/results/drill-cpu-<stamp>.json (every sample) and .md (per role, median over drills).
Exits 0 whatever the figures: a measurement, not a test. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt, loadavg, md_table, median

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
GAMEDAY = Path(sys.executable).with_name("gameday")
ROLES = ("app", "agent", "proxy", "gateway", "store")
"""Component roles with several processes, summed per role; the others are named alone."""


def _label(pid: int, proc: psutil.Process, roles: dict[int, str]) -> str:
    if pid in roles:
        return roles[pid]
    cmd = " ".join(proc.cmdline())
    for word, label in (("pytest", "pytest"), ("locust", "locust"), ("nats-server", "nats-server"),
                        ("gameday drill", "gameday drill (wrapper)")):
        if word in cmd:
            return label
    return cmd[:50]


def _roles(work: Path) -> dict[int, str]:
    out: dict[int, str] = {}
    for f in work.glob("reports/.gameday/federations/*/state.json"):
        try:
            state = json.loads(f.read_text())
        except (OSError, ValueError):
            continue  # being written
        for name, c in state.get("components", {}).items():
            if c.get("pid"):
                out[int(c["pid"])] = c["role"] if c["role"] in ROLES else name
        if state.get("launcher_pid"):
            out[int(state["launcher_pid"])] = "launcher"
    return out


def one_drill(seed: int, work: Path, topology: Path | None) -> dict[str, Any]:
    """One drill, its processes' CPU by label."""
    work.mkdir(parents=True, exist_ok=True)
    args = [str(GAMEDAY), "drill", "--seed", str(seed)] + (["--topology", str(topology)] if topology else [])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with (work / "out.txt").open("w") as out:
        root = subprocess.Popen(args, cwd=work, stdout=out, stderr=subprocess.STDOUT)
    last: dict[int, float] = {}
    labels: dict[int, str] = {}
    top = psutil.Process(root.pid)
    deadline = time.monotonic() + 300
    while root.poll() is None and time.monotonic() < deadline:
        roles = _roles(work)
        try:
            procs = [top, *top.children(recursive=True)]
        except psutil.Error:
            procs = []
        for p in procs:
            try:
                t = p.cpu_times()
                labels.setdefault(p.pid, _label(p.pid, p, roles))
                if p.pid in roles:
                    labels[p.pid] = roles[p.pid]
                last[p.pid] = t.user + t.system
            except psutil.Error:
                continue
        time.sleep(0.2)
    if root.poll() is None:
        root.kill()
    rc = root.wait()
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    by: dict[str, float] = collections.Counter()
    count: dict[str, int] = collections.Counter()
    for pid, cpu in last.items():
        by[labels[pid]] += cpu
        count[labels[pid]] += 1
    tail = (work / "out.txt").read_text().strip().splitlines()[-3:]
    return {"seed": seed, "rc": rc, "wall_s": round(wall, 2), "topology": str(topology or "clusters/local.yaml"),
            "tree_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "sampled_cpu_s": round(sum(by.values()), 2), "by_label": {k: round(v, 3) for k, v in by.items()},
            "processes": dict(count), "tail": tail}


def _render(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    sides = sorted({r["side"] for r in runs})
    labels = sorted({k for r in runs for k, v in r["by_label"].items() if k and v > 0},
                    key=lambda k: -median([r["by_label"].get(k, 0.0) for r in runs]))
    rows = []
    for k in labels:
        row: list[object] = [k]
        for side in sides:
            mine = [r for r in runs if r["side"] == side]
            row.append(fmt(median([r["by_label"].get(k, 0.0) for r in mine]), 2))
        if len(sides) == 2:
            a, b = (median([r["by_label"].get(k, 0.0) for r in runs if r["side"] == s]) for s in sides)
            row.append(fmt(a - b, 2))
        rows.append(row)
    total: list[object] = ["**whole tree (rusage)**"]
    for side in sides:
        total.append(fmt(median([r["tree_cpu_s"] for r in runs if r["side"] == side]), 2))
    if len(sides) == 2:
        a, b = (median([r["tree_cpu_s"] for r in runs if r["side"] == s]) for s in sides)
        total.append(f"{a - b:.2f} (x{a / b:.2f})" if b else "-")
    headers = ["process", *[f"{s}: CPU-s (median)" for s in sides]] + (["difference"] if len(sides) == 2 else [])
    lines = [f"# drill CPU by process: {meta['drills']} drill(s) per side", "",
             f"At {meta['commit']}; `gameday drill --seed N`; load average at start {meta['load_start']}, at end "
             f"{meta['load_end']}. CPU is user + system, each process's last reading from /proc (every 0.2 s); "
             "the whole tree's from RUSAGE_CHILDREN.", "", md_table(headers, [*rows, total]), "",
             "## every drill", "", md_table(
                 ["side", "seed", "rc", "wall s", "tree CPU-s", "sampled CPU-s", "last line"],
                 [[r["side"], r["seed"], r["rc"], r["wall_s"], r["tree_cpu_s"], r["sampled_cpu_s"],
                   (r["tail"][-1] if r["tail"] else "").replace("|", "/")[:90]] for r in runs]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drills", type=int, default=2, help="drills per side (default 2)")
    p.add_argument("--compare-state", action="store_true", help="also the default topology without `state`")
    a = p.parse_args(argv)
    if a.drills < 1:
        p.error("--drills must be >= 1")
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=REPO,
                            check=False).stdout.strip()
    meta: dict[str, Any] = {"commit": commit, "drills": a.drills, "load_start": loadavg()}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = RESULTS / f"drill-cpu-{stamp}"
    RESULTS.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gd-cpu-") as tmp:
        sides: list[tuple[str, Path | None]] = [("with state" if a.compare_state else "default", None)]
        if a.compare_state:
            topo = yaml.safe_load((REPO / "clusters" / "local.yaml").read_text())
            topo.pop("state", None)
            stateless = Path(tmp) / "no-state.yaml"
            stateless.write_text(yaml.safe_dump(topo))
            sides.append(("without state", stateless))
        for i in range(a.drills):
            order = sides if i % 2 == 0 else sides[::-1]  # alternate: neither side always runs first
            for side, topology in order:
                r = one_drill(i + 1, Path(tmp) / f"{side.replace(' ', '-')}-{i}", topology)
                r["side"] = side
                runs.append(r)
                print(f"{side} drill {i + 1}: rc {r['rc']}, {r['wall_s']} s wall, {r['tree_cpu_s']} CPU-s", flush=True)
    meta["load_end"] = loadavg()
    base.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=2))
    base.with_suffix(".md").write_text(_render(runs, meta))
    print(base.with_suffix(".md").read_text())
    os.sync()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
