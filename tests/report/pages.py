"""What a reviewer sees, checked in the page itself: the Allure report (Allure 2's own DOM)
and the self-contained report, opened in headless Chromium through playwright.

Each check raises AssertionError saying what the page lacked; the negative controls in
``test_report_browser.py`` run them on reports that lack it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.sync_api import Locator, Page

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "reports" / "screenshots"
WAIT_MS = 20_000
"""How long a page element may take to appear (the machine is shared and often loaded)."""


@dataclass(frozen=True)
class Expected:
    """What the page must show of one test, read from its ``*-result.json`` (not through
    gameday's own reader, so the reader is not checked against itself)."""

    name: str
    status: str
    suites: tuple[str, ...]
    steps: tuple[str, ...]
    nested_steps: tuple[str, ...]
    images: tuple[str, ...]
    """Names of the image attachments, anywhere in the test (steps included)."""

    @classmethod
    def of(cls, results: Path, name: str) -> Expected:
        for path in results.glob("*-result.json"):
            raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("name") == name:
                break
        else:
            raise AssertionError(f"{results}: no result of a test named {name!r}")
        labels = {lab["name"]: lab["value"] for lab in raw.get("labels", [])}
        suites = tuple(labels[k] for k in ("parentSuite", "suite", "subSuite") if k in labels)
        images: list[str] = []
        nested: list[str] = []

        def walk(node: dict[str, Any], depth: int) -> None:
            images.extend(a["name"] for a in node.get("attachments", []) if a["type"].startswith("image/"))
            for s in node.get("steps", []):
                if depth > 0:
                    nested.append(s["name"])
                walk(s, depth + 1)

        walk(raw, 0)
        return cls(name=name, status=raw["status"], suites=suites,
                   steps=tuple(s["name"] for s in raw.get("steps", [])), nested_steps=tuple(nested),
                   images=tuple(images))


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def _image_loaded(img: Locator) -> bool:
    img.scroll_into_view_if_needed(timeout=WAIT_MS)
    return bool(img.evaluate("i => i.complete && i.naturalWidth > 0 && i.getBoundingClientRect().width > 50"))


# --- Allure's report -------------------------------------------------------------------------

def allure_overview(page: Page, base: str) -> None:
    page.goto(f"{base}index.html")
    page.wait_for_selector(".widget__title", timeout=WAIT_MS)
    page.wait_for_load_state("networkidle", timeout=WAIT_MS)


def _widget(page: Page, title: str) -> Locator:
    return page.locator(".widget", has=page.locator(".widget__title", has_text=title)).first


def check_allure_environment(page: Page, environment: dict[str, str]) -> None:
    widget = _widget(page, "Environment")
    more = widget.get_by_text("Show all", exact=True)
    if more.count():  # Allure lists the first five entries until asked for the rest
        more.first.click(timeout=WAIT_MS)
    text = widget.inner_text(timeout=WAIT_MS)
    missing = [f"{k} = {v}" for k, v in environment.items() if k not in text or v not in text]
    assert not missing, f"the Environment widget lacks {missing}; it shows: {text!r:.300}"


def check_allure_categories(page: Page, names: list[str]) -> None:
    text = _widget(page, "Categories").inner_text(timeout=WAIT_MS)
    missing = [n for n in names if n not in text]
    assert not missing, f"the Categories widget lacks {missing}; it shows: {text!r:.300}"


def allure_trend_runs(page: Page) -> int:
    """How many runs Allure's Trend widget draws (one report line per run; none: no chart)."""
    widget = _widget(page, "Trend")
    widget.wait_for(timeout=WAIT_MS)
    return widget.locator(".report-line").count()


def open_allure_test(page: Page, base: str, expected: Expected) -> None:
    """Open the test's page the way a reviewer does: Suites, then down the tree to it."""
    page.goto(f"{base}index.html#suites")
    page.wait_for_selector(".node__title", timeout=WAIT_MS)
    for suite in expected.suites:
        page.locator(".node__title", has=page.locator(".node__name", has_text=suite)).first.click(timeout=WAIT_MS)
    page.locator(".node__title", has=page.get_by_text(expected.name, exact=True)).first.click(timeout=WAIT_MS)
    page.locator(".test-result .test-result__name", has_text=expected.name).first.wait_for(timeout=WAIT_MS)


def _expand_all_steps(page: Page) -> None:
    for _ in range(50):  # bounded: a drill has a handful of steps, each expanded once
        closed = page.locator(".step:not(.step_expanded) > .step__title_hasContent")
        if closed.count() == 0:
            return
        closed.first.click(timeout=WAIT_MS)


def check_allure_test(page: Page, expected: Expected) -> None:
    """The opened test shows its name, status, every step (nested ones once expanded) and its
    images, each loaded."""
    pane = page.locator(".test-result").first
    head = pane.inner_text(timeout=WAIT_MS)
    assert expected.name in head and expected.status.lower() in head.lower(), \
        f"the test page does not show {expected.name!r} as {expected.status}: {head[:300]!r}"
    assert expected.steps, f"{expected.name} recorded no steps: nothing to look for"
    shown = [t.strip() for t in pane.locator(".step__name").all_inner_texts()]
    missing = [s for s in expected.steps if s not in shown]
    assert not missing, f"the test page lacks the steps {missing}; it shows {shown}"
    _expand_all_steps(page)
    shown = [t.strip() for t in pane.locator(".step__name").all_inner_texts()]
    missing = [s for s in expected.nested_steps if s not in shown]
    assert not missing, f"the expanded steps lack {missing}; they show {shown}"
    assert expected.images, f"{expected.name} has no image attachment: nothing to look for"
    for name in expected.images:
        row = pane.locator(".attachment-row", has=page.locator(".attachment-row__name", has_text=name)).first
        row.locator(".attachment-row__name").click(timeout=WAIT_MS)
        # The opened attachment is the row's sibling, named by the row's uid.
        img = page.locator(f".attachment__{row.get_attribute('data-uid')} img").first
        img.wait_for(timeout=WAIT_MS)
        assert _image_loaded(img), f"the attachment {name!r} opened but its image did not load"


# --- the self-contained report ---------------------------------------------------------------

def check_builtin_test(page: Page, expected: Expected) -> None:
    article = page.locator("article.test", has=page.locator(".test-name", has_text=expected.name)).first
    article.wait_for(timeout=WAIT_MS)
    badge = article.locator("summary .badge").first.inner_text()
    assert badge == expected.status, f"{expected.name} is shown {badge!r}, expected {expected.status!r}"
    summary = article.locator("summary").first
    if article.locator("details").first.get_attribute("open") is None:
        summary.click()
    shown = [t.strip() for t in article.locator(":scope > details > ol.steps > li > details > summary .step-name")
             .all_inner_texts()]
    assert list(expected.steps) == shown, f"{expected.name}: steps shown {shown}, expected {list(expected.steps)}"
    # The test's own steps (not the folded fixtures), parents before children (document order).
    closed = article.locator(":scope > details > ol.steps li.step > details:not([open]) > summary")
    for _ in range(50):  # bounded: each click opens one step
        if closed.count() == 0:
            break
        closed.first.click()
    nested = [t.strip() for t in article.locator("ol.steps ol.steps .step-name").all_inner_texts()]
    missing = [s for s in expected.nested_steps if s not in nested]
    assert not missing, f"{expected.name}: nested steps lack {missing}; shown {nested}"
    assert expected.images, f"{expected.name} has no image attachment: nothing to look for"
    for name in expected.images:
        img = article.locator(".attachment.kind-image", has=page.locator("figcaption", has_text=name)).locator("img")
        assert img.count() >= 1, f"{expected.name}: no image attachment {name!r} on the page"
        assert _image_loaded(img.first), f"{expected.name}: the image {name!r} did not load"
        src = img.first.get_attribute("src") or ""
        assert src.startswith("data:image/"), f"{name!r} is not inlined (src {src[:60]!r})"


def check_builtin_environment(page: Page, environment: dict[str, str]) -> None:
    text = page.locator("#environment").inner_text(timeout=WAIT_MS)
    missing = [f"{k} = {v}" for k, v in environment.items() if k not in text or v not in text]
    assert not missing, f"the Environment panel lacks {missing}; it shows {text!r:.300}"


def check_builtin_trend(page: Page, runs: int) -> None:
    img = page.locator("#trend img.plot")
    assert img.count() == 1, f"the Trend panel has no plot: {page.locator('#trend').inner_text()!r:.200}"
    assert _image_loaded(img), "the trend plot did not load"
    alt = img.get_attribute("alt") or ""
    assert f"across {runs} runs" in alt, f"the trend plot is of {alt!r}, expected {runs} runs"
