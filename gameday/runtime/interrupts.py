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
* **Every later signal only reports**: "still reverting: <what>" on stderr (or, when
  nothing is being reverted, that the run is stopping). The revert and the teardown then
  always finish; ``kill -9`` stays the way out, and is safe, since every process of the
  run dies with it (:mod:`gameday.runtime.procs`).
* **A signal is never lost.** The :class:`KeyboardInterrupt` can be swallowed: raised
  while a finalizer (``__del__``) runs, Python prints "Exception ignored in ..." and goes
  on. So a signal that arrives inside a ``__del__`` is not raised there but delivered
  again a moment later, outside it; one swallowed elsewhere (a weakref callback) is noticed
  (:func:`sys.unraisablehook`), said, and delivered again; the drill's phase boundaries
  raise it again (:meth:`Interrupts.checkpoint`); and no fault is injected once a signal
  has arrived, whatever happened to its exception (:meth:`Interrupts.refuse_injection`).

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
from types import CodeType, FrameType, TracebackType
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

ACK_ENV = "GAMEDAY_SIGNAL_ACK"
"""Set by ``gameday drill``: a file pytest appends ``<signum> <monotonic time>`` to for each
signal it receives, so the wrapper forwards only signals that did not reach pytest; and
``ready <monotonic time>`` once its handlers are installed (before that, ``gameday drill``
starts pytest with SIGINT ignored and stops it itself: nothing has been started yet)."""

READY = "ready"

STOP_ENV = "GAMEDAY_STOP_FILE"
"""Set by ``gameday drill``: the file it writes ``<signum> <monotonic time>`` to the moment a
signal reaches it, before anything else (a signal sent to the wrapper alone reaches pytest
only when it is forwarded, up to a second later). Every process of the run (pytest-xdist
workers too) reads it at the injection gate (:meth:`Interrupts.refuse_injection`) and at the
drill's phase boundaries, so a stop that came before an injection call means no injection."""

INJECT = "inject"
"""The ack file's line for an injection call about to be made: ``inject <monotonic time>
<label>``; ``gameday drill`` names any made after the signal in its closing line."""


def read_stop(path: str | os.PathLike[str] | None = None) -> tuple[int, float] | None:
    """The stop ``gameday drill`` wrote (signal, its monotonic time), or None: none yet, or no
    stop file in this run (:data:`STOP_ENV`). Never raises: called right before an injection."""
    where = path if path is not None else os.environ.get(STOP_ENV)
    if not where:
        return None
    try:
        with open(where, "rb") as fh:
            sig_s, t_s = fh.read(64).split()[:2]
        return int(sig_s), float(t_s)
    except (OSError, ValueError):
        return None


def write_stop(path: Path, signum: int, t: float) -> None:
    """Write the stop for :func:`read_stop` (one small write: a reader sees it whole or not at
    all; the first stop stays)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, f"{signum} {t:.6f}\n".encode())
        finally:
            os.close(fd)


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
        """The first signal's KeyboardInterrupt has been raised (and not seen swallowed since)."""
        self.swallowed = 0
        """How many times it was seen swallowed (a finalizer's "Exception ignored in")."""
        self.count = 0
        self.installed_at = time.monotonic()
        self.describe: Callable[[], str] = lambda: "; ".join(self.busy_with())
        """What is being reverted or stopped, for the "still reverting" line; empty: nothing."""
        self.ack_path: Path | None = None
        self.err_fd: int | None = None
        """Where messages go: a copy of stderr taken before pytest captured it (else sys.stderr)."""
        self._shields: list[str] = []
        self._held: dict[str, str] = {}
        self._previous: dict[int, Any] = {}
        self._installs = 0
        self._previous_hook: Callable[[Any], object] | None = None
        self._redelivering = False
        self._redeliver_timer: threading.Timer | None = None
        self._said_finalizer = False

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
        self.raised, self.count, self.swallowed = False, 0, 0
        self._redelivering = self._said_finalizer = False
        self.installed_at = time.monotonic()
        self._shields.clear()
        self._held.clear()
        self.ack_path = ack_path
        for sig in HANDLED:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        # `gameday drill` starts pytest with SIGINT ignored until now (so an early Ctrl-C
        # prints no traceback): say that from here on a signal is handled.
        self._append_ack(f"{READY} {time.monotonic():.6f}")
        self.watch_unraisable()

    def uninstall(self) -> None:
        if threading.current_thread() is not threading.main_thread() or self._installs == 0:
            return
        self._installs -= 1
        if self._installs:
            return
        if self._redeliver_timer is not None:
            self._redeliver_timer.cancel()
        for sig, prev in self._previous.items():
            signal.signal(sig, prev)
        self._previous.clear()
        self.unwatch_unraisable()

    def watch_unraisable(self) -> None:
        """Notice a KeyboardInterrupt of ours that a finalizer swallowed (chained in front of
        the current :func:`sys.unraisablehook`; pytest installs its own for the session in its
        ``pytest_configure``, so the plugin calls this again once the session starts)."""
        if sys.unraisablehook is self._unraisable or not self.installed:
            return
        self._previous_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable

    def unwatch_unraisable(self) -> None:
        if sys.unraisablehook is self._unraisable and self._previous_hook is not None:
            sys.unraisablehook = self._previous_hook
        self._previous_hook = None

    def _unraisable(self, unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and self.first is not None and self.installed:
            self.swallowed += 1
            self.raised = False  # due again: re-delivered below, raised when its shield ends, or at a checkpoint
            where = "a finalizer"
            with contextlib.suppress(Exception):  # e.g. Finalizer.__del__ (repr() is user code: last resort)
                obj = unraisable.object
                where = str(getattr(obj, "__qualname__", None) or repr(obj))[:120]
            self.say(f"gameday: the {signal_name(self.first)} was swallowed by {where} (\"Exception ignored\"); "
                     "raising it again as soon as that has run; nothing is injected after it")
            self._redeliver_later()
            return  # said in one line: the finalizer's traceback of a Ctrl-C would only be noise
        previous = self._previous_hook or sys.__unraisablehook__
        previous(unraisable)

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

    def since(self) -> str:
        """When the first signal arrived, as ``t+S s`` since the handlers were installed."""
        return f"t+{(self.first_at or time.monotonic()) - self.installed_at:.2f} s"

    def adopt_stop(self) -> bool:
        """Take a stop ``gameday drill`` wrote (:data:`STOP_ENV`) as this process's first
        signal, if none has arrived yet: the signal itself may still be on its way (forwarded
        a second later, or never, to a pytest-xdist worker). Acknowledged like a received
        signal, so the wrapper need not forward it. True when a signal or stop is in."""
        if self.first is not None:
            return True
        stop = read_stop()
        if stop is None:
            return False
        self.first, self.first_at = stop[0], min(stop[1], time.monotonic())
        self.count += 1
        self._ack(stop[0])
        return True

    def note_injection(self, what: str) -> None:
        """Say (to ``gameday drill``, through the ack file) that an injection call is being made now."""
        self._append_ack(f"{INJECT} {time.monotonic():.6f} {what}")

    def checkpoint(self, where: str) -> None:
        """A phase boundary on the way forward (the federation up, the load started, steady
        state reached): once a signal has arrived, raise it here, even if it was raised
        before: reaching a step forward after it means its exception was swallowed.
        Inside a shield this waits for the shield's end, as the signal does."""
        self.adopt_stop()
        if self.first is None or self._shields or self._held:
            return
        self.raised = True
        self.watch_unraisable()  # something may have replaced the hook since
        raise KeyboardInterrupt(f"{signal_name(self.first)} (arrived at {self.since()}; stopping at: {where})")

    def surfaced_as(self, exc: BaseException) -> KeyboardInterrupt:
        """The first signal's :class:`KeyboardInterrupt`, for *exc*, an exception that came up
        in its place once the signal had arrived: CPython 3.11 turns a KeyboardInterrupt raised
        inside ``ast.parse`` (pytest formats tracebacks and rewrites asserts with it) into
        ``SystemError: AST constructor recursion depth mismatch``, and code that caught the
        interrupt may raise something else. Raise it ``from exc``; its message names *exc*.
        Call only once a signal has arrived."""
        self.raised = True
        text = next(iter(str(exc).splitlines()), "").strip()
        what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        return KeyboardInterrupt(f"{signal_name(self.first or signal.SIGINT)} (arrived at {self.since()}; "
                                 f"it surfaced as {what[:300]})")

    def refuse_injection(self, what: str) -> None:
        """The absolute gate before any fault is injected: no injection once a signal has
        arrived, whatever became of its exception, shielded or not, nor once ``gameday drill``
        has written its stop (:data:`STOP_ENV`), even before the signal reached this process.

        Raises:
            KeyboardInterrupt: a signal has arrived (the message names it and when).
        """
        if not self.adopt_stop() or self.first is None:
            return
        message = f"gameday: not injecting {what}: {signal_name(self.first)} arrived at {self.since()}"
        self.say(message)
        self.raised = True
        raise KeyboardInterrupt(message)

    # -- the handler ---------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._redelivering:  # our own re-delivery of the first signal (see _deliver)
            self._redelivering = False
            if not self.raised:
                self._deliver(frame)
            return
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
            self._deliver(frame)
            return
        if self._due():  # the first one's exception is not raised yet (a finalizer ran): this one stops the run
            self.say(f"gameday: {name} again: the first {signal_name(self.first)} has not stopped the run yet "
                     "(it came inside a finalizer); stopping now")
            self._deliver(frame)
            return
        busy = self.describe()
        if busy:
            self.say(f"gameday: {name} again: still reverting: {busy}; waiting for it to finish")
        else:
            self.say(f"gameday: {name} again: nothing is being reverted and no fault of this run is in effect; "
                     "the run is stopping (nothing is injected after a signal)")

    def _deliver(self, frame: FrameType | None) -> None:
        """Raise the first signal's KeyboardInterrupt here, unless *frame* runs inside a
        finalizer: Python would discard it there ("Exception ignored in ..."), so it is
        delivered again a moment later, until it lands outside one."""
        if self._shields or self._held:
            return  # raised when the shield ends
        where = _finalizer(frame, self._unraisable.__code__)
        if where is not None:
            if not self._said_finalizer:
                self._said_finalizer = True
                self.say(f"gameday: the {signal_name(self.first or signal.SIGINT)} arrived inside {where}, a "
                         "finalizer, where Python would discard it; raising it as soon as that has run")
            self.raised = False
            self._redeliver_later()
            return
        self.raised = True
        raise KeyboardInterrupt(signal_name(self.first or signal.SIGINT))

    def _redeliver_later(self) -> None:
        """Send the first signal to this process again in 10 ms (from a timer thread: the
        main thread runs the handler at its next step, outside the finalizer by then)."""
        if self._redeliver_timer is not None and self._redeliver_timer.is_alive():
            return
        signum = self.first or signal.SIGINT

        def again() -> None:
            if self.installed and not self.raised:  # after uninstall it would hit the default action
                self._redelivering = True
                os.kill(os.getpid(), signum)

        self._redeliver_timer = threading.Timer(0.01, again)
        self._redeliver_timer.daemon = True
        self._redeliver_timer.start()

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
        self._append_ack(f"{signum} {time.monotonic():.6f}")

    def _append_ack(self, line: str) -> None:
        if self.ack_path is None:
            return
        with contextlib.suppress(OSError):
            fd = os.open(self.ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{line}\n".encode())
            finally:
                os.close(fd)


def give_every_frame_a_line(exc: BaseException) -> None:
    """Give each traceback entry of *exc* (and of the exceptions it chains) a line number.

    A signal can land on an instruction CPython keeps no line for (3.11: part of an
    exception table's cleanup); the entry for that frame then has ``tb_lineno`` None, and
    pytest, rendering the interrupt for its "KeyboardInterrupt" summary, fails with a
    ``TypeError`` of its own: a 60-line traceback after a clean stop, and exit status 1
    instead of 2. The entry is rebuilt on the frame's current line (or its first line), so
    the frame stays in the report.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb, prev = e.__traceback__, None
        while tb is not None:
            if tb.tb_lineno is None:  # typeshed: int | None (None on an instruction without a line)
                frame = tb.tb_frame
                line = frame.f_lineno or frame.f_code.co_firstlineno
                tb = TracebackType(tb.tb_next, frame, tb.tb_lasti, line)
                if prev is None:
                    e.__traceback__ = tb
                else:
                    prev.tb_next = tb
            prev, tb = tb, tb.tb_next
        todo += [e.__cause__, e.__context__]


def _finalizer(frame: FrameType | None, hook: CodeType) -> str | None:
    """The finalizer *frame* runs in (``Finalizer.__del__``, or the unraisable hook *hook*),
    if any, looking up the stack; None outside one."""
    depth = 0
    while frame is not None and depth < 1000:
        code = frame.f_code
        if code.co_name == "__del__" or code is hook:
            return code.co_qualname
        frame, depth = frame.f_back, depth + 1
    return None


def ledger_pending(path: Path, runner_pid: int | None = None) -> list[str]:
    """``kind region`` of each pending entry of the ledger at *path* (only *runner_pid*'s,
    if given: entries it wrote, or its pytest-xdist workers wrote, their ``session_pid``).
    Read without the ledger's lock and never raising: called from signal handlers and from
    ``gameday drill`` while pytest writes the ledger, where waiting or a traceback would be
    worse than an empty answer."""
    try:
        data = json.loads(path.read_text())
        entries = data.get("pending", []) if isinstance(data, dict) else []
        return [f"{e.get('kind', '?')} {e.get('region') or ''}".strip() for e in entries
                if isinstance(e, dict) and (runner_pid is None or runner_pid in (e.get("runner_pid"),
                                                                                 e.get("session_pid")))]
    except (OSError, ValueError, AttributeError):
        return []


INTERRUPTS = Interrupts()
"""The process's one instance: signal dispositions are per process, not per session."""
