"""Role *alarms*: stale-snapshot alarms raised and cleared by nodes (:class:`AlarmSource`;
built-ins: :class:`LogFileAlarms`, :class:`CommandAlarms`, :class:`LineFeedAlarms`;
profile kind ``alarms``).
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from gameday.errors import ConfigError, GamedayError
from gameday.observers.sources._common import _MISSING, _path

AlarmEventKind = Literal["stale_snapshot", "stale_snapshot_cleared"]
ALARM_EVENTS: tuple[AlarmEventKind, ...] = ("stale_snapshot", "stale_snapshot_cleared")


# -- the event ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AlarmEvent:
    """A stale-snapshot alarm raised or cleared by a node."""

    t: float | None
    """When the node logged it, on the harness's monotonic clock, when the line says so;
    None: the observer stamps it when it read the line."""
    node: str
    event: AlarmEventKind
    detail: str = ""


# -- the seam -------------------------------------------------------------------------------------
@runtime_checkable
class AlarmSource(Protocol):
    """Stale-snapshot alarms. Synchronous: files and pipes are read without waiting."""

    def poll(self) -> list[AlarmEvent]:
        """New events since the last call (the first call: since the source was made)."""
        ...

    def describe(self) -> str: ...


# -- the built-ins --------------------------------------------------------------------------------
class _LineMatcher:
    """Turns log lines into alarm events: a JSON field naming the event, or regexes.

    JSON (*json_event_field*): the field's value must be one of :data:`ALARM_EVENTS`;
    *time_field* (optional) is the line's CLOCK_MONOTONIC stamp; *detail_field* its detail.
    Regex: a line matching *regex* raises the alarm, one matching *clear_regex* clears it; a
    named group ``node`` overrides the source's node (one log for several proxies).
    """

    def __init__(self, *, node: str, regex: str | None, clear_regex: str | None, json_event_field: str | None,
                 time_field: str | None, detail_field: str | None, where: str) -> None:
        if (regex is None) == (json_event_field is None):
            raise ConfigError(f"alarm source {where}: give exactly one of regex or json_event_field",
                              field="regex")
        try:
            self.regex = re.compile(regex) if regex is not None else None
            self.clear = re.compile(clear_regex) if clear_regex is not None else None
        except re.error as exc:
            raise ConfigError(f"alarm source {where}: invalid regular expression: {exc}", field="regex") from exc
        self.node = node
        self.event_field = json_event_field
        self.time_field = time_field
        self.detail_field = detail_field

    def match(self, line: str) -> AlarmEvent | None:
        if self.event_field is not None:
            return self._json(line)
        for pattern, event in ((self.regex, ALARM_EVENTS[0]), (self.clear, ALARM_EVENTS[1])):
            m = pattern.search(line) if pattern is not None else None
            if m is not None:
                node = m.groupdict().get("node") or self.node
                return AlarmEvent(None, node, event, line.strip()[:500])
        return None

    def _json(self, line: str) -> AlarmEvent | None:
        assert self.event_field is not None
        if not line.lstrip().startswith("{"):
            return None
        try:
            doc = json.loads(line)
        except ValueError:
            return None  # a log may interleave JSON with other lines
        event = _path(doc, self.event_field)
        if event not in ALARM_EVENTS:
            return None
        t: float | None = None
        if self.time_field is not None:
            raw = _path(doc, self.time_field)
            t = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
        detail = _path(doc, self.detail_field) if self.detail_field is not None else _MISSING
        return AlarmEvent(t, self.node, event, "" if detail is _MISSING else str(detail))


class LogFileAlarms:
    """Alarms from a log file a node appends to, read from where the last poll stopped.

    Args:
        path: the log file.
        node: the node whose alarms it holds.
        regex / clear_regex: see :class:`_LineMatcher`; or
        json_event_field (+ time_field, detail_field): JSON lines.
        from_start: read what the file already holds; default False: the first poll sees
            what was appended after the source was made (older lines are another drill's).

    A half-written last line is kept for the next poll; a file that shrank (rotated,
    truncated) is read again from its start.
    """

    def __init__(self, *, path: str | Path, node: str, regex: str | None = None, clear_regex: str | None = None,
                 json_event_field: str | None = None, time_field: str | None = None,
                 detail_field: str | None = None, from_start: bool = False) -> None:
        self.path = Path(path)
        self.node = node
        self._matcher = _LineMatcher(node=node, regex=regex, clear_regex=clear_regex,
                                     json_event_field=json_event_field, time_field=time_field,
                                     detail_field=detail_field, where=str(self.path))
        self._offset = 0 if from_start else self._size()
        self.last_error: str | None = None

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def poll(self) -> list[AlarmEvent]:
        try:
            with self.path.open("rb") as fh:
                size = fh.seek(0, 2)
                if size < self._offset:
                    self._offset = 0  # rotated or truncated: what it holds now is new
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            self.last_error = f"{self.path} does not exist (yet)"
            return []
        except OSError as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            return []
        self.last_error = None
        end = data.rfind(b"\n") + 1  # keep a half-written last line for next time
        self._offset += end
        return [e for line in data[:end].decode(errors="replace").splitlines()
                if (e := self._matcher.match(line)) is not None]

    def describe(self) -> str:
        how = (f"JSON field {self._matcher.event_field}" if self._matcher.event_field is not None
               else f"regex {self._matcher.regex.pattern if self._matcher.regex else ''!r}")
        return f"log file {self.path} of {self.node} ({how})"


class CommandAlarms:
    """Alarms from the output of a command that follows a log (``journalctl -f``,
    ``kubectl logs -f``), started on the first poll and stopped by :meth:`close`.

    Args:
        argv: the command, run without a shell; its stdout lines are matched.
        node: the node whose alarms it prints.
        regex / clear_regex, json_event_field (+ time_field, detail_field): as for
            :class:`LogFileAlarms`.

    Lines are read by a thread as they come, so :meth:`poll` never waits. A command that
    exits is not restarted (it would print its history again); ``last_error`` says how it
    ended.
    """

    def __init__(self, *, argv: Sequence[str], node: str, regex: str | None = None, clear_regex: str | None = None,
                 json_event_field: str | None = None, time_field: str | None = None,
                 detail_field: str | None = None) -> None:
        if not argv:
            raise ConfigError(f"alarm command for {node}: argv is empty", field="argv")
        self.argv = tuple(argv)
        self.node = node
        self._matcher = _LineMatcher(node=node, regex=regex, clear_regex=clear_regex,
                                     json_event_field=json_event_field, time_field=time_field,
                                     detail_field=detail_field, where=" ".join(self.argv))
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._reader: threading.Thread | None = None
        self.last_error: str | None = None

    def _start(self) -> None:
        try:
            self._proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL)
        except OSError as exc:
            self.last_error = f"cannot run {' '.join(self.argv)}: {exc}"
            self._proc = None
            return
        self._reader = threading.Thread(target=self._read, args=(self._proc,), daemon=True,
                                        name=f"gameday-alarms-{self.node}")
        self._reader.start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            self._lines.put(raw.decode(errors="replace"))
        code = proc.wait()
        self.last_error = f"{' '.join(self.argv)} exited with code {code}; its later output is not seen"

    def poll(self) -> list[AlarmEvent]:
        if self._proc is None and self._reader is None and self.last_error is None:
            self._start()
        out: list[AlarmEvent] = []
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return out
            if (e := self._matcher.match(line)) is not None:
                out.append(e)

    def close(self) -> None:
        """Stop the command (SIGTERM, then SIGKILL after 2 s). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(2)

    def describe(self) -> str:
        how = (f"JSON field {self._matcher.event_field}" if self._matcher.event_field is not None
               else f"regex {self._matcher.regex.pattern if self._matcher.regex else ''!r}")
        return f"command {' '.join(self.argv)} for {self.node} ({how})"


class LineFeedAlarms:
    """Alarms from a callable that returns new ``(node, line)`` pairs: a target that reads its
    nodes' logs through its own API (kube: pod logs through the Kubernetes client).

    The lines the feed holds when the source is made are discarded (another drill's); the
    node each line names is kept.

    Args:
        feed: returns the lines logged since its last call.
        name: what the feed is, for reports.
        regex / clear_regex, json_event_field (+ time_field, detail_field): as for
            :class:`LogFileAlarms`.
    """

    def __init__(self, *, feed: Callable[[], Iterable[tuple[str, str]]], name: str, regex: str | None = None,
                 clear_regex: str | None = None, json_event_field: str | None = None,
                 time_field: str | None = None, detail_field: str | None = None) -> None:
        self.feed = feed
        self.name = name
        self._args = {"regex": regex, "clear_regex": clear_regex, "json_event_field": json_event_field,
                      "time_field": time_field, "detail_field": detail_field}
        _LineMatcher(node=name, where=name, **self._args)  # a bad pattern fails here, not at the first poll
        self._matchers: dict[str, _LineMatcher] = {}
        self.last_error: str | None = None
        for _ in feed():
            pass

    def poll(self) -> list[AlarmEvent]:
        try:
            lines = list(self.feed())
        except (GamedayError, OSError) as exc:  # a flapping API: no lines this time
            self.last_error = f"{type(exc).__name__}: {exc}"
            return []
        self.last_error = None
        out = []
        for node, line in lines:
            m = self._matchers.get(node)
            if m is None:
                m = self._matchers[node] = _LineMatcher(node=node, where=self.name, **self._args)
            if (e := m.match(line)) is not None:
                out.append(e)
        return out

    def describe(self) -> str:
        how = self._args["json_event_field"] or self._args["regex"]
        return f"{self.name} ({'JSON field' if self._args['json_event_field'] else 'regex'} {how})"
