"""Allure attachments for a drill, only when allure-pytest is active (``--alluredir``)."""

from __future__ import annotations

import json
from html import escape
from typing import Any

import pytest


def allure_active(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "allure_report_dir", None))


def attach_drill(config: pytest.Config, summary: dict[str, Any], svg: str, rows: list[list[str]]) -> None:
    """Attach the verdict table (HTML), the timeline (SVG) and the figures (JSON) to the test."""
    if not allure_active(config):
        return
    import allure  # noqa: PLC0415  (optional integration)

    head, *body = rows
    html = ["<table style='border-collapse:collapse;font-family:sans-serif'>",
            "<tr>" + "".join(f"<th style='text-align:left;padding:4px 8px'>{escape(c)}</th>" for c in head)
            + "</tr>"]
    for r in body:
        html.append("<tr>" + "".join(f"<td style='padding:4px 8px'>{escape(c)}</td>" for c in r) + "</tr>")
    html.append("</table>")
    title = f"{summary.get('fault')} {summary.get('region') or ''}".strip()
    allure.attach("\n".join(html), name=f"verdicts: {title}", attachment_type=allure.attachment_type.HTML)
    allure.attach(svg, name=f"timeline: {title}", attachment_type=allure.attachment_type.SVG)
    allure.attach(json.dumps(summary, indent=2, default=str), name=f"figures: {title}",
                  attachment_type=allure.attachment_type.JSON)
    allure.dynamic.parameter("seed", summary.get("seed"))
    allure.dynamic.parameter("region", summary.get("region"))
