"""(b) version propagation and (c) bring-up time at 3, 10 and 30 regions.

Both need a federation per size, so they share bring-ups: every bring-up is a (c)
sample, and the last federation of each size also runs (b) when (b) is selected.

(c) bring-up: ``LocalFederation.start()`` (launcher, NATS, every process, then
``wait_ready``: every entry node at the control plane's version routing every region,
and the GSLB answering) timed on the harness's monotonic clock. From the component
logs (same CLOCK_MONOTONIC): when the last process logged ``started`` (the spawn part).

(b) propagation: the harness publishes an agent-style :class:`~gameday.fedapp.wire.Event`
on JetStream that flips one region's gateway health (so every entry node's routable set
changes and it logs ``routes_changed`` with the version and a ``mono`` stamp). Measured
from the control plane's ``version`` log line for that change to the last gateway or
proxy's ``routes_changed`` at that version or later; the next change is published only
after every entry node has it (with 100-200 ms of jitter), so changes never coalesce.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import nats
from common import (
    BenchResult,
    LogTail,
    fmt,
    md_table,
    median,
    percentile,
    read_log,
    running_federation,
    scaled_topology,
)

from gameday.errors import GamedayError
from gameday.fedapp.wire import Event, events_subject, gateway_key
from gameday.targets.local.federation import LocalFederation

SIZES = (3, 10, 30)

#: Timing profiles. ``local``: clusters/local.yaml as is (0.2 s probes, 0.15 s probe timeout, 0.5 s
#: heartbeats, 2 s region timeout). ``prod``: the production defaults of gameday.model.topology.Timing
#: (1 s probes and heartbeats, 3 s region timeout) with a 0.5 s probe timeout instead of 0.25 s,
#: because at 30 regions on 2 shared cores the local profile's probe traffic (~900 probes/s)
#: starves the machine and probes time out, versions flap and bring-up may never converge.
PROFILES: dict[str, dict[str, float]] = {
    "local": {},
    "prod": {"probe_interval": 1.0, "probe_timeout": 0.5, "heartbeat_interval": 1.0, "region_timeout": 3.0},
}


def _bringup_breakdown(fed: LocalFederation, t0: float, total: float) -> dict[str, Any]:
    started = []
    for name in fed.components:
        for d in read_log(fed.logdir / f"{name}.log"):
            if d.get("event") in ("started", "gslb_started"):
                started.append(d["mono"])
                break
    cp = fed.get_json("controlplane")
    return {
        "total_s": round(total, 3),
        "processes": len(fed.components),
        "last_started_s": round(max(started) - t0, 3) if started else None,
        "processes_logged_started": len(started),
        "cp_version_at_ready": cp.get("version"),
    }


async def _propagation(fed: LocalFederation, changes: int, timeout: float = 10.0) -> dict[str, Any]:
    """Flip the last region's gateway health *changes* times; measure each version's spread."""
    spec = fed.spec
    region = spec.regions[-1].name
    key = gateway_key(region)
    nodes = fed.entry_nodes()
    tail_nodes = LogTail(fed.logdir, nodes)
    tail_cp = LogTail(fed.logdir, ["controlplane"])
    tail_nodes.skip_to_end()
    tail_cp.skip_to_end()
    epoch = time.time_ns()  # larger than any agent's epoch (its start time), so our events apply
    nc = await nats.connect(spec.nats_url, name="bench-propagation")
    js = nc.jetstream()
    samples: list[dict[str, Any]] = []
    missing = 0
    try:
        for seq in range(1, changes + 1):
            healthy = seq % 2 == 0  # odd: exclude the region, even: re-admit it (ends healthy)
            ev = Event(region=region, epoch=epoch, seq=seq, key=key, value={"healthy": healthy},
                       observed_at=time.time())
            t_pub = time.monotonic()
            await js.publish(events_subject(spec.run_id, region), ev.to_bytes(),
                             headers={"Nats-Msg-Id": f"bench-{epoch}-{seq}"})
            t_ack = time.monotonic()
            version: int | None = None
            t_cp = t_ann = None
            reached: dict[str, float] = {}
            deadline = t_pub + timeout
            while time.monotonic() < deadline:
                for _, d in tail_cp.read():
                    ev_name, want = d.get("event"), {"healthy": healthy}
                    if ev_name == "version" and d.get("key") == key and d.get("value") == want:
                        version, t_cp = int(d["version"]), float(d["mono"])
                    elif ev_name == "announced" and version is not None and t_ann is None \
                            and int(d["version"]) >= version:
                        t_ann = float(d["mono"])
                for node, d in tail_nodes.read(skip=reached):
                    if d.get("event") != "routes_changed" or node in reached:
                        continue
                    at_or_after = version is None or d["version"] >= version
                    if (region in d.get("routable", [])) == healthy and at_or_after:
                        reached[node] = float(d["mono"])
                if version is not None and t_ann is not None and len(reached) == len(nodes):
                    break
                await asyncio.sleep(0.05)  # the figures come from log stamps, not from this poll
            if version is None or t_cp is None or len(reached) < len(nodes):
                missing += 1
                samples.append({"seq": seq, "version": version, "complete": False,
                                "nodes_reached": len(reached), "nodes": len(nodes)})
            else:
                last = max(reached.values())
                per_node = sorted(t - t_cp for t in reached.values())
                samples.append({
                    "seq": seq, "version": version, "complete": True,
                    "cp_to_last_ms": (last - t_cp) * 1000,
                    "cp_to_median_node_ms": median(per_node) * 1000,
                    "cp_to_announce_ms": ((t_ann - t_cp) * 1000) if t_ann is not None else None,
                    "publish_to_cp_ms": (t_cp - t_pub) * 1000,
                    "publish_ack_ms": (t_ack - t_pub) * 1000,
                    "publish_to_last_ms": (last - t_pub) * 1000,
                    "slowest_node": max(reached, key=lambda n: reached[n]),
                })
            await asyncio.sleep(random.uniform(0.1, 0.2))
    finally:
        await nc.close()
    ok = [s for s in samples if s["complete"]]

    def q(field: str, p: float) -> float:
        return percentile([s[field] for s in ok], p)

    slowest: dict[str, int] = {}
    for s in ok:
        slowest[s["slowest_node"]] = slowest.get(s["slowest_node"], 0) + 1
    return {
        "region_flipped": region, "entry_nodes": len(nodes), "changes": changes, "complete": len(ok),
        "missing": missing,
        "cp_to_last_ms": {"p50": q("cp_to_last_ms", 50), "p99": q("cp_to_last_ms", 99),
                          "max": q("cp_to_last_ms", 100)},
        "cp_to_median_node_ms_p50": q("cp_to_median_node_ms", 50),
        "publish_to_cp_ms": {"p50": q("publish_to_cp_ms", 50), "p99": q("publish_to_cp_ms", 99)},
        "publish_to_last_ms": {"p50": q("publish_to_last_ms", 50), "p99": q("publish_to_last_ms", 99)},
        "slowest_node_counts": dict(sorted(slowest.items(), key=lambda kv: -kv[1])[:5]),
        "samples": samples,
    }


def run(quick: bool, *, bringup: bool, propagation: bool) -> list[BenchResult]:
    # (profile, regions) -> bring-ups; (b) runs on the last "prod" federation of each size.
    if quick:
        plan = {("local", 3): 1, ("prod", 3): 1, ("prod", 10): 1, ("prod", 30): 1}
    else:
        plan = {("local", 3): 3, ("local", 10): 2, ("prod", 3): 3, ("prod", 10): 3, ("prod", 30): 2}
    if not bringup:
        plan = {("prod", n): 1 for n in SIZES}
    changes = 10 if quick else 30
    bring: dict[tuple[str, int], list[dict[str, Any]]] = {k: [] for k in plan}
    prop: dict[int, dict[str, Any]] = {}
    for (profile, n), reps in plan.items():
        topo = scaled_topology(n, **PROFILES[profile])
        for rep in range(reps):
            t0 = time.monotonic()
            try:
                with running_federation(topo, f"scale{n}", timeout=120) as (fed, total):
                    bring[(profile, n)].append(_bringup_breakdown(fed, t0, total))
                    if propagation and profile == "prod" and rep == reps - 1:
                        time.sleep(1.0)  # let start-up stragglers (late probes, alive marks) settle
                        prop[n] = asyncio.run(_propagation(fed, changes))
            except GamedayError as exc:
                bring[(profile, n)].append({"total_s": None, "error": str(exc)[:500]})
            time.sleep(0.5)
    out: list[BenchResult] = []
    if propagation:
        res = BenchResult("propagation", "(b) version propagation: control-plane version -> every entry node")
        rows = []
        for n in SIZES:
            p = prop.get(n)
            if p is None:
                rows.append([n, 2 * n, 0, "-", "-", "-", "-", "-", "-", "bring-up failed"])
                continue
            c = p["cp_to_last_ms"]
            rows.append([n, p["entry_nodes"], f"{p['complete']}/{p['changes']}", fmt(c["p50"]), fmt(c["p99"]),
                         fmt(c["max"]), fmt(p["cp_to_median_node_ms_p50"]), fmt(p["publish_to_cp_ms"]["p50"]),
                         fmt(p["publish_to_last_ms"]["p99"]),
                         ("PASS" if c["p99"] <= 200 else "FAIL") if n == 30 else ""])
        res.data = {"changes_per_size": changes, "profile": PROFILES["prod"],
                    "per_size": {str(k): v for k, v in prop.items()}}
        res.tables.append(md_table(
            ["regions", "entry nodes", "changes", "p50 ms", "p99 ms", "max ms", "median node p50 ms",
             "event->cp p50 ms", "event->last p99 ms", "target p99 <= 200 ms @30"], rows))
        res.notes.append(
            "p50/p99/max: control plane's `version` log line -> the last gateway/proxy logging "
            "`routes_changed` at that version (both `mono`, CLOCK_MONOTONIC). 'median node': the typical "
            "node rather than the last. 'event->cp': harness publish on JetStream -> control plane commit "
            "(consume + KV CAS). "
            f"{changes} changes per size (flip one region's gateway health), spaced 100-200 ms after the "
            "previous change reached every node; `prod` timing profile (the chain measured does not "
            "depend on probe timings)." + (" --quick: fewer than 30 changes." if quick else ""))
        out.append(res)
    if bringup:
        res = BenchResult("bringup", "(c) bring-up: LocalFederation.start() until wait_ready returns")
        rows = []
        for (profile, n), samples in bring.items():
            ok = [b for b in samples if b.get("total_s") is not None]
            totals = [b["total_s"] for b in ok]
            spawn = [b["last_started_s"] for b in ok if b.get("last_started_s") is not None]
            rows.append([
                n, profile, ok[0]["processes"] if ok else "-", f"{len(ok)}/{len(samples)}",
                fmt(median(totals), 2), fmt(min(totals), 2) if totals else "-",
                fmt(max(totals), 2) if totals else "-", fmt(median(spawn), 2),
                ok[0]["cp_version_at_ready"] if ok else "-",
                ("PASS" if median(totals) <= 3.0 else "FAIL")
                if (profile, n) == ("local", 3) and totals else "",
            ])
        res.data = {"plan": {f"{p}-{n}": r for (p, n), r in plan.items()}, "profiles": PROFILES,
                    "per_size": {f"{p}-{n}": v for (p, n), v in bring.items()}}
        res.tables.append(md_table(
            ["regions", "timing", "processes", "ok", "median s", "min s", "max s", "last process started s",
             "cp version at ready", "target <= 3 s (local, 3)"], rows))
        res.notes.append(
            "`local`: clusters/local.yaml timings (probe 0.2 s, fall 3, rise 2); `prod`: 1 s probes and "
            "heartbeats (see PROFILES in bench/scale.py). Regions r01..rNN, 2 app instances each, "
            "5 processes per region + NATS, control plane, GSLB. 'last process started': when the last "
            "component logged `started` (spawned through the pre-forking launcher); the rest of the time is "
            "convergence (probes reaching `rise`, events, versions, pulls).")
        out.append(res)
    return out


if __name__ == "__main__":
    for r in run(quick=True, bringup=True, propagation=True):
        print("\n".join(r.tables))
        print(json.dumps({k: v for k, v in r.data.items() if k != "per_size"}))
