"""(a) The gateway's cost: requests/s and latency through a region's gateway vs one app instance.

Driven by wrk (``apt-get install wrk``). Two load shapes, each run as alternating short
rounds (gateway, direct, direct, gateway, ...) so that machine noise hits both targets:

* ``c1``: one connection, closed loop: the latency of a single request on an idle
  path; the p50 difference is the gateway's added latency (target <= 2 ms).
* ``c16``: 16 connections: saturation throughput; the ratio of requests/s is the
  gateway's throughput cost (one extra Python hop per request).

The bench topology raises every instance's ``capacity_rps`` so no 503 distorts the figures.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from common import BenchResult, fmt, local_topology, md_table, median, running_federation

from gameday.model.topology import parse_topology

# wrk prints this JSON line from done(); latencies in microseconds.
_LUA = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"p50":%d,"p90":%d,"p99":%d,"mean":%.1f,"max":%d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, latency.max))
end
"""

SHAPES = {"c1": 1, "c16": 16}


def _wrk(url: str, connections: int, seconds: int, script: Path) -> dict[str, Any]:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "2s", "-s", str(script), url],
        capture_output=True, text=True, timeout=seconds + 30, check=True,
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("{"))
    d: dict[str, Any] = json.loads(line)
    d["rps"] = d["requests"] / (d["duration_us"] / 1e6)
    d["errors"] = d["connect"] + d["read"] + d["write"] + d["status"] + d["timeout"]
    return d


def run(quick: bool) -> BenchResult:
    res = BenchResult("gateway_cost", "(a) gateway cost: through the gateway vs direct to an app instance")
    if shutil.which("wrk") is None:
        res.error = "wrk not found: apt-get install -y wrk"
        return res
    rounds, seconds = (3, 2) if quick else (8, 2)  # wrk takes whole seconds
    base = local_topology()
    data = base.model_dump()
    for r in data["regions"]:
        r["capacity_rps"] = 1_000_000  # no 503s: we measure the hop, not the capacity model
    topo = parse_topology(data, "bench:gateway-cost")
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {s: {"gateway": [], "direct": []} for s in SHAPES}
    with tempfile.TemporaryDirectory(prefix="gdbench-wrk-") as tmp, \
            running_federation(topo, "gwcost") as (fed, _):
        script = Path(tmp) / "report.lua"
        script.write_text(_LUA)
        region = fed.spec.regions[0]
        urls = {"gateway": f"{region.gateway.url}/work", "direct": f"{region.instances[0].endpoint.url}/work"}
        res.data["urls"] = urls
        res.data["region"] = region.name
        for url in urls.values():  # warm up both paths (connections, caches)
            _wrk(url, 4, 1, script)
        for i in range(rounds):
            for shape, conns in SHAPES.items():
                order = ["gateway", "direct"] if i % 2 == 0 else ["direct", "gateway"]
                for target in order:
                    samples[shape][target].append(_wrk(urls[target], conns, seconds, script))
    res.data["rounds"] = rounds
    res.data["round_seconds"] = seconds
    res.data["samples"] = samples
    rows = []
    summary: dict[str, Any] = {}
    for shape, conns in SHAPES.items():
        g, d = samples[shape]["gateway"], samples[shape]["direct"]
        # Ratios and differences per round (adjacent runs share the same noise), then medians.
        rps_ratio = median([a["rps"] / b["rps"] for a, b in zip(g, d, strict=True)])
        p50_diff = median([(a["p50"] - b["p50"]) / 1000 for a, b in zip(g, d, strict=True)])
        p99_diff = median([(a["p99"] - b["p99"]) / 1000 for a, b in zip(g, d, strict=True)])
        s = {
            "connections": conns,
            "gateway": {k: median([x[k] for x in g]) for k in ("rps", "p50", "p99")},
            "direct": {k: median([x[k] for x in d]) for k in ("rps", "p50", "p99")},
            "errors": {"gateway": sum(x["errors"] for x in g), "direct": sum(x["errors"] for x in d)},
            "rps_ratio": rps_ratio, "p50_added_ms": p50_diff, "p99_added_ms": p99_diff,
        }
        summary[shape] = s
        for target in ("gateway", "direct"):
            m = s[target]
            rows.append([
                f"{conns} conn", target, fmt(m["rps"], 0), fmt(m["p50"] / 1000, 2), fmt(m["p99"] / 1000, 2),
                s["errors"][target],
                fmt(rps_ratio, 2) if target == "gateway" else "",
                fmt(p50_diff, 2) if target == "gateway" else "",
                fmt(p99_diff, 2) if target == "gateway" else "",
            ])
    res.data["summary"] = summary
    added = summary["c1"]["p50_added_ms"]
    res.data["target"] = {"p50_added_ms_max": 2.0, "measured": added, "pass": added <= 2.0}
    res.tables.append(md_table(
        ["load", "target", "req/s (median)", "p50 ms", "p99 ms", "errors", "gw/direct req/s",
         "p50 added ms", "p99 added ms"], rows))
    res.notes.append(
        f"{rounds} alternating rounds of {seconds:g} s per target and load shape (wrk, 1 thread); medians; "
        "ratios and differences are taken per round, then the median. "
        f"Target: gateway adds <= 2 ms at p50 (1 connection): {fmt(added, 2)} ms -> "
        f"{'PASS' if added <= 2.0 else 'FAIL'}. 'direct' hits one instance; the gateway spreads over both "
        "of its region's instances.")
    return res
