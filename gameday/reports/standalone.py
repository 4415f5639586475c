"""The self-contained report: one HTML file, every image inlined as a data URI, rendered from
the Jinja2 templates in ``gameday/reports/templates/``. ``gameday report`` writes it when no
Allure command line is installed (or with ``--generator builtin``); it opens from disk.

It shows what the Allure report shows of a drill: per test its status, steps (nested, with
status), attachments (PNG/SVG images inline, HTML verdict tables in a sandboxed frame, CSV,
JSON and text folded), fixtures, labels and parameters; the run's environment, categories
and executor; and the trend of the headline figures across runs (``history.jsonl``).
"""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

import jinja2

from gameday.reports.plots import trend_png
from gameday.reports.results import STATUSES, Attachment, Results, Step, TestCase
from gameday.reports.trend import HistoryRow, runs_of

TEXT_LIMIT = 256 * 1024
"""Bytes of a text attachment shown inline; the rest stays in its (linked) data URI."""

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/yaml")


@dataclass(frozen=True, kw_only=True)
class AttachmentView:
    name: str
    kind: str
    """``image``, ``html``, ``text``, ``binary`` or ``missing``."""
    type: str
    size: int
    data_uri: str
    text: str
    truncated: bool


def _data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def attachment_view(att: Attachment) -> AttachmentView:
    try:
        data = att.source.read_bytes()
    except OSError:
        return AttachmentView(name=att.name, kind="missing", type=att.type, size=0, data_uri="",
                              text=f"{att.source.name}: missing from the results directory", truncated=False)
    if att.type.startswith("image/"):
        kind = "image"
    elif att.type == "text/html":
        kind = "html"
    elif att.type.startswith(_TEXT_TYPES):
        kind = "text"
    else:
        kind = "binary"
    text = data[:TEXT_LIMIT].decode("utf-8", errors="replace") if kind in ("html", "text") else ""
    return AttachmentView(name=att.name, kind=kind, type=att.type, size=len(data), data_uri=_data_uri(att.type, data),
                          text=text, truncated=kind == "text" and len(data) > TEXT_LIMIT)


def _duration(start: int | None, stop: int | None) -> str:
    if start is None or stop is None:
        return ""
    seconds = (stop - start) / 1000.0
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("gameday.reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["duration"] = lambda item: _duration(item.start_ms, item.stop_ms)
    env.globals["attachment_view"] = attachment_view
    return env


def _failed_step(steps: tuple[Step, ...]) -> bool:
    return any(s.status in ("failed", "broken") or _failed_step(s.steps) for s in steps)


def render(results: Results, history: list[HistoryRow], *, generated: datetime | None = None) -> str:
    """The report page (HTML text) of *results*, with the trend of *history*."""
    counts = Counter(t.status for t in results.tests)
    runs = runs_of(history)
    trend = _data_uri("image/png", trend_png(history)) if history else ""
    recent = [r for r in history if r.run in runs[-10:]]
    template = _environment().get_template("report.html.j2")

    def open_test(test: TestCase) -> bool:
        # A failed test opens unfolded, on its failed step (the reviewer's first question).
        return test.status in ("failed", "broken") or _failed_step(test.steps)

    return template.render(
        results=results, tests=results.tests, counts=[(s, counts.get(s, 0)) for s in STATUSES],
        total=len(results.tests), categories=results.categorised(),
        generated=(generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC"),
        trend=trend, runs=len(runs), recent=recent, open_test=open_test)
