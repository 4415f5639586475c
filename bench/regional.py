"""(g) regional control planes (R14, issue 10): the ``global`` against the ``regional`` layout.

At 12 and 30 generated regions (``scaled_topology``, the ``prod`` timing profile of
``scale.py``), one federation per layout. At each size each layout is first brought up
alone (the bring-up figure); then both run side by side and take turns, round by round
(the order alternating), so that both see the same load on a shared machine:

* **bring-up**: ``LocalFederation.start()`` until ``wait_ready`` (every entry node at the
  global version and, in the regional layout, at its region's regional version).
* **instance change -> region**: the harness publishes an agent-style
  :class:`~gameday.fedapp.wire.Event` flipping one instance of the last region (on the
  subject its agent uses: the global events subject in the ``global`` layout, the region's
  own in the ``regional`` one); measured from the publish (harness ``CLOCK_MONOTONIC``) to
  the last of the region's entry nodes (its gateway and proxy) logging ``snapshot_applied``
  at a version holding the change (the snapshot the change lands in: global, or the
  region's). The other instance stays healthy, so the region keeps serving: in the
  regional layout the global tier hears nothing.
* **gateway change -> federation**: the same with the last region's gateway health on the
  global subject, to the last of *every* entry node at a global version holding it.
* **control-plane CPU per change**: the CPU time (``/proc/<pid>/stat`` utime + stime) of
  every control-plane process over the changes, minus their idle rate (measured over a
  quiet 3 s before) times the duration, per change.

Each change is published 100-200 ms after the previous one reached every node it must
reach, so changes never coalesce. The event's ``epoch`` is above every agent's, so it
applies (the federation is torn down afterwards).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from pathlib import Path
from typing import Any

import nats
from common import BenchResult, LogTail, fmt, loadavg, md_table, percentile, running_federation, scaled_topology
from scale import PROFILES

from gameday.errors import GamedayError
from gameday.fedapp.wire import Event, events_subject, gateway_key, instance_key, regional_events_subject
from gameday.targets.local.federation import LocalFederation

SIZES = (12, 30)
LAYOUTS = ("global", "regional")
IDLE_S = 3.0
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pids: list[int]) -> float:
    """Total CPU seconds (user + system) of *pids* so far (gone ones count 0)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15)
    return total


def _cp_pids(fed: LocalFederation) -> list[int]:
    return [c.pid for c in fed.components.values() if c.role == "controlplane" and c.pid is not None]


async def _changes(fed: LocalFederation, kind: str, changes: int, idle_rate: float,
                   timeout: float = 10.0) -> dict[str, Any]:
    spec = fed.spec
    region = spec.regions[-1]
    epoch = time.time_ns()
    if kind == "instance":
        key = instance_key(region.name, region.instances[0].name)
        subject = (regional_events_subject(spec.run_id, region.name) if spec.regional
                   else events_subject(spec.run_id, region.name))
        nodes = [f"gateway-{region.name}", f"proxy-{region.name}"]
        cp_name = f"controlplane-{region.name}" if spec.regional else "controlplane"
        scope = "regional" if spec.regional else "global"
    else:
        key, subject = gateway_key(region.name), events_subject(spec.run_id, region.name)
        nodes, cp_name, scope = fed.entry_nodes(), "controlplane", "global"
    tail_nodes, tail_cp = LogTail(fed.logdir, nodes), LogTail(fed.logdir, [cp_name])
    tail_nodes.skip_to_end()
    tail_cp.skip_to_end()
    pids = _cp_pids(fed)
    handler = [p for p in [fed.components[cp_name].pid] if p is not None]
    nc = await nats.connect(spec.nats_url, name=f"bench-regional-{kind}")
    js = nc.jetstream()
    samples: list[dict[str, Any]] = []
    cpu0, h0, t0 = _cpu_s(pids), _cpu_s(handler), time.monotonic()
    try:
        for seq in range(1, changes + 1):
            healthy = seq % 2 == 0  # odd: unhealthy, even: healthy again (ends healthy)
            value: dict[str, Any] = {"healthy": healthy, "weight": 1} if kind == "instance" else {"healthy": healthy}
            ev = Event(region=region.name, epoch=epoch, seq=seq, key=key, value=value, observed_at=time.time())
            t_pub = time.monotonic()
            await js.publish(subject, ev.to_bytes(), headers={"Nats-Msg-Id": f"bench-{epoch}-{seq}"})
            version: int | None = None
            t_cp: float | None = None
            applied: dict[str, list[tuple[int, float]]] = {n: [] for n in nodes}
            reached: dict[str, float] = {}
            deadline = t_pub + timeout
            while time.monotonic() < deadline:
                for _, d in tail_cp.read():
                    if d.get("event") == "version" and d.get("key") == key and d.get("value") == value:
                        version, t_cp = int(d["version"]), float(d["mono"])
                for node, d in tail_nodes.read(skip=reached):
                    if d.get("event") == "snapshot_applied" and d.get("scope") == scope:
                        applied[node].append((int(d["version"]), float(d["mono"])))
                if version is not None:
                    for node, seen in applied.items():
                        hit = next((t for v, t in seen if v >= version), None)
                        if hit is not None:
                            reached.setdefault(node, hit)
                    if len(reached) == len(nodes):
                        break
                await asyncio.sleep(0.02)  # the figures come from log stamps, not from this poll
            if version is None or t_cp is None or len(reached) < len(nodes):
                samples.append({"seq": seq, "complete": False, "nodes_reached": len(reached), "nodes": len(nodes)})
            else:
                last = max(reached.values())
                samples.append({"seq": seq, "complete": True, "version": version,
                                "publish_to_last_ms": (last - t_pub) * 1000, "cp_to_last_ms": (last - t_cp) * 1000,
                                "publish_to_cp_ms": (t_cp - t_pub) * 1000})
            await asyncio.sleep(random.uniform(0.1, 0.2))
    finally:
        await nc.close()
    wall, cpu, cpu_handler = time.monotonic() - t0, _cpu_s(pids) - cpu0, _cpu_s(handler) - h0
    ok = [s for s in samples if s["complete"]]

    def q(name: str, p: float) -> float:
        return percentile([s[name] for s in ok], p)

    return {
        "kind": kind, "region": region.name, "nodes": len(nodes), "changes": changes, "complete": len(ok),
        "publish_to_last_ms": {"p50": q("publish_to_last_ms", 50), "p99": q("publish_to_last_ms", 99),
                               "max": q("publish_to_last_ms", 100)},
        "cp_to_last_ms": {"p50": q("cp_to_last_ms", 50), "p99": q("cp_to_last_ms", 99)},
        "publish_to_cp_ms_p50": q("publish_to_cp_ms", 50),
        "cp_cpu_s": round(cpu, 4), "wall_s": round(wall, 3), "cp_processes": len(pids),
        "handler": cp_name, "handler_cpu_s": round(cpu_handler, 4),
        "cp_cpu_ms_per_change": cpu / changes * 1000,
        "cp_cpu_ms_per_change_net": max(0.0, cpu - idle_rate * wall) / changes * 1000,
        "samples": samples,
    }


def _merge(parts: list[dict[str, Any]], idle_rate: float) -> dict[str, Any]:
    """One kind's rounds folded into one result (samples pooled, CPU summed)."""
    samples = [x for p in parts for x in p["samples"]]
    ok = [x for x in samples if x["complete"]]
    cpu, wall = sum(p["cp_cpu_s"] for p in parts), sum(p["wall_s"] for p in parts)
    handler = sum(p["handler_cpu_s"] for p in parts)
    n = len(samples)

    def q(name: str, pct: float) -> float:
        return percentile([x[name] for x in ok], pct)

    return {
        "kind": parts[0]["kind"], "region": parts[0]["region"], "nodes": parts[0]["nodes"], "changes": n,
        "complete": len(ok), "rounds": len(parts),
        "publish_to_last_ms": {"p50": q("publish_to_last_ms", 50), "p99": q("publish_to_last_ms", 99),
                               "max": q("publish_to_last_ms", 100)},
        "cp_to_last_ms": {"p50": q("cp_to_last_ms", 50), "p99": q("cp_to_last_ms", 99)},
        "publish_to_cp_ms_p50": q("publish_to_cp_ms", 50),
        "per_round_p50_ms": [p["publish_to_last_ms"]["p50"] for p in parts],
        "cp_cpu_s": round(cpu, 4), "wall_s": round(wall, 3),
        "cp_cpu_ms_per_change": cpu / max(1, n) * 1000,
        "cp_cpu_ms_per_change_net": max(0.0, cpu - idle_rate * wall) / max(1, n) * 1000,
        "handler": parts[0]["handler"], "handler_cpu_ms_per_change": handler / max(1, n) * 1000,
        "samples": samples,
    }


def _size(n: int, changes: int, rounds: int) -> list[dict[str, Any]]:
    """Both layouts at *n* regions: each brought up alone (the bring-up figure), then both
    running side by side for alternating rounds of changes (same machine load for both)."""
    topos = {layout: scaled_topology(n, layout=layout, **PROFILES["prod"]) for layout in LAYOUTS}  # type: ignore[arg-type]
    out: dict[str, dict[str, Any]] = {}
    for layout in LAYOUTS:
        with running_federation(topos[layout], f"r14-{layout}{n}", timeout=180) as (fed, bringup):
            out[layout] = {"regions": n, "layout": layout, "processes": len(fed.components),
                           "bringup_s": round(bringup, 3), "loadavg_at_bringup": loadavg()}
        time.sleep(0.5)
    with contextlib.ExitStack() as stack:
        feds = {layout: stack.enter_context(running_federation(topos[layout], f"r14-{layout}{n}b", timeout=180))[0]
                for layout in LAYOUTS}
        time.sleep(1.0)  # start-up stragglers (late probes, alive marks) settle
        idle: dict[str, float] = {}
        for layout, fed in feds.items():
            pids = _cp_pids(fed)
            c0, t0 = _cpu_s(pids), time.monotonic()
            time.sleep(IDLE_S)
            idle[layout] = (_cpu_s(pids) - c0) / (time.monotonic() - t0)
            out[layout]["cp_idle_cores"] = round(idle[layout], 4)
        parts: dict[tuple[str, str], list[dict[str, Any]]] = {}
        per_round = changes // rounds // 2 * 2  # even: every round ends healthy
        for rnd in range(rounds):
            order = LAYOUTS if rnd % 2 == 0 else tuple(reversed(LAYOUTS))
            for layout in order:
                for kind in ("instance", "gateway"):
                    part = asyncio.run(_changes(feds[layout], kind, per_round, idle[layout]))
                    parts.setdefault((layout, kind), []).append(part)
        for layout in LAYOUTS:
            out[layout]["loadavg_after"] = loadavg()
            for kind in ("instance", "gateway"):
                out[layout][kind] = _merge(parts[(layout, kind)], idle[layout])
    return [out[layout] for layout in LAYOUTS]


def run(quick: bool) -> BenchResult:
    changes, rounds = (10, 1) if quick else (30, 3)
    runs: list[dict[str, Any]] = []
    for n in SIZES:
        try:
            runs += _size(n, changes, rounds)
        except GamedayError as exc:
            runs += [{"regions": n, "layout": layout, "error": str(exc)[:500]} for layout in LAYOUTS]
        time.sleep(0.5)
    res = BenchResult("regional", "(g) regional control planes (R14): global vs regional layout")
    res.data = {"changes": changes, "rounds": rounds, "profile": PROFILES["prod"], "runs": runs}
    by = {(r["regions"], r["layout"]): r for r in runs}
    rows = []
    for r in runs:
        if "error" in r:
            rows.append([r["regions"], r["layout"], "-", "bring-up failed", *["-"] * 8])
            continue
        i, g = r["instance"], r["gateway"]
        n, layout = r["regions"], r["layout"]
        glob = by.get((n, "global"), {})
        target = ""
        if n == 30 and layout == "regional":
            ok_region = i["publish_to_last_ms"]["p99"] <= 50
            g_p99 = glob["gateway"]["publish_to_last_ms"]["p99"] if "gateway" in glob else None
            ok_global = g_p99 is not None and g["publish_to_last_ms"]["p99"] <= g_p99
            ok_up = r["bringup_s"] <= 15
            target = (f"regional p99 {'PASS' if ok_region else 'FAIL'}; global p99 {'PASS' if ok_global else 'FAIL'}"
                      f"; bring-up {'PASS' if ok_up else 'FAIL'}")
        rows.append([
            n, layout, r["processes"], fmt(r["bringup_s"], 2),
            f"{fmt(i['publish_to_last_ms']['p50'])} / {fmt(i['publish_to_last_ms']['p99'])}",
            f"{i['complete']}/{i['changes']}",
            f"{fmt(g['publish_to_last_ms']['p50'])} / {fmt(g['publish_to_last_ms']['p99'])}",
            f"{g['complete']}/{g['changes']}",
            f"{fmt(i['handler_cpu_ms_per_change'], 2)} / {fmt(i['cp_cpu_ms_per_change'], 2)}",
            f"{fmt(g['handler_cpu_ms_per_change'], 2)} / {fmt(g['cp_cpu_ms_per_change'], 2)}",
            fmt(r["cp_idle_cores"] * 100, 1), target,
        ])
    res.tables.append(md_table(
        ["regions", "layout", "processes", "bring-up s", "instance -> region p50 / p99 ms", "ok",
         "gateway -> federation p50 / p99 ms", "ok", "CPU ms / instance change: handling cp / all cps",
         "CPU ms / gateway change: handling cp / all cps",
         "cp idle CPU %", "targets @30 (regional p99 <= 50 ms, global p99 <= global layout's, bring-up <= 15 s)"],
        rows))
    ratio_rows = []
    for n in SIZES:
        g, r = by.get((n, "global"), {}), by.get((n, "regional"), {})
        if "instance" not in g or "instance" not in r:
            continue
        for kind in ("instance", "gateway"):
            gs, rs = g[kind]["per_round_p50_ms"], r[kind]["per_round_p50_ms"]
            ratio_rows.append([n, kind, *(fmt(b / a, 2) if a else "-" for a, b in zip(gs, rs, strict=False))])
    if ratio_rows:
        res.tables.append(md_table(["regions", "change", *(f"round {i + 1} regional/global p50"
                                                           for i in range(rounds))], ratio_rows))
    res.notes.append(
        "Latencies: harness publish on JetStream -> the last entry node that must have the change logging "
        "`snapshot_applied` at a version holding it (both CLOCK_MONOTONIC): the region's gateway and proxy for an "
        "instance change, every gateway and proxy for a gateway change. CPU (utime + stime over the changes, "
        "per change, idle included): the control plane that handles the change (the global one, or the "
        "region's for an instance change in the regional layout) / every control-plane process (1 in the "
        "global layout, 1 + one per region in the regional one; their idle share is the 'cp idle CPU' column, "
        f"measured over {IDLE_S:g} s before the changes; the JSON also has the all-cp figure net of idle). "
        f"{changes} changes of each kind per federation in {rounds} round(s), spaced 100-200 ms after the previous "
        "one arrived; the two layouts of a size run side by side (both federations up) and take turns round by "
        "round, so both see the same machine load. Bring-up: each federation alone, once, before that. "
        "`prod` timing profile (1 s probes; the chain measured does not depend on probe timings)."
        + (" --quick: fewer changes, one round." if quick else ""))
    return res


if __name__ == "__main__":
    r = run(quick=True)
    print("\n".join(r.tables))
