"""The kill matrix (issue 28 item 3): every defect of the reference federation against the
conformance suite and the headline drill, one run each, and a matrix defect x verdict.

Each row is one federation: the healthy one first (every verdict must pass there: a verdict
that fails on it is noisy, not a control), then one per defect, each a deliberate
misconfiguration of ``clusters/local.yaml`` that should break exactly the behaviour a rule or
verdict describes. A cell is

- ``KILLED``   the verdict failed against that defect, and the defect is meant to kill it;
- ``killed!``  it failed, but the defect is not meant to kill it (a noisy control);
- ``survived`` it passed, though the defect is meant to kill it (a dead control);
- ``pass``     it passed and was not meant to fail;
- ``n/a``      skipped or not applicable (the reason is in the JSON);
- ``?``        inconclusive (a starved harness) or not run.

Goal: every verdict killed by at least one defect; every defect killing only what it is
meant to. The conformance verdicts are the suite's tests (by rule), the drill's are the
headline drill's verdicts (its figures file)::

    .venv/bin/python bench/kill_matrix.py                      # every defect (~25-40 min on 2 cores)
    .venv/bin/python bench/kill_matrix.py --only r12,r2-fall   # some rows (the healthy row always runs)

Writes bench/results/kill-matrix-<stamp>.json and .md. Exits 0 whatever the cells say (a
measurement); it prints the dead and noisy controls it found.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.negative.conftest import merge_changes, seed_picking  # noqa: E402  (the negative controls' own)
from tests.negative.test_prediction_controls import CACHING_LOCUSTFILE  # noqa: E402

RESULTS = REPO / "bench" / "results"
SUITES = REPO / "suites"
HEADLINE = "gameday/test_gateway_outage.py"
ALL = ["a", "b", "c"]
STORE_DOWN = "gameday/test_store_down.py"
CP_DOWN = "gameday/test_control_plane_down.py"
ASYNC = {"replication": "async", "max_lag": 0.5}

HEADLINE_ID = "test_gateway_outage.py::test_random_gateway_outage"
TTL_1 = {"timing": {"dns_ttl": 1, "stale_after": 1.5}}
"""A 1 s TTL (and a stale alarm that can fail inside a 2 s limit): a drill judged against a 2 s
switchover limit is not refused up front (clients can move within it)."""


def _seed(region: str) -> str:
    """The headline drill takes *region* out (as the negative controls pick it)."""
    return f"--gameday-seed={seed_picking(region, HEADLINE_ID)}"


# name -> (topology changes, the suite files it runs, the verdicts it is meant to kill, pytest options)
DEFECTS: dict[str, tuple[Any, ...]] = {
    "r1-proxy-needs-sync": ({"defects": {"proxy_needs_sync": ALL}}, ["conformance/test_r01_decoupling.py"], {"R1"}),
    # stale_after 2: a 5 s observation, below the stop condition's 5 s of errors (it aborts the drill)
    "r1-gateway-needs-sync": ({"defects": {"gateway_needs_sync": ALL}, "timing": {"stale_after": 2}}, [CP_DOWN],
                              {"error_ratio"}),
    "r2-fall-1": ({"timing": {"fall": 1}}, ["conformance/test_r02_health_thresholds.py", "gameday/test_flapping.py"],
                  {"R2", "route_changes"}),
    "r2-rise-1": ({"timing": {"rise": 1}}, ["conformance/test_r02_health_thresholds.py"], {"R2"}),
    "r3-fast-reconcile": ({"defects": {"reconcile_every": 0.5}}, ["conformance/test_r03_slow_state.py"], {"R3"}),
    "r3-never-reconciles": ({"timing": {"reconcile_interval": 4}, "defects": {"reconcile_every": 3600}},
                            ["conformance/test_r03_slow_state.py"], {"R3"}),
    "r3-auto-merge": ({"defects": {"slow_auto_merge": True}}, ["conformance/test_r03_slow_state.py"], {"R3"}),
    "r4-full-pulls": ({"defects": {"proxy_full_pulls": ALL}}, ["conformance/test_r04_incremental.py"], {"R4"}),
    "r5-ephemeral-cp": ({"control_plane": {"state": "ephemeral"}, "timing": {"stale_after": 3}},
                        ["conformance/test_r05_versions.py", CP_DOWN], {"R5", "versions"}),
    "r6-no-stale-alarm": ({"defects": {"proxy_no_stale_alarm": ALL}}, ["conformance/test_r06_stale_alarm.py", CP_DOWN],
                          {"R6", "stale_alarms"}),
    "r7-no-fallback": ({"defects": {"gateway_no_fallback": ALL}}, ["conformance/test_r07_fallback_retry.py"], {"R7"}),
    "r8-ignore-weights": ({"defects": {"gslb_ignore_weights": True}}, ["conformance/test_r08_dns_weights.py"], {"R8"}),
    "r10-no-ramp": ({"defects": {"gslb_no_ramp": True}}, ["conformance/test_r10_ramp.py", "gameday/test_recovery.py"],
                    {"R10", "readmission"}),
    "r11-livez-follows-readyz": ({"defects": {"livez_follows_readyz": ALL}},
                                 ["conformance/test_r11_workload_hygiene.py"], {"R11"}),
    "r12-all-at-once": ({"defects": {"release_all_at_once": True}}, ["conformance/test_r12_release.py"], {"R12"}),
    "r13-slow-consumer": ({"defects": {"cp_event_delay": 1.5}}, ["conformance/test_r13_sync_metrics.py"], {"R13"}),
    "r9-under-provisioned": ({"regions": [
        {"name": "a", "weight": 50, "fallback": "b", "instances": 2, "capacity_rps": 40},
        {"name": "b", "weight": 30, "fallback": "a", "instances": 2, "capacity_rps": 15},
        {"name": "c", "weight": 20, "fallback": "a", "instances": 2, "capacity_rps": 15}]},
        ["conformance/test_r09_capacity.py", HEADLINE], {"R9", "headroom"}, [_seed("c")]),
    "stale-proxy": ({"defects": {"proxy_never_refresh": ["b"]}, "timing": {"stale_after": 3}}, [HEADLINE],
                    {"stale_alarms"}, [_seed("b"), "--gameday-recovery-window=8"]),
    "slow-sync": ({"control_plane": {"broadcast_delay": 4}, **TTL_1}, [HEADLINE], {"switchover"},
                  ["--gameday-switchover-limit=2"]),
    "gslb-answer-lag": ({"defects": {"gslb_answer_lag": 4.0}, **TTL_1}, [HEADLINE],
                        {"dns_convergence", "dns_convergence_vs_prediction"}, ["--gameday-switchover-limit=2"]),
    # The state layer (DESIGN.md section 9): a store, a queue, a fence, a read path, a failover
    # broken each; the async rows state max lag 0.5 s (the store controller's mode).
    "store-unreplicated": ({"defects": {"store_unreplicated": True}}, [STORE_DOWN], {"data_loss"}),
    "queue-per-region": ({"defects": {"consumers_per_region": True}}, [STORE_DOWN], {"duplicates"}),
    "async-stall": ({"state": ASYNC}, ["gameday/test_replication_stall.py"], {"data_loss_vs_prediction"}),
    "unfenced-old-primary": ({"state": ASYNC, "defects": {"unfenced_old_primary": True}},
                             ["gameday/test_store_isolated.py"], {"fencing"}),
    "reads-local-replica": ({"state": ASYNC, "defects": {"reads_from_local_replica": True}},
                            ["gameday/test_read_your_writes.py"], {"stale_reads"}),
    "slow-promotion": ({"state": ASYNC, "defects": {"slow_promotion": 6.0}}, [STORE_DOWN],
                       {"write_recovery_vs_prediction"}),
    "slow-promotion-limit": ({"state": ASYNC, "defects": {"slow_promotion": 6.0}, "timing": {"stale_after": 3}},
                             [STORE_DOWN], {"write_recovery"}, ["--gameday-switchover-limit=4"]),
    # clients caching every answer for 10 x the TTL (the caching-clients control's locustfile),
    # against a 4 s limit: the headline drill stops at client recovery
    "caching-clients-limit": ({"timing": {"dns_ttl": 1, "probe_timeout": 0.5, "stale_after": 3}}, [HEADLINE],
                              {"client_recovery"},
                              [_seed("a"), "--gameday-switchover-limit=4", "--gameday-locustfile={caching}",
                               "--gameday-stop-error-ratio=0.95", "--gameday-utilisation-limit=0.95"]),
    # the same clients under the default 180 s limit: recovery passes it and fails its prediction
    "caching-clients": ({"timing": {"dns_ttl": 1, "probe_timeout": 0.5, "stale_after": 3}}, [HEADLINE],
                        {"client_recovery_vs_prediction"},
                        [_seed("a"), "--gameday-locustfile={caching}", "--gameday-stop-error-ratio=0.95",
                         "--gameday-utilisation-limit=0.95", "--gameday-recovery-window=3"]),
    "slow-probes-x5": ({"timing": {"dns_ttl": 1, "probe_timeout": 0.5}, "defects": {"probe_interval_factor": 5.0}},
                       [HEADLINE], {"dns_convergence_vs_prediction", "switchover_vs_prediction"}),
}
RULE_FILES = sorted(p.relative_to(SUITES).as_posix() for p in (SUITES / "conformance").glob("test_r*.py"))


def _rule(nodeid: str) -> str:
    """``test_r02_health_thresholds.py::...`` -> ``R2``."""
    name = nodeid.split("::", maxsplit=1)[0].rsplit("/", 1)[-1]
    rule = re.match(r"test_r(\d+)_", name)  # (test_read_your_writes.py is no rule's)
    return f"R{int(rule.group(1))}" if rule else name


def run_row(changes: dict[str, Any], files: list[str], workdir: Path, args: tuple[str, ...] = ()) -> dict[str, str]:
    """Run *files* against clusters/local.yaml + *changes*; verdict -> pass | fail | n/a | ?."""
    workdir.mkdir(parents=True)
    (workdir / "pytest.ini").write_text("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")
    for rel in files:
        shutil.copy(SUITES / rel, workdir / Path(rel).name)
    topo = yaml.safe_load((REPO / "clusters" / "local.yaml").read_text())
    merge_changes(topo, changes)
    (workdir / "topology.yaml").write_text(yaml.safe_dump(topo))
    subprocess.run([sys.executable, "-m", "pytest", "--gameday-topology=topology.yaml", "--junitxml=junit.xml",
                    "--gameday-recovery-window=3", *args, "-q"], cwd=workdir, capture_output=True, timeout=1800,
                   check=False)
    cells: dict[str, str] = {}
    junit = workdir / "junit.xml"
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            rule = _rule(f"{case.get('file') or case.get('classname', '').replace('.', '/')}::{case.get('name')}")
            if not rule.startswith("R"):
                continue
            outcome = "fail" if case.find("failure") is not None or case.find("error") is not None else \
                "n/a" if case.find("skipped") is not None else "pass"
            # inconclusive: the failure is a HarnessStarved (its message says so; the traceback
            # may quote a test's own `raise HarnessStarved` line on any failure)
            failed = case.find("failure") if case.find("failure") is not None else case.find("error")
            if outcome == "fail" and failed is not None and "HarnessStarved" in (failed.get("message") or ""):
                outcome = "?"
            worst = {"fail": 3, "?": 2, "pass": 1, "n/a": 0}
            if worst[outcome] > worst.get(cells.get(rule, "n/a"), 0):
                cells[rule] = outcome
    for figures in workdir.glob("reports/runs/*/drills/*/figures-*.json"):
        for v in json.loads(figures.read_text()).get("verdicts", []):
            outcome = {"pass": "pass", "fail": "fail", "n/a": "n/a"}.get(v["outcome"], "?")
            cells[v["name"]] = outcome if v["name"] not in cells else max(cells[v["name"]], outcome,
                                                                         key=["n/a", "pass", "?", "fail"].index)
    return cells


def cell(outcome: str | None, meant: bool) -> str:
    if outcome == "fail":
        return "KILLED" if meant else "killed!"
    if outcome == "pass":
        return "survived" if meant else "pass"
    return outcome or "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated defect names (the healthy row always runs)")
    a = ap.parse_args()
    chosen = [d for d in DEFECTS if not a.only or d in a.only.split(",")]
    rows: dict[str, dict[str, str]] = {}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gd-kill-matrix-") as tmp:
        caching = Path(tmp) / "caching_locustfile.py"
        caching.write_text(CACHING_LOCUSTFILE)
        files = sorted({*RULE_FILES, *(f for d in chosen for f in DEFECTS[d][1])})
        print(f"healthy: {len(files)} files", flush=True)
        rows["healthy"] = run_row({}, files, Path(tmp) / "healthy")
        for name in chosen:
            changes, files_, _, *opts = DEFECTS[name]
            started = time.monotonic()
            args = tuple(o.format(caching=caching) for o in opts[0]) if opts else ()
            rows[name] = run_row(changes, files_, Path(tmp) / name, args)
            print(f"{name}: {rows[name]} ({time.monotonic() - started:.0f} s)", flush=True)
    verdicts = sorted({v for r in rows.values() for v in r}, key=lambda v: (not v.startswith("R"),
                                                                           int(v[1:]) if v[1:].isdigit() else 0, v))
    header = "| defect | " + " | ".join(verdicts) + " |"
    lines = [header, "|" + "---|" * (len(verdicts) + 1)]
    dead, noisy = [], []
    for name, cells in rows.items():
        meant = DEFECTS[name][2] if name in DEFECTS else set()
        shown = [cell(cells.get(v), v in meant) if v in cells else "" for v in verdicts]
        lines.append(f"| {name} | " + " | ".join(shown) + " |")
        dead += [f"{name}: {v} survived" for v in meant if cells.get(v) == "pass"]
        noisy += [f"{name}: {v} killed" for v, o in cells.items() if o == "fail" and v not in meant]
    never = [v for v in verdicts if not any(rows[d].get(v) == "fail" and v in DEFECTS[d][2] for d in chosen)]
    summary = [f"rows: {len(rows)} (healthy + {len(chosen)} defects), {time.monotonic() - t0:.0f} s",
               f"dead controls (a defect its verdict survived): {dead or 'none'}",
               f"noisy (a verdict killed by a defect not meant for it, or failing on the healthy row): "
               f"{noisy or 'none'}",
               f"verdicts no defect of this run killed: {never or 'none'}"]
    text = "\n".join(lines) + "\n\n" + "\n".join(f"- {s}" for s in summary) + "\n"
    print("\n" + text)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"kill-matrix-{stamp}.json").write_text(json.dumps(rows, indent=2))
    (RESULTS / f"kill-matrix-{stamp}.md").write_text(f"# Kill matrix {stamp}\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
