"""Command faults: a fault given as an inject command and its exact inverse, run as processes.

A profile (:mod:`gameday.targets.profile`) declares each fault of a federation the harness did not
build as two commands. Each runs without a shell unless the profile asks for one, in the
profile's directory, with a timeout (the whole process group is killed when it expires), its
output captured and kept (:class:`CommandRun`, logged, and in every error message):

- a failed injection runs the revert anyway (the action may have half happened) and raises
  :class:`~gameday.errors.FaultError` with both outputs;
- a failed revert raises :class:`~gameday.errors.RestoreIncomplete` with the command and its
  output (the ledger keeps the entry; ``gameday restore`` runs the recorded revert again).

The revert must be idempotent - safe to run when the fault is not (or only half) in effect -
because of those two paths; that is the profile author's job. The harness itself runs it at
most once per injection (the external target marks the injection's ledger params reverted).

:class:`CommandSpec` is plain data that survives JSON, so the ledger records the exact
revert command before the injection runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gameday.errors import FaultError, RestoreIncomplete

log = logging.getLogger(__name__)

OUTPUT_LIMIT = 4000
"""Characters of a command's stdout and of its stderr kept (the tail: errors come last)."""


@dataclass(frozen=True)
class CommandSpec:
    """One command: ``argv`` run directly, or ``command`` run by ``/bin/sh -c``.

    Attributes:
        argv: program and arguments (no shell); empty when *command* is used.
        command: a shell command line; only with ``shell=True``.
        shell: run *command* through ``/bin/sh -c``.
        timeout: seconds before the command's process group is killed (it then failed).
        env: extra environment variables.
        cwd: directory to run in (None: the harness's).
    """

    argv: tuple[str, ...] = ()
    command: str | None = None
    shell: bool = False
    timeout: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def __post_init__(self) -> None:
        if self.shell != (self.command is not None) or (not self.shell and not self.argv):
            raise ValueError("a command is argv (no shell) or shell=True with command")

    @property
    def display(self) -> str:
        """The command as a user would type it: ``nginx -s stop`` or ``sh -c '...'``."""
        return f"sh -c {shlex.quote(self.command or '')}" if self.shell else shlex.join(self.argv)

    def describe(self) -> str:
        """For plans and messages: the command, its timeout and where it runs."""
        return f"`{self.display}` (timeout {self.timeout:g} s{f', in {self.cwd}' if self.cwd else ''})"

    def to_json(self) -> dict[str, Any]:
        return {"argv": list(self.argv), "command": self.command, "shell": self.shell, "timeout": self.timeout,
                "env": dict(self.env), "cwd": self.cwd}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CommandSpec:
        """The inverse of :meth:`to_json` (a ledger entry). Raises ``ValueError``/``TypeError``."""
        argv, env = data.get("argv", []), data.get("env", {})
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise TypeError(f"argv: expected a list of strings, got {argv!r:.80}")
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise TypeError(f"env: expected a mapping of strings, got {env!r:.80}")
        command, cwd, timeout = data.get("command"), data.get("cwd"), data.get("timeout", 30.0)
        if command is not None and not isinstance(command, str):
            raise TypeError(f"command: expected a string, got {command!r:.80}")
        if cwd is not None and not isinstance(cwd, str):
            raise TypeError(f"cwd: expected a string, got {cwd!r:.80}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 3600:
            raise TypeError(f"timeout: expected seconds > 0, got {timeout!r:.80}")
        return cls(tuple(argv), command, bool(data.get("shell", False)), float(timeout), dict(env), cwd)


@dataclass(frozen=True)
class CommandRun:
    """What one run of a command did."""

    spec: CommandSpec
    returncode: int | None
    """None: it was killed at its timeout, or could not be started."""
    stdout: str
    stderr: str
    seconds: float
    error: str | None = None
    """Why it did not run or did not finish (``timed out after 10 s``, ``not found on PATH``)."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """``exit 1 after 0.02 s; stderr: ...; stdout: ...`` (output tails, for messages)."""
        how = self.error or (f"exit {self.returncode}" if self.returncode is not None and self.returncode >= 0
                             else f"killed by signal {-(self.returncode or 0)}")
        parts = [f"{how} after {self.seconds:.2f} s"]
        for name, text in (("stderr", self.stderr.strip()), ("stdout", self.stdout.strip())):
            if text:
                parts.append(f"{name}: {text[-600:]}")
        if len(parts) == 1:
            parts.append("no output")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """For the report (``commands.jsonl``)."""
        return {"command": self.spec.display, "returncode": self.returncode, "seconds": round(self.seconds, 3),
                "error": self.error, "stdout": self.stdout, "stderr": self.stderr}


def _tail(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")[-OUTPUT_LIMIT:]


def run_command(spec: CommandSpec) -> CommandRun:
    """Run *spec* to completion or its timeout; never raises for a failing command.

    The command gets its own process group, so a timeout kills what it started too (a shell
    pipeline, a script's children); its stdin is closed (a command that prompts fails
    instead of hanging).
    """
    argv = ["/bin/sh", "-c", spec.command or ""] if spec.shell else list(spec.argv)
    env = {**os.environ, **spec.env}
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, cwd=spec.cwd, start_new_session=True)
    except FileNotFoundError:
        why = (f"{argv[0]!r} not found" + ("" if "/" in argv[0] else " on PATH")) if spec.cwd is None or \
            Path(spec.cwd).is_dir() else f"directory {spec.cwd} does not exist"
        return CommandRun(spec, None, "", "", time.monotonic() - t0, f"cannot run: {why}")
    except OSError as exc:
        return CommandRun(spec, None, "", "", time.monotonic() - t0, f"cannot run: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(timeout=spec.timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a child that left the group still holds the pipes
            proc.kill()
            out, err = b"", b""
        return CommandRun(spec, None, _tail(out), _tail(err), time.monotonic() - t0,
                          f"timed out after {spec.timeout:g} s (killed)")
    return CommandRun(spec, proc.returncode, _tail(out), _tail(err), time.monotonic() - t0)


class CommandFault:
    """One fault of a profile on one region (or none): its two commands and whether it is in effect.

    Args:
        what: ``gateway_down b``, for messages.
        inject, revert: the two commands.
        on_run: called with every :class:`CommandRun` (the target keeps them for the report).
    """

    def __init__(self, what: str, inject: CommandSpec, revert: CommandSpec, *,
                 on_run: Callable[[str, str, CommandRun], object] | None = None) -> None:
        self.what = what
        self.inject_cmd = inject
        self.revert_cmd = revert
        self._on_run = on_run
        self.runs: list[CommandRun] = []

    def _run(self, spec: CommandSpec, phase: str) -> CommandRun:
        log.info("%s: %s %s", self.what, phase, spec.describe())
        run = run_command(spec)
        self.runs.append(run)
        level = logging.INFO if run.ok else logging.WARNING
        log.log(level, "%s: %s `%s`: %s", self.what, phase, spec.display, run.describe())
        if self._on_run is not None:
            self._on_run(phase, self.what, run)
        return run

    def inject(self) -> CommandRun:
        """Run the injection; on failure run the revert anyway and raise.

        Raises:
            FaultError: the injection failed (non-zero exit, timeout, not runnable); the
                message has its output and what the revert that followed did.
        """
        run = self._run(self.inject_cmd, "inject")
        if run.ok:
            return run
        undo = self._run(self.revert_cmd, "revert")
        after = ("the revert then ran and succeeded" if undo.ok else
                 f"the revert {self.revert_cmd.describe()} then failed too: {undo.describe()}; the federation may "
                 "be left broken: run it by hand or `gameday restore`")
        raise FaultError(f"injecting {self.what} failed: {self.inject_cmd.describe()}: {run.describe()}; "
                         "the action may have half happened, so "
                         f"{after}")

    def revert(self) -> CommandRun:
        """Run the revert.

        Raises:
            RestoreIncomplete: it failed; the message has the command and its output.
        """
        run = self._run(self.revert_cmd, "revert")
        if not run.ok:
            raise RestoreIncomplete(f"reverting {self.what} failed: {self.revert_cmd.describe()}: {run.describe()}")
        return run
