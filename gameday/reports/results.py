"""Reading an Allure results directory (what allure-pytest writes) into typed models.

Only the fields a report shows are read: per test its name, status, steps (nested),
attachments, labels, parameters and fixtures; per directory ``environment.properties``,
``categories.json`` and ``executor.json``. A file that is not valid JSON, or a field of
the wrong type, is a :class:`~gameday.errors.ReportError` naming the file and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gameday.errors import ReportError

STATUSES = ("failed", "broken", "passed", "skipped", "unknown")
"""Allure's statuses, worst first (the order the report lists tests in)."""


@dataclass(frozen=True, kw_only=True)
class Attachment:
    name: str
    source: Path
    """The attachment's file (inside the results directory); may be missing."""
    type: str
    """MIME type as allure-pytest recorded it (``image/png``, ``text/html``, ...)."""


@dataclass(frozen=True, kw_only=True)
class Step:
    name: str
    status: str
    message: str
    """Allure's ``statusDetails.message`` (the failed assertion), or empty."""
    start_ms: int | None
    stop_ms: int | None
    steps: tuple[Step, ...]
    attachments: tuple[Attachment, ...]
    parameters: tuple[tuple[str, str], ...]


@dataclass(frozen=True, kw_only=True)
class TestCase:
    name: str
    full_name: str
    status: str
    message: str
    trace: str
    history_id: str
    start_ms: int | None
    stop_ms: int | None
    description_html: str
    labels: tuple[tuple[str, str], ...]
    parameters: tuple[tuple[str, str], ...]
    steps: tuple[Step, ...]
    attachments: tuple[Attachment, ...]
    befores: tuple[Step, ...] = ()
    """Fixture set-up, from the ``*-container.json`` files that name this test."""
    afters: tuple[Step, ...] = ()

    @property
    def duration_s(self) -> float | None:
        if self.start_ms is None or self.stop_ms is None:
            return None
        return (self.stop_ms - self.start_ms) / 1000.0

    def label(self, name: str) -> str | None:
        return next((v for k, v in self.labels if k == name), None)


@dataclass(frozen=True, kw_only=True)
class Category:
    name: str
    matched_statuses: tuple[str, ...]
    message_regex: str | None
    trace_regex: str | None

    def matches(self, test: TestCase) -> bool:
        """Allure's rule: the status is one of the matched ones and each regex, when set,
        matches the whole message (trace)."""
        if test.status not in self.matched_statuses:
            return False
        if self.message_regex is not None and not re.fullmatch(self.message_regex, test.message, re.DOTALL):
            return False
        return self.trace_regex is None or bool(re.fullmatch(self.trace_regex, test.trace, re.DOTALL))


DEFAULT_CATEGORIES = (
    Category(name="Product defects", matched_statuses=("failed",), message_regex=None, trace_regex=None),
    Category(name="Test defects", matched_statuses=("broken",), message_regex=None, trace_regex=None),
)
"""What Allure files a failed (broken) test under when no category of the run matches it."""


@dataclass(frozen=True, kw_only=True)
class Results:
    directory: Path
    tests: tuple[TestCase, ...]
    environment: tuple[tuple[str, str], ...]
    categories: tuple[Category, ...]
    executor: dict[str, str] = field(default_factory=dict)

    def categorised(self) -> list[tuple[str, list[TestCase]]]:
        """Each category with the failed/broken tests filed under it, as Allure files them."""
        out: dict[str, list[TestCase]] = {c.name: [] for c in self.categories}
        for test in self.tests:
            hits = [c for c in self.categories if c.matches(test)]
            if not hits:
                hits = [c for c in DEFAULT_CATEGORIES if c.matches(test)]
            for c in hits:
                out.setdefault(c.name, []).append(test)
        return [(name, tests) for name, tests in out.items() if tests]


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReportError(f"{path}: not a readable JSON file ({exc})") from exc


def _str(obj: dict[str, Any], key: str, path: Path, default: str = "") -> str:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ReportError(f"{path}: field {key!r} is {type(value).__name__} {value!r:.60}, expected a string")
    return value


def _int(obj: dict[str, Any], key: str, path: Path) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReportError(f"{path}: field {key!r} is {value!r:.60}, expected milliseconds (an integer)")
    return value


def _list(obj: dict[str, Any], key: str, path: Path) -> list[dict[str, Any]]:
    value = obj.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ReportError(f"{path}: field {key!r} is {value!r:.60}, expected a list of objects")
    return value


def _pairs(obj: dict[str, Any], key: str, path: Path) -> tuple[tuple[str, str], ...]:
    return tuple((_str(p, "name", path), str(p.get("value", ""))) for p in _list(obj, key, path))


def _attachments(obj: dict[str, Any], path: Path) -> tuple[Attachment, ...]:
    return tuple(Attachment(name=_str(a, "name", path), source=path.parent / _str(a, "source", path),
                            type=_str(a, "type", path, "application/octet-stream"))
                 for a in _list(obj, "attachments", path))


def _details(obj: dict[str, Any], path: Path) -> tuple[str, str]:
    details = obj.get("statusDetails") or {}
    if not isinstance(details, dict):
        raise ReportError(f"{path}: field 'statusDetails' is {details!r:.60}, expected an object")
    return _str(details, "message", path), _str(details, "trace", path)


def _step(obj: dict[str, Any], path: Path) -> Step:
    return Step(name=_str(obj, "name", path), status=_str(obj, "status", path, "unknown"),
                message=_details(obj, path)[0], start_ms=_int(obj, "start", path), stop_ms=_int(obj, "stop", path),
                steps=tuple(_step(s, path) for s in _list(obj, "steps", path)),
                attachments=_attachments(obj, path), parameters=_pairs(obj, "parameters", path))


def _test(obj: dict[str, Any], path: Path) -> TestCase:
    message, trace = _details(obj, path)
    return TestCase(name=_str(obj, "name", path), full_name=_str(obj, "fullName", path),
                    status=_str(obj, "status", path, "unknown"), message=message, trace=trace,
                    history_id=_str(obj, "historyId", path), start_ms=_int(obj, "start", path),
                    stop_ms=_int(obj, "stop", path), description_html=_str(obj, "descriptionHtml", path),
                    labels=_pairs(obj, "labels", path), parameters=_pairs(obj, "parameters", path),
                    steps=tuple(_step(s, path) for s in _list(obj, "steps", path)),
                    attachments=_attachments(obj, path))


def _properties(path: Path) -> tuple[tuple[str, str], ...]:
    """``environment.properties``: ``key = value`` lines (Java properties, the subset Allure writes)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read it ({exc})") from exc
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:]*?)\s*[=:]\s*(.*)", line)
        key, value = (m.group(1), m.group(2)) if m else (line, "")
        out.append((key.strip(), value.strip()))
    return tuple(out)


def _categories(path: Path) -> tuple[Category, ...]:
    if not path.is_file():
        return ()
    raw = _load_json(path)
    if not isinstance(raw, list) or not all(isinstance(c, dict) for c in raw):
        raise ReportError(f"{path}: expected a list of category objects, got {type(raw).__name__}")
    out = []
    for i, c in enumerate(raw):
        statuses = c.get("matchedStatuses") or ["failed", "broken"]
        if not isinstance(statuses, list) or not all(s in STATUSES for s in statuses):
            raise ReportError(f"{path}: category {i} field 'matchedStatuses' is {statuses!r:.80}, "
                              f"expected a list of {', '.join(STATUSES)}")
        for key in ("messageRegex", "traceRegex"):
            try:
                re.compile(c.get(key) or "")
            except re.error as exc:
                raise ReportError(f"{path}: category {i} field {key!r} is not a regular expression ({exc})") from exc
        out.append(Category(name=_str(c, "name", path), matched_statuses=tuple(statuses),
                            message_regex=c.get("messageRegex"), trace_regex=c.get("traceRegex")))
    return tuple(out)


def read_results(directory: Path) -> Results:
    """Read *directory* (an ``--alluredir``). Raises ReportError when it is missing, holds no
    test result, or a file in it is malformed (named)."""
    if not directory.is_dir():
        raise ReportError(f"{directory}: no such results directory (run `gameday drill`, or pytest with "
                          "--alluredir, first; or name one with --results)")
    results = sorted(directory.glob("*-result.json"))
    if not results:
        raise ReportError(f"{directory}: holds no Allure test result (*-result.json): the run wrote none "
                          "(it was interrupted before any test ended, or ran without --alluredir)")
    tests = {}
    for path in results:
        raw = _load_json(path)
        if not isinstance(raw, dict):
            raise ReportError(f"{path}: expected a JSON object, got {type(raw).__name__}")
        tests[_str(raw, "uuid", path) or path.name] = _test(raw, path)
    # Fixtures: a container lists the tests (children) its befores/afters ran for.
    befores: dict[str, list[Step]] = {}
    afters: dict[str, list[Step]] = {}
    for path in sorted(directory.glob("*-container.json")):
        raw = _load_json(path)
        if not isinstance(raw, dict):
            raise ReportError(f"{path}: expected a JSON object, got {type(raw).__name__}")
        for child in raw.get("children") or []:
            befores.setdefault(str(child), []).extend(_step(s, path) for s in _list(raw, "befores", path))
            afters.setdefault(str(child), []).extend(_step(s, path) for s in _list(raw, "afters", path))
    cases = [TestCase(**{**t.__dict__, "befores": tuple(befores.get(u, ())), "afters": tuple(afters.get(u, ()))})
             for u, t in tests.items()]
    # Retries of one test (same history id) show once, as Allure shows them: the latest.
    latest: dict[str, TestCase] = {}
    for case in sorted(cases, key=lambda c: c.start_ms or 0):
        latest[case.history_id or case.full_name or case.name] = case
    ordered = sorted(latest.values(), key=lambda c: (STATUSES.index(c.status) if c.status in STATUSES
                                                     else len(STATUSES), c.full_name, c.name))
    executor: dict[str, str] = {}
    if (directory / "executor.json").is_file():
        raw = _load_json(directory / "executor.json")
        if isinstance(raw, dict):
            executor = {str(k): str(v) for k, v in raw.items() if v is not None}
    return Results(directory=directory, tests=tuple(ordered),
                   environment=_properties(directory / "environment.properties"),
                   categories=_categories(directory / "categories.json"), executor=executor)
