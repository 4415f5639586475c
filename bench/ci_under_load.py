"""The fresh-clone CI loop with and without a competing CPU load.

Each run clones this repository (``git clone`` of the checkout, ``--ref``: by default the
current HEAD commit) into a fresh temporary directory and runs the CI command there
(``bash .ci/run``: CI=true, stdin from /dev/null, output to a log), bounded by ``--timeout``
(the whole process group is killed). Runs are sequential. A ``loaded`` run also starts a
competing CPU hog for the whole run: one ``python -c`` busy loop keeping ONE core busy,
exiting by itself after the timeout at the latest and killed when the run ends; its CPU
seconds are recorded to show the load was real. ``quiet`` runs have no hog.

Per run: the wall time, the exit code, the counts of both JUnit files
(``reports/junit-tests.xml``, ``reports/junit-suites.xml``), the failed testcases with the
first line of their message, reruns, inconclusive (HarnessStarved) testcases, the two pytest
summary lines with their times, the observers' achieved rates from every ``gameday_harness``
JUnit property (starved drills; observer and dns achieved/nominal min and median, longest
gap), the mean CPU pressure (/proc/pressure/cpu "some") and the 1-min load average (every 10 s).

    .venv/bin/python bench/ci_under_load.py                          # quiet, then loaded (~25 min)
    .venv/bin/python bench/ci_under_load.py --runs loaded,quiet,loaded --ref HEAD~2 --keep

Writes <out>/ci-under-load-<stamp>.json (every figure) and .md (the table), each run's log as
<out>/ci-under-load-<stamp>-<n>-<run>.log, and prints the Markdown. The clone is removed
unless --keep or the run failed (its path is printed). Exits 0: a measurement, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
JUNIT = {"tests": "reports/junit-tests.xml", "suites": "reports/junit-suites.xml"}
RERUN_TAGS = ("rerun", "rerunFailure", "rerunError", "flakyFailure", "flakyError")
SUMMARY = re.compile(r"^=+ (.*\bin ([\d.]+)s\b.*?) =+$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def _cpu_pressure_us() -> int | None:
    """/proc/pressure/cpu's "some" total (microseconds some task waited for a CPU)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return int(some.rsplit("total=", 1)[1])
    return None


def _load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def children_cpu_s() -> float:
    """User + system CPU seconds of the children this process waited for, and of their reaped
    descendants (this file runs without gameday, so without bench/common.py's copy)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _proc_cpu_s(pid: int) -> float | None:
    """utime + stime of *pid* from /proc/<pid>/stat (also readable while it is a zombie)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return None


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _first_line(el: ET.Element) -> str:
    text = el.get("message") or el.text or ""
    return text.strip().splitlines()[0] if text.strip() else ""


def parse_junit(path: Path) -> dict[str, Any] | None:
    """Counts, failed testcases, reruns, inconclusive testcases and gameday_harness values."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    seconds = 0.0
    for s in suites:
        for k in counts:
            counts[k] += int(s.get(k) or 0)
        seconds += float(s.get("time") or 0)
    failed: list[dict[str, str]] = []
    reruns = inconclusive = 0
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        bad = [el for el in case if el.tag in ("failure", "error")]
        for el in bad:
            failed.append({"name": name, "kind": el.tag, "message": _first_line(el)})
        texts = " ".join(f"{el.get('message', '')} {el.text or ''}" for el in bad)
        if "HarnessStarved" in texts or "inconclusive" in texts.lower():
            inconclusive += 1
        reruns += sum(1 for el in case if el.tag in RERUN_TAGS)
    harness: list[dict[str, Any]] = []
    unparsed = 0
    for prop in root.iter("property"):
        if prop.get("name") == "gameday_harness":
            try:
                harness.append(json.loads(prop.get("value") or ""))
            except ValueError:
                unparsed += 1
    return {**counts, "seconds": round(seconds, 2), "failed": failed, "reruns_junit": reruns,
            "inconclusive": inconclusive, "harness": harness, "harness_unparsed": unparsed}


def harness_summary(values: list[dict[str, Any]]) -> dict[str, Any]:
    """Across every drill of a run: how many were starved; per source the min and median of
    achieved/nominal and the longest gap."""
    out: dict[str, Any] = {"drills": len(values), "starved": sum(1 for v in values if v.get("starved"))}
    for src in ("observer", "dns"):
        ratios, gaps = [], []
        for v in values:
            s = (v.get("sources") or {}).get(src)
            if not isinstance(s, dict):
                continue
            if s.get("nominal_hz") and s.get("achieved_hz") is not None:
                ratios.append(float(s["achieved_hz"]) / float(s["nominal_hz"]))
            if s.get("max_gap_s") is not None:
                gaps.append(float(s["max_gap_s"]))
        out[src] = {"n": len(ratios), "ratio_min": min(ratios) if ratios else None,
                    "ratio_median": statistics.median(ratios) if ratios else None,
                    "max_gap_s": max(gaps) if gaps else None}
    return out


def pytest_summaries(log: Path, junit: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, Any] | None]:
    """The final summary line ("N passed, M skipped in S s") of the tests' and the suites' pytest.

    The log may also hold inner pytest runs' summaries (a failed test's captured output): when
    a JUnit file gives its session time, the line whose time is closest to it is the one;
    without it, the next unused summary line after the previous pytest's (tests, then suites).
    """
    lines = [ANSI.sub("", ln).strip() for ln in log.read_text(errors="replace").splitlines()]
    found = [{"seconds": float(m[2]), "summary": m[1]} for ln in lines if (m := SUMMARY.match(ln))]
    chosen: dict[str, int | None] = {}
    for k, j in junit.items():
        if j is not None and j["seconds"] > 0 and found:
            gaps = [abs(float(f["seconds"]) - j["seconds"]) for f in found]
            chosen[k] = gaps.index(min(gaps))
    prev = -1
    for k in junit:
        if k not in chosen:
            used = set(chosen.values())
            chosen[k] = next((i for i in range(prev + 1, len(found)) if i not in used), None)
        if (c := chosen[k]) is not None:
            prev = c
    return {k: None if (c := chosen[k]) is None else found[c] for k in junit}


def run_once(name: str, index: int, args: argparse.Namespace, stamp: str) -> dict[str, Any]:
    clone = Path(tempfile.mkdtemp(prefix=f"gdci-{name}-")) / "gameday"
    log = args.out / f"ci-under-load-{stamp}-{index}-{name}.log"
    res: dict[str, Any] = {"run": name, "clone": str(clone), "log": str(log), "loaded": name == "loaded"}
    _git("clone", "--quiet", str(REPO), str(clone))
    _git("checkout", "--quiet", "--detach", args.ref, cwd=clone)
    res["commit"] = _git("rev-parse", "HEAD", cwd=clone)
    # The clone's own venv, not the one this script may run from.
    venv_bin = str(REPO / ".venv" / "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env["CI"] = "true"
    loads: list[float] = [_load1()]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(10):
            loads.append(_load1())

    sampler = threading.Thread(target=sample, daemon=True)
    hog: subprocess.Popen[bytes] | None = None
    proc: subprocess.Popen[bytes] | None = None
    psi0, t0, cpu0 = _cpu_pressure_us(), time.monotonic(), children_cpu_s()
    sampler.start()
    try:
        if name == "loaded":
            hog = subprocess.Popen([sys.executable, "-c", HOG.format(seconds=args.timeout)],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        with log.open("wb") as fh:
            proc = subprocess.Popen(shlex.split(args.command), cwd=clone, env=env, stdin=subprocess.DEVNULL,
                                    stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                res["exit_code"], res["timed_out"] = proc.wait(timeout=args.timeout), False
            except subprocess.TimeoutExpired:
                res["exit_code"], res["timed_out"] = None, True
    finally:
        res["wall_s"] = round(time.monotonic() - t0, 2)
        psi1 = _cpu_pressure_us()
        if proc is not None:  # the whole group: a timed-out run, or anything it left behind
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # the run's whole process tree, reaped: before the hog is (it is a child too)
        res["tree_cpu_s"] = round(children_cpu_s() - cpu0, 1)
        if hog is not None:
            res["hog_cpu_s"] = _proc_cpu_s(hog.pid)
            hog.kill()
            hog.wait()
        stop.set()
        sampler.join()
    loads.append(_load1())
    res["load1_samples"] = loads
    res["load1_min"], res["load1_max"] = min(loads), max(loads)
    res["cpu_pressure_pct"] = (round((psi1 - psi0) / 1e6 / res["wall_s"] * 100, 1)
                               if psi0 is not None and psi1 is not None and res["wall_s"] > 0 else None)
    res["junit"] = {k: parse_junit(clone / rel) for k, rel in JUNIT.items()}
    res["pytest"] = pytest_summaries(log, res["junit"])
    found = [j for j in res["junit"].values() if j is not None]
    res["failures"] = sum(j["failures"] + j["errors"] for j in found) if found else None
    res["inconclusive"] = sum(j["inconclusive"] for j in found)
    res["reruns_log"] = sum(int(n) for p in res["pytest"].values() if p
                            for n in re.findall(r"(\d+) rerun", p["summary"]))
    res["reruns"] = max(sum(j["reruns_junit"] for j in found), res["reruns_log"])
    res["harness"] = harness_summary([h for j in found for h in j["harness"]])
    res["harness_unparsed"] = sum(j["harness_unparsed"] for j in found)
    res["run_failed"] = res["timed_out"] or res["exit_code"] != 0
    if args.keep or res["run_failed"]:
        print(f"{name}: clone kept at {clone}", flush=True)
    else:
        shutil.rmtree(clone.parent, ignore_errors=True)
    return res


def _f(x: float | None, digits: int = 1, unit: str = "") -> str:
    return "-" if x is None else f"{x:.{digits}f}{unit}"


def _pytest(r: dict[str, Any], key: str) -> str:
    p = r["pytest"][key]
    return f"{p['seconds']:.0f} s: {p['summary']}" if p else "-"


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    head = ["run", "commit", "wall", "exit", "tests (pytest)", "suites (pytest)", "failures", "reruns",
            "inconclusive", "starved/drills", "observer min/med", "observer max gap", "dns min/med",
            "dns max gap", "CPU pressure", "load1 min/max", "hog CPU", "run CPU (tree)"]
    rows = []
    for r in results:
        h = r["harness"]
        obs, dns = h["observer"], h["dns"]
        rows.append([
            r["run"], r["commit"][:10], f"{r['wall_s']:.0f} s ({r['wall_s'] / 60:.1f} min)",
            "timeout" if r["timed_out"] else r["exit_code"], _pytest(r, "tests"), _pytest(r, "suites"),
            "-" if r["failures"] is None else r["failures"], r["reruns"], r["inconclusive"],
            f"{h['starved']}/{h['drills']}", f"{_f(obs['ratio_min'], 2)} / {_f(obs['ratio_median'], 2)}",
            _f(obs["max_gap_s"], 2, " s"), f"{_f(dns['ratio_min'], 2)} / {_f(dns['ratio_median'], 2)}",
            _f(dns["max_gap_s"], 2, " s"), _f(r["cpu_pressure_pct"], 1, " %"),
            f"{r['load1_min']:.2f} / {r['load1_max']:.2f}", _f(r.get("hog_cpu_s"), 1, " s"),
            _f(r.get("tree_cpu_s"), 0, " s")])
    out = [f"# CI under load ({meta['stamp']})", "",
           f"`{meta['command']}` in a fresh clone of {meta['ref']}, timeout {meta['timeout_s']:.0f} s, "
           f"{meta['cpus']} CPUs. loaded = one core kept busy by a competing process for the whole run. "
           "min/med: achieved/nominal poll rate over every drill's `gameday_harness` property. "
           "CPU pressure: /proc/pressure/cpu `some`, mean over the run.", "",
           "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    for r in results:
        counts = [f"{k}: " + ("missing" if j is None else
                              "{tests} tests, {failures} failures, {errors} errors, {skipped} skipped".format(**j))
                  for k, j in r["junit"].items()]
        out += ["", f"**{r['run']}** ({r['log']}): " + "; ".join(counts)]
        out += [f"- {f['kind']}: `{f['name']}`: {f['message']}" for j in r["junit"].values() if j
                for f in j["failed"]]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="quiet,loaded", help="comma-separated: quiet, loaded (default quiet,loaded)")
    ap.add_argument("--ref", default=None, help="the commit to clone (default: the current HEAD commit)")
    ap.add_argument("--command", default="bash .ci/run", help="run in the clone (default: bash .ci/run)")
    ap.add_argument("--timeout", type=float, default=5400.0, help="seconds per run (default 5400)")
    ap.add_argument("--keep", action="store_true", help="keep every clone")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = ap.parse_args()
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if bad := [r for r in runs if r not in ("quiet", "loaded")]:
        ap.error(f"unknown runs: {', '.join(bad)} (quiet, loaded)")
    # SIGTERM (a stopped series) as an exception, so the running CI's process group and the hog
    # are killed on the way out instead of left running.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    args.ref = _git("rev-parse", args.ref or "HEAD")  # one commit for every run
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    meta = {"stamp": stamp, "ref": args.ref, "command": args.command, "timeout_s": args.timeout,
            "runs": runs, "cpus": os.cpu_count()}
    results: list[dict[str, Any]] = []
    base = args.out / f"ci-under-load-{stamp}"
    for i, name in enumerate(runs, 1):
        print(f"[{i}/{len(runs)}] {name}: {args.command} at {args.ref[:10]}", flush=True)
        results.append(run_once(name, i, args, stamp))
        r = results[-1]
        print(f"  {r['wall_s']:.0f} s, exit {r['exit_code']}, failures {r['failures']}", flush=True)
        # Written after every run: a crash or Ctrl-C later keeps what was measured.
        base.with_suffix(".json").write_text(json.dumps({**meta, "results": results}, indent=1) + "\n")
        base.with_suffix(".md").write_text(markdown(results, meta))
    print(base.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
