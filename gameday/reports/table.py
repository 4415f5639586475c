"""Plain-text tables: drill verdicts, per-round statistics, the conformance summary."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any


def _fig(d: dict[str, Any], name: str) -> str:
    f = d.get(name)
    if not isinstance(f, dict):
        return "-"
    # A definition other than the §4 one is named in the cell: the figure means something else.
    how = f" ({f['definition']})" if f.get("definition") not in (None, "", "entry-node versions") else ""
    if f.get("value_s") is None:
        return "not reached" + how
    return f"{f['value_s']:.2f}±{f['resolution_s']:.2f}s{how}"


def _asserted(d: dict[str, Any], name: str) -> str | None:
    """How the test's assertion of verdict *name* ended (``ok``, ``FAIL``, ``n/a: ...``), or None."""
    outcomes = [v for v in d.get("verdicts") or [] if v.get("name") == name]
    if not outcomes:
        return None
    if any(v["outcome"] == "fail" for v in outcomes):
        return "FAIL"
    if all(v["outcome"] == "n/a" for v in outcomes):
        return "n/a: " + str(outcomes[0].get("detail", ""))
    return "ok"


def _na(d: dict[str, Any], name: str) -> str | None:
    reason = (d.get("not_applicable") or {}).get(name)
    return f"n/a: {reason}" if reason else None


def _headroom(d: dict[str, Any]) -> str:
    """Worst surviving utilisation against the limit (``71%/80%``), with the verdict when asserted."""
    na = _na(d, "headroom")
    if na:
        return na
    peak = d.get("peak_utilisation")
    fig = f"{peak['utilisation']:.0%}/{peak['limit']:.0%}" if isinstance(peak, dict) else ""
    verdict = _asserted(d, "headroom")
    return " ".join(p for p in (fig, verdict) if p) or "-"


_SHORT = {"switchover": "sw", "dns_convergence": "dns", "client_recovery": "clients"}


def _vs_prediction(d: dict[str, Any]) -> str:
    """``ok`` when every figure is inside its predicted window; else each one that is not
    (``sw +1.10s late``); ``n/a`` with the first reason when none has a window; ``(not
    asserted)`` after it when the test did not call ``assert_as_predicted``."""
    cell = _vs_prediction_cell(d)
    asserted = any(str(v.get("name", "")).endswith("_vs_prediction") for v in d.get("verdicts") or [])
    return cell if asserted or cell == "-" else f"{cell} (not asserted)"


def _vs_prediction_cell(d: dict[str, Any]) -> str:
    vs = d.get("vs_prediction")
    if not isinstance(vs, dict) or not vs:
        return "-"
    cells = {k: v for k, v in vs.items() if isinstance(v, dict)}
    if all(v.get("outcome") == "n/a" for v in cells.values()):
        first = next(iter(cells.values()), {})
        return f"n/a: {first.get('detail', '')}"[:60]
    bad = []
    for name, v in cells.items():
        how, by = v.get("how"), v.get("by_s")
        if v.get("outcome") == "fail":
            bad.append(f"{_SHORT.get(name, name)} {'+' if how == 'late' else '-'}{by or 0:.2f}s {how}"
                       if how in ("late", "early") else f"{_SHORT.get(name, name)} {how}")
    if not bad:
        na = [_SHORT.get(n, n) for n, v in cells.items() if v.get("outcome") == "n/a"]
        return "ok" + (f" ({', '.join(na)} n/a)" if na else "")
    return "FAIL " + ", ".join(bad)


def _vs_history(d: dict[str, Any]) -> str:
    reg = d.get("regression")
    return str(reg.get("flag") or "-") if isinstance(reg, dict) else "-"


def drill_rows(drills: list[dict[str, Any]]) -> list[list[str]]:
    rows = [["test", "fault", "region", "switchover", "dns converge", "client recovery", "versions",
             "stale alarms", "headroom", "vs prediction", "vs history", "load (achieved/target rps)"]]
    for d in drills:
        load = d.get("load") or {}
        versions = d.get("versions") or {}
        rows.append([
            str(d.get("test", "")).split("::")[-1],
            str(d.get("fault")) + (" (ABORTED)" if d.get("aborted") else ""),
            str(d.get("region") or "-"),
            _fig(d, "switchover"),
            _fig(d, "dns_convergence"),
            _fig(d, "client_recovery"),
            _na(d, "versions") or ("ok" if versions.get("passed") else "FAIL"),
            _na(d, "stale_alarms") or str(len(d.get("stale_alarms") or [])),
            _headroom(d),
            _vs_prediction(d),
            _vs_history(d),
            f"{load.get('achieved_rps', '-')}/{load.get('target_rps', '-')}" if load else "-",
        ])
    return rows


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
            out.append(f"FAILED {nodeid.split('::')[-1]}: {reason}")
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
    order = {"failed": 0, "skipped": 1, "passed": 2}
    # One line per test; a rule may have several tests.
    rows = [["rule", "result", "check", "reason"]]
    for r in sorted(rules, key=lambda r: (_rule_num(r["rule"]), order.get(r["outcome"], 3))):
        rows.append([r["rule"], r["outcome"].upper(), r.get("title") or r["test"].split("::")[-1],
                     r.get("reason", "")])
    counts = defaultdict(set)
    for r in rules:
        counts[r["outcome"]].add(r["rule"])
    failed_rules = counts["failed"]
    passed_rules = counts["passed"] - failed_rules
    skipped_rules = counts["skipped"] - failed_rules - passed_rules
    head = (f"rules passed {len(passed_rules)}, failed {len(failed_rules)}, skipped {len(skipped_rules)} "
            f"({len(rules)} checks)")
    return [head, *render(rows)]


def _rule_num(rule: str) -> int:
    digits = "".join(ch for ch in rule if ch.isdigit())
    return int(digits) if digits else 999
