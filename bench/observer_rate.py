"""(f) the observer's achieved poll rate per source with 60 entry nodes (issue 8).

One federation of 30 generated regions (``scaled_topology(30)``, the ``prod`` timing
profile of ``scale.py``: at 30 regions the local profile's probe traffic starves 2 cores),
described as sources by the local target (``LocalTarget.sources()``: 60 HTTP JSON entry
nodes, the control plane's ``/status``, the GSLB over UDP, 30 proxy log files, 30 regions'
utilisation). The real :class:`~gameday.observers.observer.Observer` watches it in
alternating rounds, side by side on the same federation and the same machine load:

- **6 nodes**: the sources restricted to the first 3 regions' entry nodes (the default
  topology's size);
- **60 nodes**: every entry node.

Per round: every source's achieved rate (polls completed per second, answered or not: the
figure the drill records in its result; and how many were answered), its longest gap
between polls, and the polls it skipped because the previous one was still in flight.
The ratio 60-node / 6-node of the median entry-node
rate, taken per round, says what the 10x more sources cost; the target is ~10 Hz per source.
"""

from __future__ import annotations

import dataclasses
import itertools
import resource
import time
from pathlib import Path
from typing import Any

from common import BenchResult, fmt, loadavg, md_table, median, percentile, running_federation, scaled_topology
from scale import PROFILES

from gameday.model.timeline import Timeline
from gameday.observers.observer import Observer, PollRate
from gameday.observers.sources import Sources
from gameday.targets.local import LocalTarget

REGIONS = 30
NOMINAL_HZ = 10.0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _observe(target: LocalTarget, sources: Sources, seconds: float) -> tuple[dict[str, PollRate], Timeline, float]:
    """Observe for *seconds*; also the harness's CPU use meanwhile, in cores (this process
    only sleeps besides the observer thread, so it is the observer's)."""
    tl = Timeline(t0=time.monotonic())
    obs = Observer(sources, target.regions(), tl)
    c0, t0 = _cpu(), time.monotonic()
    obs.start()
    try:
        time.sleep(seconds)
    finally:
        obs.stop()
    cores = (_cpu() - c0) / (time.monotonic() - t0)
    if obs.error is not None:
        raise obs.error
    return obs.poll_rates(), tl, cores


def _round_stats(rates: dict[str, PollRate], tl: Timeline, nodes: list[str]) -> dict[str, Any]:
    node_hz = [rates[n].achieved_hz for n in nodes]
    node_ok_hz = [rates[n].answered_hz or 0.0 for n in nodes]
    gaps = []
    for n in nodes:
        ts = [o.t for o in tl.nodes if o.node == n]
        gaps += [b - a for a, b in itertools.pairwise(ts)]
    return {
        "nodes": len(nodes),
        "node_hz_median": round(median(node_hz), 2), "node_hz_min": round(min(node_hz), 2),
        "node_answered_hz_median": round(median(node_ok_hz), 2),
        "node_gap_p50_s": round(median(gaps), 3), "node_gap_p99_s": round(percentile(gaps, 99), 3),
        "node_gap_max_s": round(max(gaps), 3) if gaps else None,
        "node_skipped": sum(rates[n].skipped for n in nodes),
        "dns_hz": round(rates["dns"].achieved_hz, 2), "dns_gap_max_s": round(rates["dns"].max_gap_s, 3),
        "cp_hz": round(rates["control_plane"].achieved_hz, 2),
        "alarm_sources": sum(1 for k in rates if k.startswith("alarms ")),
        "alarm_hz_min": round(min((r.achieved_hz for k, r in rates.items() if k.startswith("alarms ")),
                                  default=0.0), 2),
        "behind": sorted(k for k, r in rates.items() if r.behind and not k.startswith("utilisation")),
    }


def run(quick: bool) -> BenchResult:
    rounds, seconds = (2, 8.0) if quick else (4, 15.0)
    res = BenchResult("observer_rate", f"(f) observer poll rate per source at {REGIONS} regions (issue 8)")
    topo = scaled_topology(REGIONS, **PROFILES["prod"])
    with running_federation(topo, "obs") as (fed, bringup):
        target = LocalTarget(topo, Path(fed.workdir), fed)
        samples: dict[str, list[dict[str, Any]]] = {"6": [], "60": []}
        for i in range(rounds):
            # Alternate which side goes first: a drift in machine load must not favour one.
            for side in (("6", "60") if i % 2 == 0 else ("60", "6")):
                full = target.sources()
                if side == "6":
                    keep = {r.name for r in topo.regions[:3]}
                    src = dataclasses.replace(
                        full, entry_nodes=tuple(n for n in full.entry_nodes if n.region in keep),
                        alarms=tuple(a for a in full.alarms
                                     if str(getattr(a, "node", "")).split("-", 1)[-1] in keep),
                        utilisation={r: u for r, u in full.utilisation.items() if r in keep})
                else:
                    src = full
                rates, tl, cores = _observe(target, src, seconds)
                samples[side].append({**_round_stats(rates, tl, [n.name for n in src.entry_nodes]),
                                      "observer_cpu_cores": round(cores, 3), "loadavg": loadavg()})
    ratios = [b["node_hz_median"] / a["node_hz_median"] for a, b in zip(samples["6"], samples["60"], strict=True)]
    res.data = {"regions": REGIONS, "bringup_s": round(bringup, 1), "round_s": seconds, "rounds": samples,
                "ratio_60_over_6": [round(r, 3) for r in ratios]}
    rows = []
    for side in ("6", "60"):
        s = samples[side]
        rows.append([side, fmt(median([x["node_hz_median"] for x in s]), 2),
                     fmt(median([x["node_answered_hz_median"] for x in s]), 2),
                     fmt(min(x["node_hz_min"] for x in s), 2),
                     fmt(median([x["node_gap_p50_s"] for x in s]) * 1000, 0),
                     fmt(max(x["node_gap_p99_s"] for x in s) * 1000, 0),
                     fmt(max(x["node_gap_max_s"] or 0 for x in s) * 1000, 0),
                     sum(x["node_skipped"] for x in s),
                     fmt(median([x["dns_hz"] for x in s]), 2), fmt(median([x["cp_hz"] for x in s]), 2),
                     fmt(min(x["alarm_hz_min"] for x in s), 2),
                     fmt(median([x["observer_cpu_cores"] for x in s]), 2),
                     fmt(median([x["loadavg"][0] for x in s]), 1),
                     "PASS" if side == "60" and min(x["node_hz_min"] for x in s) >= 0.9 * NOMINAL_HZ else
                     ("FAIL" if side == "60" else "")])
    res.tables.append(md_table(
        ["entry nodes", "node Hz (median)", "node answered Hz (median)", "node Hz (min)", "node gap p50 ms",
         "node gap p99 ms",
         "node gap max ms", "skipped polls", "dns Hz", "cp Hz", "alarm Hz (min)", "observer CPU (cores)",
         "load avg (1 min)", "target >= 9 Hz per node @60"],
        rows))
    res.tables.append(md_table(["round", "60-node / 6-node median node rate"],
                               [[i + 1, fmt(r, 3)] for i, r in enumerate(ratios)]))
    res.notes.append(
        f"{rounds} rounds of {seconds:g} s per side, alternating, on one {REGIONS}-region federation "
        f"(bring-up {bringup:.0f} s, `prod` timing). Rates are polls completed per second over the round "
        "(as a drill records them; 'answered' counts only the ok ones); a gap is the time between two "
        "observations of one node; a skipped "
        "poll is a tick at which that source's previous read was still in flight; alarm sources are read on "
        "the tick itself, so their rate is the observer's tick rate. Observer CPU: this process's CPU time "
        "over the round (its main thread only sleeps). Sources behind "
        "(< 80 % of nominal) per round: " + "; ".join(
            f"{side}: {[x['behind'] for x in samples[side]]}" for side in ("6", "60")))
    return res
