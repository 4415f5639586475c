"""Plain-text tables: drill verdicts, per-round statistics, the conformance summary.

The verdict table's verdict columns and their cells are the verdict registry's
(:data:`gameday.verdicts.registry.VERDICTS`): a verdict registered with a column gets one here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from gameday.verdicts.registry import VERDICTS


def _vs_history(d: dict[str, Any]) -> str:
    reg = d.get("regression")
    return str(reg.get("flag") or "-") if isinstance(reg, dict) else "-"


def drill_rows(drills: list[dict[str, Any]]) -> list[list[str]]:
    columns = VERDICTS.columns()
    rows = [["test", "fault", "region", *(str(k.column) for k in columns), "vs history",
             "load (achieved/target rps)"]]
    for d in drills:
        load = d.get("load") or {}
        rows.append([
            str(d.get("test", "")).split("::")[-1],
            str(d.get("fault")) + (" (ABORTED)" if d.get("aborted") else "")
            + (" (INCONCLUSIVE)" if inconclusive(d) else ""),
            str(d.get("region") or "-"),
            *(k.cell_of(d) for k in columns),
            _vs_history(d),
            f"{load.get('achieved_rps', '-')}/{load.get('target_rps', '-')}" if load else "-",
        ])
    return rows


def inconclusive(d: dict[str, Any]) -> bool:
    """A verdict of drill *d* was inconclusive: the harness was starved when it would have failed."""
    return any(v.get("outcome") == "inconclusive" for v in d.get("verdicts") or [])


def render(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def render_drills(drills: list[dict[str, Any]], reasons: dict[str, str] | None = None) -> list[str]:
    """The verdict table, then a line per failed test with its one-line reason (*reasons*:
    node id -> reason), per regression, and per drill whose sources fell behind."""
    out = render(drill_rows(drills))
    for nodeid, reason in (reasons or {}).items():
        if any(d.get("test") == nodeid for d in drills):
            how = "INCONCLUSIVE (harness starved: neither pass nor fail)" if "HarnessStarved" in reason else "FAILED"
            out.append(f"{how} {nodeid.split('::')[-1]}: {reason}")
    for d in drills:
        reg = d.get("regression")
        if isinstance(reg, dict) and reg.get("status") == "regression":
            out.append(f"{str(d.get('test', '')).split('::')[-1]} ({d.get('fault')}): {reg.get('message')}")
    return out + behind_lines(drills)


def behind_lines(drills: list[dict[str, Any]]) -> list[str]:
    """One line per drill whose observation sources fell behind their poll rate: the figures
    they set are known only to the gaps between their polls (each figure's detail says so)."""
    out = []
    for d in drills:
        starved = [f"{k} {s['achieved_hz']:.1f}/{s['nominal_hz']:g} Hz, gap {s['max_gap_s']:.2f} s"
                   for k, s in ((d.get("harness") or {}).get("sources") or {}).items() if s.get("starved")]
        if starved:
            out.append(f"{str(d.get('test', '')).split('::')[-1]} ({d.get('fault')}): harness starved during the "
                       f"fault (a failing verdict is inconclusive): {', '.join(starved[:6])}")
        rates = d.get("poll_rates") or {}
        behind = [f"{k} {rates[k]['achieved_hz']:.1f}/{rates[k]['nominal_hz']:g} Hz"
                  for k in d.get("sources_behind") or [] if k in rates]
        if behind:
            out.append(f"{str(d.get('test', '')).split('::')[-1]} ({d.get('fault')}): sources behind their poll "
                       f"rate, resolution widened where they set it: {', '.join(behind[:6])}"
                       + (f" and {len(behind) - 6} more" if len(behind) > 6 else ""))
    return out


def _quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def render_rounds(drills: list[dict[str, Any]]) -> list[str]:
    """p50/p95 of each figure across the rounds of each test."""
    by_test: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in drills:
        by_test[str(d.get("test", "")).split("[")[0]].append(d)
    rows = [["test", "rounds", "figure", "p50", "p95", "max"]]
    for test, ds in sorted(by_test.items()):
        for name in ("switchover", "dns_convergence", "client_recovery"):
            vals = [d[name]["value_s"] for d in ds if isinstance(d.get(name), dict)
                    and d[name].get("value_s") is not None]
            if vals:
                rows.append([test.split("::")[-1], str(len(ds)), name, f"{_quantile(vals, 0.5):.2f}s",
                             f"{_quantile(vals, 0.95):.2f}s", f"{max(vals):.2f}s"])
    return ["", "across rounds:", *render(rows)] if len(rows) > 1 else []


def one_line_reason(rep: Any) -> str:
    """The first line of a failure or skip reason, or the empty string."""
    if rep.outcome == "passed":
        return ""
    lr = rep.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:  # skip: (path, line, reason)
        return str(lr[2]).removeprefix("Skipped: ")
    text = getattr(rep, "longreprtext", "") or str(lr)
    for line in text.splitlines():
        if line.startswith("E "):
            return line[1:].strip()[:160]
    return text.strip().splitlines()[-1][:160] if text.strip() else ""


def render_conformance(rules: list[dict[str, Any]]) -> list[str]:
    """Rules passed, failed and skipped, each with its rule id and a one-line reason."""
    order = {"failed": 0, "inconclusive": 1, "skipped": 2, "passed": 3}
    # One line per test; a rule may have several tests.
    rows = [["rule", "result", "check", "reason"]]
    for r in sorted(rules, key=lambda r: (_rule_num(r["rule"]), order.get(r["outcome"], 3))):
        rows.append([r["rule"], r["outcome"].upper(), r.get("title") or r["test"].split("::")[-1],
                     r.get("reason", "")])
    counts = defaultdict(set)
    for r in rules:
        counts[r["outcome"]].add(r["rule"])
    failed_rules = counts["failed"]
    inconclusive_rules = counts["inconclusive"] - failed_rules
    passed_rules = counts["passed"] - failed_rules - inconclusive_rules
    skipped_rules = counts["skipped"] - failed_rules - passed_rules - inconclusive_rules
    head = (f"rules passed {len(passed_rules)}, failed {len(failed_rules)}, skipped {len(skipped_rules)}"
            + (f", inconclusive {len(inconclusive_rules)}" if inconclusive_rules else "") + f" ({len(rules)} checks)")
    return [head, *render(rows)]


def _rule_num(rule: str) -> int:
    digits = "".join(ch for ch in rule if ch.isdigit())
    return int(digits) if digits else 999
