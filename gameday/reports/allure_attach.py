"""Allure attachments for a drill, only when allure-pytest is active (``--alluredir``)."""

from __future__ import annotations

import json
from html import escape
from typing import Any

import pytest

# Per test (node id): the drills attached so far, so a test with several drills (rounds, two faults)
# gets every region in its parameter and every drill's verdict line in its description.
_SEEN_KEY = pytest.StashKey[dict[str, list[dict[str, Any]]]]()

# Columns of table.drill_rows whose figure carries a human-readable detail, by summary key.
_DETAIL = {"switchover": "switchover", "dns converge": "dns_convergence",
           "client recovery": "client_recovery", "versions": "versions"}


def allure_active(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "allure_report_dir", None))


def _title(summary: dict[str, Any]) -> str:
    head = f"{summary.get('fault')} {summary.get('region') or ''}".strip()
    return f"{head}, round {int(summary.get('round') or 0) + 1}"


def _bad(value: str) -> bool:
    return value in ("FAIL", "not reached") or "ABORTED" in value


def verdict_html(summary: dict[str, Any], rows: list[list[str]]) -> str:
    """One drill's verdicts as a vertical table (figure | value | detail): fits Allure's narrow pane."""
    head, *body = rows
    values = body[0] if body else ["-"] * len(head)
    cell = "padding:4px 10px;border:1px solid #ddd;vertical-align:top"
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'></head>",
           "<body style='margin:8px;font:13px/1.4 sans-serif;color:#222'>",
           f"<div style='font-weight:bold;margin-bottom:6px'>{escape(_title(summary))} "
           f"- seed {escape(str(summary.get('seed')))}</div>",
           "<table style='border-collapse:collapse'>",
           f"<tr style='background:#f0f0f0'><th style='{cell};text-align:left'>figure</th>"
           f"<th style='{cell};text-align:left'>value</th><th style='{cell};text-align:left'>detail</th></tr>"]
    for name, value in zip(head, values, strict=True):
        fig = summary.get(_DETAIL.get(name, ""))
        detail = str(fig.get("detail") or "") if isinstance(fig, dict) else ""
        if name == "stale alarms" and summary.get("stale_alarms"):
            detail = json.dumps(summary["stale_alarms"], default=str)[:300]
        colour = "color:#c9302c;font-weight:bold" if _bad(value) else ""
        out.append(f"<tr><td style='{cell}'>{escape(name)}</td>"
                   f"<td style='{cell};white-space:nowrap;{colour}'>{escape(value)}</td>"
                   f"<td style='{cell}'>{escape(detail)}</td></tr>")
    out += ["</table>", "</body></html>"]
    return "\n".join(out)


def verdict_line(summary: dict[str, Any], rows: list[list[str]]) -> str:
    """The one-line verdict of a drill, as in the terminal table."""
    head, *body = rows
    values = dict(zip(head, body[0], strict=True)) if body else {}
    parts = [f"{k} {values[k]}" for k in ("switchover", "dns converge", "client recovery", "versions",
                                          "stale alarms") if k in values]
    return f"{_title(summary)}: " + ", ".join(parts)


def attach_drill(config: pytest.Config, summary: dict[str, Any], svg: str, rows: list[list[str]]) -> None:
    """Attach the verdict table (HTML), the timeline (SVG) and the figures (JSON) to the test."""
    if not allure_active(config):
        return
    import allure  # noqa: PLC0415  (optional integration)

    title = _title(summary)
    allure.attach(verdict_html(summary, rows), name=f"verdicts: {title}",
                  attachment_type=allure.attachment_type.HTML)
    allure.attach(svg, name=f"timeline: {title}", attachment_type=allure.attachment_type.SVG)
    allure.attach(json.dumps(summary, indent=2, default=str), name=f"figures: {title}",
                  attachment_type=allure.attachment_type.JSON)

    dynamic: Any = allure.dynamic  # partly unannotated in allure-python
    seen = config.stash.setdefault(_SEEN_KEY, {}).setdefault(str(summary.get("test", "")), [])
    seen.append({"fault": summary.get("fault"), "region": summary.get("region"),
                 "line": verdict_line(summary, rows)})
    # Shown on the test, but excluded from Allure's history id: the seed (and the region it picks)
    # changes from run to run, and must not split one test's history into one entry per seed.
    regions = list(dict.fromkeys(str(s["region"]) for s in seen if s["region"]))
    allure.dynamic.parameter("seed", summary.get("seed"), excluded=True)
    allure.dynamic.parameter("region", ", ".join(regions) or "-", excluded=True)
    # Behaviors tab: feature = fault kind, story = region (each added once per test).
    if [s["fault"] for s in seen].count(summary.get("fault")) == 1:
        dynamic.feature(str(summary.get("fault")))
    if [s["region"] for s in seen].count(summary.get("region")) == 1:
        dynamic.story(f"region {summary.get('region') or '-'}")
    items = "".join(f"<li>{escape(s['line'])}</li>" for s in seen)
    dynamic.description_html(f"<p>gameday drill verdicts (seed {escape(str(summary.get('seed')))}):</p>"
                             f"<ul>{items}</ul>")
