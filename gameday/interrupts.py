"""SIGINT, SIGTERM and SIGHUP inside pytest: the first one stops the run, none stops a revert.

The first signal raises :class:`KeyboardInterrupt` in the main thread, so every
``finally`` (fault reverts, load and federation teardown) runs, the way Ctrl-C always
did; SIGTERM, and SIGHUP (the terminal closed, an ssh session dropped), behave exactly like
Ctrl-C. Two things are new:

* **Shielded sections** (a revert, the steady-state wait after it, stopping the load or
  the federation, starting a process and recording its pid) are not interrupted: a
  signal arriving inside one is remembered and raised when the section ends. A
  *held* shield stays up across calls until released (a revert is shielded from the
  call to ``target.revert`` until the drill's fault block has recorded its result).
* **Every later signal only reports**: "still reverting: <what>" on stderr. The revert
  and the teardown then always finish; ``kill -9`` stays the way out, and is safe, since
  every process of the run dies with it (:mod:`gameday.procs`).

Signals are process-wide, so the handler state is one object per process
(:data:`INTERRUPTS`); the session installs and uninstalls it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

ACK_ENV = "GAMEDAY_SIGNAL_ACK"
"""Set by ``gameday drill``: a file pytest appends ``<signum> <monotonic time>`` to for each
signal it receives, so the wrapper forwards only signals that did not reach pytest."""


def signal_name(signum: int) -> str:
    return "Ctrl-C (SIGINT)" if signum == signal.SIGINT else signal.Signals(signum).name


class Interrupts:
    """The process's SIGINT/SIGTERM/SIGHUP policy (see the module docstring)."""

    def __init__(self) -> None:
        self.first: int | None = None
        """The first signal received, if any."""
        self.first_at: float | None = None
        """Its ``time.monotonic()``."""
        self.raised = False
        self.count = 0
        self.describe: Callable[[], str] = lambda: "cleaning up"
        """What the run is busy with, for the "still reverting" line."""
        self.ack_path: Path | None = None
        self.err_fd: int | None = None
        """Where messages go: a copy of stderr taken before pytest captured it (else sys.stderr)."""
        self._shields: list[str] = []
        self._held: dict[str, str] = {}
        self._previous: dict[int, Any] = {}
        self._installs = 0

    # -- installation ------------------------------------------------------------------------
    def install(self, *, ack_path: Path | None = None) -> None:
        """Handle SIGINT and SIGTERM from now on (main thread only; elsewhere a no-op).

        Nests (a pytest session run in-process inside another, as ``pytester`` does): only
        the outermost install resets the state and only its uninstall restores the
        previous handlers.
        """
        if threading.current_thread() is not threading.main_thread():
            return
        self._installs += 1
        if self._installs > 1:
            return
        self.first = self.first_at = None
        self.raised, self.count = False, 0
        self._shields.clear()
        self._held.clear()
        self.ack_path = ack_path
        for sig in HANDLED:
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def uninstall(self) -> None:
        if threading.current_thread() is not threading.main_thread() or self._installs == 0:
            return
        self._installs -= 1
        if self._installs:
            return
        for sig, prev in self._previous.items():
            signal.signal(sig, prev)
        self._previous.clear()

    @property
    def installed(self) -> bool:
        return bool(self._previous)

    # -- shields -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def shielded(self, what: str) -> Iterator[None]:
        """Run the block without interruption; a signal received meanwhile is raised as
        :class:`KeyboardInterrupt` when it ends (only in the main thread, where signals
        are delivered; elsewhere this is a plain block)."""
        if not self.installed or threading.current_thread() is not threading.main_thread():
            yield
            return
        self._shields.append(what)
        try:
            yield
        except BaseException as exc:
            self._shields.pop()
            if self._due():
                self.raised = True
                raise KeyboardInterrupt(signal_name(self.first or signal.SIGINT)) from exc
            raise
        self._shields.pop()
        self.raise_if_due()

    def hold(self, key: str, what: str) -> None:
        """Shield from now until :meth:`release` with the same *key* (main thread only)."""
        if self.installed and threading.current_thread() is threading.main_thread():
            self._held[key] = what

    def release(self, key: str) -> None:
        """End a held shield; raises the deferred :class:`KeyboardInterrupt` if one is due."""
        if self._held.pop(key, None) is not None:
            self.raise_if_due()

    def busy_with(self) -> list[str]:
        """The shielded sections in progress, outermost first."""
        return [*self._held.values(), *self._shields]

    def _due(self) -> bool:
        return self.first is not None and not self.raised and not self._shields and not self._held

    def raise_if_due(self) -> None:
        if self._due():
            self.raised = True
            raise KeyboardInterrupt(signal_name(self.first or signal.SIGINT))

    # -- the handler ---------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        self._ack(signum)
        name = signal_name(signum)
        if self.first is None:
            self.first, self.first_at = signum, time.monotonic()
            if self._shields or self._held:
                self.say(f"gameday: {name}: finishing {'; '.join(self.busy_with())} first, then stopping "
                         "(a revert is never interrupted)")
                return
            self.say(f"gameday: {name}: reverting every fault and stopping the run; a second signal "
                     "will not interrupt that")
            self.raised = True
            raise KeyboardInterrupt(name)
        self.say(f"gameday: {name} again: still reverting: {self.describe()}; waiting for it to finish")

    def say(self, line: str) -> None:
        """Write *line* where the user sees it now, even while pytest captures output."""
        data = (line + "\n").encode(errors="replace")
        with contextlib.suppress(OSError, ValueError):
            if self.err_fd is not None:
                os.write(self.err_fd, data)
                return
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def _ack(self, signum: int) -> None:
        if self.ack_path is None:
            return
        with contextlib.suppress(OSError):
            fd = os.open(self.ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{signum} {time.monotonic():.6f}\n".encode())
            finally:
                os.close(fd)


def ledger_pending(path: Path, runner_pid: int | None = None) -> list[str]:
    """``kind region`` of each pending entry of the ledger at *path* (only *runner_pid*'s,
    if given). Read without the ledger's lock and never raising: called from signal
    handlers and from ``gameday drill`` while pytest writes the ledger, where waiting
    or a traceback would be worse than an empty answer."""
    try:
        data = json.loads(path.read_text())
        entries = data.get("pending", []) if isinstance(data, dict) else []
        return [f"{e.get('kind', '?')} {e.get('region') or ''}".strip() for e in entries
                if isinstance(e, dict) and (runner_pid is None or e.get("runner_pid") == runner_pid)]
    except (OSError, ValueError, AttributeError):
        return []


INTERRUPTS = Interrupts()
"""The process's one instance: signal dispositions are per process, not per session."""
