"""What the state layer costs (issue 27): bring-up wall and CPU, and a drill's CPU, with and without it.

Issue 27's budget: bring-up of the default federation grows by at most 1 s of wall time on an
idle machine, a drill's CPU time by at most 15 %. Both sides run side by side in one run, in
alternating rounds (with, without, then without, with, ...), on ``clusters/local.yaml`` as
loaded by :func:`gameday.model.topology.load_topology` (**with** state) and the same topology
with ``state`` removed (``with_overrides(state=None)``, **without**: no store nodes, no writer,
the state verdicts n/a). Per round and side:

- **bring-up**: ``with LocalFederation.from_topology(topology, tmpdir) as fed:``, timed from
  before ``start()`` to ready (every entry node at the control plane's version and routing
  every region, the GSLB answering). Its CPU, read right after ready and before ``stop()``:
  utime + stime (+ cutime + cstime, the children they reaped) from ``/proc/<pid>/stat`` of the
  launcher, every component (``fed.components[...].pid``: nats, the store nodes, the Python
  components) and every descendant of theirs, each process once. ``rusage(RUSAGE_CHILDREN)``
  would miss all of it: those processes are still running. Also recorded: the store nodes'
  share, and this process's own CPU over the bring-up (the harness side: spawning, readiness
  polls).
- **drill** (``--drill``, on by default): ``python -m pytest suites/gameday/test_gateway_outage.py
  -q -p no:cacheprovider --gameday-topology <yaml>`` (both topologies written to temporary YAML
  files from the models, so that only ``state`` differs; the same ``--gameday-seed`` on both
  sides of a round, so both drill the same region), under ``getrusage(RUSAGE_CHILDREN)`` deltas
  around ``subprocess.run``. The whole tree counts: this process makes itself a child subreaper
  (``PR_SET_CHILD_SUBREAPER``), so a descendant the drill did not reap itself is re-parented here
  and reaped (and counted) before the second reading; zombies left by the bring-up part are
  reaped before the first. Plus wall time, the exit code and pytest's summary line.

Figures are medians over rounds; the comparison (with - without, with / without) is taken per
round and its median reported. The load average is recorded at the start and end of the run
and around every sample: the budget speaks of an idle machine, and on a loaded one the absolute
numbers stretch (trust the per-round differences and ratios more).

    .venv/bin/python bench/state_layer_cost.py                  # 5 rounds, drills included (~6 min)
    .venv/bin/python bench/state_layer_cost.py --rounds 3 --drill-rounds 2
    .venv/bin/python bench/state_layer_cost.py --no-drill         # bring-up only (~1 min)

Writes bench/results/state-layer-cost-<stamp>.json (every sample) and .md (the tables) and prints
the Markdown. Exits 0 whatever the figures (a measurement, not a test); 1 if a bring-up failed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import json
import os
import platform
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, fmt, loadavg, md_table, median, workdir

from gameday.model.topology import Topology, load_topology
from gameday.targets.local.federation import LocalFederation

RESULTS = REPO / "bench" / "results"
DRILL_TEST = "suites/gameday/test_gateway_outage.py"
WALL_BUDGET_S = 1.0
"""Issue 27: bring-up grows by at most 1 s of wall time."""
CPU_BUDGET = 0.15
"""Issue 27: a drill's CPU time grows by at most 15 %."""
SIDES = ("with", "without")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PR_SET_CHILD_SUBREAPER = 36


# -- CPU of a running process tree (/proc) ----------------------------------------------------------
def _stat(pid: int) -> tuple[int, float] | None:
    """(ppid, CPU s: utime + stime + cutime + cstime) of *pid*, None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    f = raw[raw.rindex(")") + 2:].split()  # f[0] is field 3 (state): field n is f[n - 3]
    return int(f[1]), sum(int(x) for x in f[11:15]) / CLK_TCK


def _all_procs() -> dict[int, tuple[int, float]]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                out[int(entry)] = st
    return out


def tree_cpu(fed: LocalFederation) -> dict[str, Any]:
    """CPU seconds so far of the federation's processes: the launcher, every component and all
    their descendants, each process counted once; per component (its subtree) and in all."""
    procs = _all_procs()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)

    def subtree(root: int) -> set[int]:
        seen, todo = set(), [root]
        while todo:
            p = todo.pop()
            if p in procs and p not in seen:
                seen.add(p)
                todo += kids.get(p, [])
        return seen

    per: dict[str, float] = {}
    counted: set[int] = set()
    for name, c in fed.components.items():
        if c.pid is None:
            continue
        pids = subtree(c.pid) - counted
        counted |= pids
        per[name] = sum(procs[p][1] for p in pids)
    if fed.launcher_pid is not None:  # the launcher itself and anything of its not counted above
        pids = subtree(fed.launcher_pid) - counted
        counted |= pids
        per["launcher"] = sum(procs[p][1] for p in pids)
    return {"total_s": round(sum(per.values()), 3),
            "store_s": round(sum(v for n, v in per.items() if n.startswith("store-")), 3),
            "processes": len(counted), "per_component_s": {n: round(v, 3) for n, v in per.items()}}


def bringup(topology: Topology, label: str) -> dict[str, Any]:
    """One bring-up of *topology*: wall time from before start() to ready and the tree's CPU then."""
    wd = workdir(f"statecost-{label}")
    out: dict[str, Any] = {"load_before": loadavg()}
    fed = LocalFederation.from_topology(topology, wd)
    ok = False
    try:
        cpu0 = time.process_time()
        t0 = time.monotonic()
        with fed:
            out["wall_s"] = round(time.monotonic() - t0, 3)
            out["harness_cpu_s"] = round(time.process_time() - cpu0, 3)
            out["tree_cpu"] = tree_cpu(fed)
        ok = True
    except Exception as exc:  # noqa: BLE001  (recorded; the run goes on)
        out["error"] = f"{type(exc).__name__}: {exc}"[:800]
        traceback.print_exc()
    finally:
        if ok:  # a failed one keeps its logs
            shutil.rmtree(wd, ignore_errors=True)
        else:
            out["workdir"] = str(wd)
    out["load_after"] = loadavg()
    return out


# -- a drill's CPU (rusage of waited-for children) -----------------------------------------------
def become_subreaper() -> bool:
    """Make orphaned descendants our children, so that their CPU reaches RUSAGE_CHILDREN."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def reap(wait_s: float) -> int:
    """Reap every child that has exited; wait up to *wait_s* for the rest. Returns how many."""
    n, deadline = 0, time.monotonic() + wait_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return n  # no child left
        if pid:
            n += 1
            continue
        if time.monotonic() > deadline:
            return n
        time.sleep(0.05)


def _cpu(ru: resource.struct_rusage) -> float:
    return ru.ru_utime + ru.ru_stime


def drill(topology_file: Path, seed: int, tmp: Path, label: str) -> dict[str, Any]:
    """One headline drill in its own pytest process; the CPU of its whole process tree."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"drill-{label}-", dir=tmp))
    out: dict[str, Any] = {"seed": seed, "load_before": loadavg()}
    out["stale_reaped"] = reap(0.0)  # zombies of the bring-up part must not count here
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", DRILL_TEST, "-q", "-p", "no:cacheprovider",
             f"--gameday-topology={topology_file}", f"--gameday-seed={seed}",
             f"--gameday-reports={run_dir / 'reports'}", f"--basetemp={run_dir / 'tmp'}"],
            cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
        out["wall_s"] = round(time.monotonic() - t0, 2)
        out["rc"] = proc.returncode
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        out["summary"] = lines[-1][:200] if lines else ""
        if proc.returncode != 0:
            out["tail"] = (proc.stdout + proc.stderr)[-1500:]
    except subprocess.TimeoutExpired:
        out["wall_s"], out["rc"], out["summary"] = round(time.monotonic() - t0, 2), None, "timeout"
    out["orphans_reaped"] = reap(20.0)  # descendants it left to us (we are their subreaper)
    out["cpu_s"] = round(_cpu(resource.getrusage(resource.RUSAGE_CHILDREN)) - _cpu(ru0), 3)
    out["load_after"] = loadavg()
    m = re.search(r"(\d+) passed", out.get("summary", ""))
    out["passed"] = bool(m) and out.get("rc") == 0
    acked = []
    for f in sorted((run_dir / "reports").glob("runs/*/drills/*/figures-*.json")):
        with contextlib.suppress(ValueError, OSError, AttributeError):
            st = json.loads(f.read_text()).get("state") or {}
            acked.append((st.get("writes") or {}).get("ack"))
    out["state_acked"] = acked[0] if acked else None
    shutil.rmtree(run_dir, ignore_errors=True)
    return out


# -- the report --------------------------------------------------------------------------------------
def _paired(rounds: list[dict[str, Any]], part: str, key: Any) -> tuple[list[float], list[float]]:
    """Per-round (with - without, with / without) of key(sample) where both sides have it."""
    diffs, ratios = [], []
    for r in rounds:
        a, b = r.get(part, {}).get("with"), r.get(part, {}).get("without")
        if not a or not b:
            continue
        va, vb = key(a), key(b)
        if va is None or vb is None:
            continue
        diffs.append(va - vb)
        if vb:
            ratios.append(va / vb)
    return diffs, ratios


def _side(rounds: list[dict[str, Any]], part: str, side: str, key: Any) -> list[float]:
    vals = []
    for r in rounds:
        s = r.get(part, {}).get(side)
        if s:
            v = key(s)
            if v is not None:
                vals.append(v)
    return vals


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def wall(s: dict[str, Any]) -> float | None:
        return s.get("wall_s") if "error" not in s else None

    def tcpu(s: dict[str, Any]) -> float | None:
        return s["tree_cpu"]["total_s"] if "tree_cpu" in s else None

    def hcpu(s: dict[str, Any]) -> float | None:
        return s.get("harness_cpu_s")

    def dcpu(s: dict[str, Any]) -> float | None:
        return s.get("cpu_s") if s.get("passed") else None

    def dwall(s: dict[str, Any]) -> float | None:
        return s.get("wall_s") if s.get("passed") else None

    out: dict[str, Any] = {}
    for name, part, key in (("bringup_wall_s", "bringup", wall), ("bringup_tree_cpu_s", "bringup", tcpu),
                            ("bringup_harness_cpu_s", "bringup", hcpu), ("drill_cpu_s", "drill", dcpu),
                            ("drill_wall_s", "drill", dwall)):
        d, q = _paired(rounds, part, key)
        out[name] = {"with": median(_side(rounds, part, "with", key)),
                     "without": median(_side(rounds, part, "without", key)),
                     "diff": median(d), "ratio": median(q), "pairs": len(d),
                     "diffs": [round(x, 3) for x in d], "ratios": [round(x, 4) for x in q]}
    store = _side(rounds, "bringup", "with", lambda s: s["tree_cpu"]["store_s"] if "tree_cpu" in s else None)
    out["bringup_store_cpu_s"] = median(store)
    w, c = out["bringup_wall_s"], out["drill_cpu_s"]
    out["wall_budget"] = None if w["pairs"] == 0 else w["diff"] <= WALL_BUDGET_S
    out["cpu_budget"] = None if c["pairs"] == 0 else c["ratio"] - 1 <= CPU_BUDGET
    return out


def _verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("PASS" if ok else "FAIL")


def render(meta: dict[str, Any], rounds: list[dict[str, Any]], s: dict[str, Any]) -> str:
    bw, bc, bh = s["bringup_wall_s"], s["bringup_tree_cpu_s"], s["bringup_harness_cpu_s"]
    dc, dw = s["drill_cpu_s"], s["drill_wall_s"]
    lines = [f"# state layer cost (issue 27): {meta['rounds']} rounds, with vs without `state:`", "",
             f"- when: {meta['when']}  commit: {meta['commit']}  host: {meta['host']}  cpus: {meta['cpus']}  "
             f"python: {meta['python']}  total: {meta['seconds']} s",
             f"- load average (1/5/15 min) at start {meta['load_start']}, at end {meta['load_end']}"
             + ("  (**not an idle machine**: read absolute figures as 'under that load')"
                if max(meta["load_start"][0], meta["load_end"][0]) > 0.5 * (meta["cpus"] or 1) else ""),
             f"- topology: `clusters/local.yaml` (with) and the same with `state` removed (without); "
             f"order alternates per round; drills: {meta['drill_rounds']} round(s), `{DRILL_TEST}`, the same seed "
             f"on both sides of a round; subreaper: {meta['subreaper']}",
             "- uncommitted changes under gameday/, suites/, clusters/ (measured as they were): "
             + (", ".join(f"`{x.strip()}`" for x in meta.get("uncommitted", [])) or "none"), ""]
    lines += ["## against the budget", "", md_table(
        ["figure", "with state", "without", "with - without (median per round)", "with / without", "budget",
         "verdict"],
        [["bring-up wall s (start() to ready)", fmt(bw["with"], 2), fmt(bw["without"], 2), fmt(bw["diff"], 2),
          fmt(bw["ratio"], 3), f"<= +{WALL_BUDGET_S:.0f} s", _verdict(s["wall_budget"])],
         ["drill CPU s (whole process tree)", fmt(dc["with"], 1), fmt(dc["without"], 1), fmt(dc["diff"], 1),
          fmt(dc["ratio"], 3), f"<= x{1 + CPU_BUDGET:.2f}", _verdict(s["cpu_budget"])]]), ""]
    lines += ["## the rest", "", md_table(
        ["figure", "with state", "without", "with - without", "with / without"],
        [["bring-up CPU s, federation tree (at ready)", fmt(bc["with"], 2), fmt(bc["without"], 2),
          fmt(bc["diff"], 2), fmt(bc["ratio"], 3)],
         ["... of it the store nodes", fmt(s["bringup_store_cpu_s"], 2), "-", "-", "-"],
         ["bring-up CPU s, this process (harness side)", fmt(bh["with"], 2), fmt(bh["without"], 2),
          fmt(bh["diff"], 2), fmt(bh["ratio"], 3)],
         ["drill wall s", fmt(dw["with"], 1), fmt(dw["without"], 1), fmt(dw["diff"], 1), fmt(dw["ratio"], 3)]]),
        ""]
    rows = []
    for r in rounds:
        for side in r["order"]:
            b = r["bringup"].get(side, {})
            d = r.get("drill", {}).get(side)
            tc = b.get("tree_cpu", {})
            rows.append([r["round"], side, fmt(b.get("wall_s"), 2), fmt(tc.get("total_s"), 2),
                         fmt(tc.get("store_s"), 2), tc.get("processes", "-"), fmt(b.get("harness_cpu_s"), 2),
                         f"{b.get('load_before', ('-',))[0]}", b.get("error", "")[:80] or "-",
                         fmt(d.get("wall_s"), 1) if d else "-", fmt(d.get("cpu_s"), 1) if d else "-",
                         (d.get("summary", "")[:60] + f" (rc {d.get('rc')})") if d else "-",
                         d.get("state_acked", "-") if d else "-", d.get("orphans_reaped", "-") if d else "-",
                         f"{d['load_before'][0]}" if d else "-"])
    lines += ["## every sample", "", md_table(
        ["round", "side", "bring-up wall s", "tree CPU s", "store CPU s", "procs", "harness CPU s", "load",
         "error", "drill wall s", "drill CPU s", "drill outcome", "acked writes", "orphans reaped", "drill load"],
        rows), ""]
    lines += ["Bring-up CPU is utime + stime (+ reaped children's) of the launcher, every component and "
              "their descendants from /proc, read at ready before stop(); drill CPU is the "
              "RUSAGE_CHILDREN delta around the pytest process (its whole tree: this process is the "
              "subreaper, orphans are reaped before the second reading). Only passed drills count in the "
              "drill figures. This compares the current code with and without a `state:` section, not "
              "with the commit before e7a9487: code the state layer added that runs either way (e.g. "
              "imports) is in both columns.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="bring-up rounds, each side once per round (default 5)")
    p.add_argument("--drill", action=argparse.BooleanOptionalAction, default=True,
                   help="also measure one headline drill per side and round (default: on; ~25 s a drill)")
    p.add_argument("--drill-rounds", type=int, default=None,
                   help="drill in the first N rounds only (default: every round)")
    p.add_argument("--out", type=Path, default=RESULTS, help="results directory (default: bench/results)")
    a = p.parse_args(argv)
    if a.rounds < 1:
        p.error("--rounds must be >= 1")
    drill_rounds = 0 if not a.drill else min(a.rounds, a.rounds if a.drill_rounds is None else a.drill_rounds)

    with_state = load_topology()
    if with_state.state is None:
        p.error("clusters/local.yaml declares no state: nothing to compare")
    topos = {"with": with_state, "without": with_state.with_overrides(state=None)}
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=REPO,
                            check=False).stdout.strip()
    # Uncommitted edits to the code under test (a shared working tree): the figures are of these.
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "gameday", "suites", "clusters"],
                           capture_output=True, text=True, cwd=REPO, check=False).stdout.splitlines()
    meta: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "commit": commit or "?", "host": platform.node(),
        "cpus": os.cpu_count(), "python": platform.python_version(), "rounds": a.rounds,
        "drill_rounds": drill_rounds, "load_start": loadavg(), "uncommitted": dirty,
        "subreaper": become_subreaper() if drill_rounds else None,
        "budget": {"bringup_wall_s": WALL_BUDGET_S, "drill_cpu_fraction": CPU_BUDGET},
    }
    print(f"state layer cost: {a.rounds} rounds ({drill_rounds} with drills), {meta['cpus']} cpus, "
          f"load average {meta['load_start']}", flush=True)
    t_start = time.monotonic()
    rounds: list[dict[str, Any]] = []
    seed0 = random.SystemRandom().randrange(1, 2**30)
    with tempfile.TemporaryDirectory(prefix="gdbench-statecost-") as tmp_s:
        tmp = Path(tmp_s)
        files = {}
        for side, topo in topos.items():
            files[side] = tmp / f"topology-{side}.yaml"
            files[side].write_text(yaml.safe_dump(topo.model_dump(mode="json"), sort_keys=False))
        for i in range(1, a.rounds + 1):
            order = SIDES if i % 2 else SIDES[::-1]
            r: dict[str, Any] = {"round": i, "order": list(order), "bringup": {}}
            for side in order:
                r["bringup"][side] = b = bringup(topos[side], side)
                print(f"round {i} bring-up {side:7s}: wall {fmt(b.get('wall_s'), 2)} s, tree CPU "
                      f"{fmt(b.get('tree_cpu', {}).get('total_s'), 2)} s (store "
                      f"{fmt(b.get('tree_cpu', {}).get('store_s'), 2)}), harness CPU "
                      f"{fmt(b.get('harness_cpu_s'), 2)} s, load {b['load_before'][0]}"
                      + (f"  ERROR {b['error']}" if "error" in b else ""), flush=True)
            if i <= drill_rounds:
                r["drill"] = {}
                for side in order:
                    r["drill"][side] = d = drill(files[side], seed0 + i, tmp, side)
                    print(f"round {i} drill    {side:7s}: wall {fmt(d.get('wall_s'), 1)} s, CPU "
                          f"{fmt(d.get('cpu_s'), 1)} s, {d.get('summary')!r} (rc {d.get('rc')}), acked writes "
                          f"{d.get('state_acked')}, orphans reaped {d.get('orphans_reaped')}, load "
                          f"{d['load_before'][0]}", flush=True)
            rounds.append(r)
    meta["seconds"] = round(time.monotonic() - t_start, 1)
    meta["load_end"] = loadavg()
    s = summarise(rounds)
    a.out.mkdir(parents=True, exist_ok=True)
    base = a.out / f"state-layer-cost-{time.strftime('%Y%m%d-%H%M%S')}"
    base.with_suffix(".json").write_text(json.dumps({"meta": meta, "summary": s, "rounds": rounds}, indent=1,
                                                    default=str) + "\n")
    md = render(meta, rounds, s)
    base.with_suffix(".md").write_text(md)
    print(md)
    print(f"results: {base}.md (and .json)")
    return 1 if any("error" in b for r in rounds for b in r["bringup"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
