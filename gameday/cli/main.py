"""The ``gameday`` command.

``gameday up``       bring the local federation up, print its status, stop on Ctrl-C.
``gameday drill``    run the headline random-gateway drill on the default target (via pytest).
``gameday restore``  revert every fault a killed runner left in the ledger.
``gameday down``     stop every federation still running under the reports directory.
``gameday init``     scaffold game days in your own project.
``gameday report``   the HTML report of a run's Allure results (Allure, or a self-contained page).
``gameday inconclusive``  the tests a JUnit report records as inconclusive (to rerun them alone).

``gameday drill`` runs pytest as its child and waits for it, however long the revert
takes: Ctrl-C (which the terminal sends to both), SIGTERM and SIGHUP (a closed terminal)
reach pytest, which reverts and stops; a second Ctrl-C shows what is still being
reverted; the exit status after a signal is 128 + its number, never 0. A signal before
pytest has installed its handlers stops it quietly (nothing was started yet). If
``gameday drill`` is killed, pytest gets SIGTERM and still reverts; if pytest is killed
(kill -9), the exit says what it left in the ledger and the command that reverts it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from gameday import __version__
from gameday.errors import GamedayError
from gameday.runtime import settings
from gameday.runtime.interrupts import (
    ACK_ENV,
    HANDLED,
    INJECT,
    READY,
    STOP_ENV,
    ledger_pending,
    signal_name,
    write_stop,
)
from gameday.runtime.procs import RUN_DIR_ENV, run_token, spawn
from gameday.verdicts.harness import EXIT_INCONCLUSIVE

DEFAULT_REPORTS = Path("reports")

ACK_GRACE = 1.0
"""Seconds pytest has to acknowledge a signal that reached the wrapper before the
wrapper forwards it (a signal to the whole process group reaches pytest by itself)."""


def _cmd_up(args: argparse.Namespace) -> int:
    from gameday.model.topology import load_topology  # noqa: PLC0415
    from gameday.targets.local.federation import LocalFederation  # noqa: PLC0415

    topology = load_topology(args.topology)
    workdir = Path(args.workdir) if args.workdir else DEFAULT_REPORTS / ".gameday" / "up"
    fed = LocalFederation.from_topology(topology, workdir)
    stop = threading.Event()

    def _on_signal(signum: int, frame: object) -> None:
        stop.set()

    for sig in HANDLED:
        signal.signal(sig, _on_signal)
    t0 = time.monotonic()
    print(f"starting {len(fed.components)} processes for {len(topology.regions)} regions ...", flush=True)
    fed.start()
    try:
        print(f"ready in {time.monotonic() - t0:.2f} s\n", flush=True)
        print(fed.status_table(), flush=True)
        print(f"\nlogs: {fed.logdir}", flush=True)
        print(f"admin token: {fed.admin_token_file} (send it as `Authorization: Bearer <token>` on /admin calls)",
              flush=True)
        if args.seconds is not None:
            stop.wait(args.seconds)
        else:
            print("press Ctrl-C to stop", flush=True)
            while not stop.wait(1.0):
                pass
    finally:
        fed.stop()
        print("stopped: no federation process left running", flush=True)
    return 0


DRILLS = {
    "gateway_down": ("test_gateway_outage.py", "test_random_gateway_outage"),
    "region_blackhole": ("test_region_blackhole.py", "test_region_blackhole"),
    "store_down": ("test_store_down.py", "test_store_primary_lost"),
    "store_isolated": ("test_store_isolated.py", "test_store_primary_isolated_and_back"),
}
"""``gameday drill --fault NAME``: the suite drill of each fault it offers (file, test)."""


def _headline_test(fault: str = "gateway_down") -> str:
    """The suite's drill of *fault* (the headline drill by default) as a pytest node id;
    `gameday drill` runs exactly that test through pytest. The suites ship with gameday
    (``gameday.suites``), so this works in any directory."""
    from gameday.runtime.resources import suites_dir  # noqa: PLC0415

    name, func = DRILLS[fault]
    test = suites_dir() / "gameday" / name
    if not test.is_file():
        raise GamedayError(f"{test} is missing: the installed gameday is incomplete; reinstall it with pip")
    return f"{test}::{func}"


def _project_config(start: Path) -> Path | None:
    """The pytest configuration of the project `gameday drill` runs in (the way pytest itself
    looks from the current directory up), so the project's gameday options apply."""
    for d in (start, *start.parents):
        for name, marker in (("pytest.ini", ""), ("pyproject.toml", "[tool.pytest.ini_options]"),
                             ("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]")):
            f = d / name
            try:
                if f.is_file() and marker in f.read_text(encoding="utf-8", errors="replace"):
                    return f
            except OSError:
                continue
    return None


def _cmd_drill(args: argparse.Namespace, extra: list[str]) -> int:
    if args.test and args.fault:
        raise GamedayError("--test and --fault: give one (--fault picks the suite's drill of that fault)")
    nodeid = args.test or _headline_test(args.fault or "gateway_down")
    reports = Path(args.reports).resolve()
    # One directory per `gameday drill`: two drills from one checkout never share output.
    run_dir = reports / "runs" / f"{run_token()}-drill"
    try:
        run_dir.mkdir(parents=True)
    except OSError as exc:
        raise GamedayError(f"cannot create the run directory {run_dir} (--reports {args.reports}): {exc}") from exc
    junit, allure = run_dir / "junit.xml", run_dir / "allure-results"
    argv = [sys.executable, "-m", "pytest", nodeid, "-p", "no:cacheprovider",
            "-p", "no:locust", f"--gameday-reports={reports}", f"--junitxml={junit}",
            f"--alluredir={allure}", "-o", "console_output_style=classic"]
    if args.seed is not None:
        argv.append(f"--gameday-seed={args.seed}")
    if args.topology:
        argv.append(f"--gameday-topology={Path(args.topology).resolve()}")
    if args.profile:  # a federation gameday did not build, known by its profile
        argv += ["--gameday-target=external", f"--gameday-profile={Path(args.profile).resolve()}"]
    if args.rounds is not None:
        argv.append(f"--gameday-rounds={args.rounds}")
    if args.round_jitter is not None:
        argv.append(f"--gameday-round-jitter={args.round_jitter}")
    if args.prediction_slack is not None:
        argv.append(f"--gameday-prediction-slack={args.prediction_slack}")
    if args.accept_observed_ttl:
        argv.append("--gameday-accept-observed-ttl")
    config = _project_config(Path.cwd())
    if config is not None:  # the project's configuration (its gameday options, markers) applies
        argv += ["-c", str(config), f"--rootdir={config.parent}"]
    argv += extra
    print("running:", " ".join(argv[2:]), flush=True)
    print(f"run directory: {run_dir}", flush=True)
    env = {**os.environ, RUN_DIR_ENV: str(run_dir), ACK_ENV: str(run_dir / "signals.log"),
           STOP_ENV: str(run_dir / "stop")}
    rc = _Supervisor(argv, env, reports / ".gameday" / "ledger.json", run_dir / "signals.log",
                     run_dir / "stop").run()
    for line in _outputs(run_dir, junit, allure):
        print(line, flush=True)
    return rc


def _outputs(run_dir: Path, junit: Path, allure: Path) -> list[str]:
    """Where the run's files are, naming only files that exist. A run that wrote nothing
    (a usage error, pytest stopped before it started) leaves no empty directory behind."""
    try:
        if {p.name for p in run_dir.iterdir()} <= {"signals.log", "stop"}:  # the wrapper's own files only
            (run_dir / "signals.log").unlink(missing_ok=True)
            (run_dir / "stop").unlink(missing_ok=True)
            run_dir.rmdir()
            return [f"run directory: nothing was written; removed {run_dir}"]
    except OSError:
        pass
    lines = []
    if junit.is_file():
        lines.append(f"JUnit: {junit}")
    if allure.is_dir() and any(allure.iterdir()):
        lines.append(f"Allure results: {allure}")
    if not (run_dir / "run.json").is_file():  # else pytest's summary named the directory already
        lines.append(f"run directory: {run_dir} (no run.json: no drill finished)")
    return lines


@dataclass
class _Ack:
    sig: int
    t: float
    used: bool = False


class _Supervisor:
    """Runs pytest as a child, relays signals to it exactly once, and waits for it.

    A signal to the whole process group (the terminal's Ctrl-C, ``kill -TERM -PGID``)
    reaches pytest by itself; one sent to this process alone does not. The first signal is
    written to *stop_path* (:data:`gameday.runtime.interrupts.STOP_ENV`) before anything else:
    every process of the run reads it right before each injection call, so nothing is injected
    after it, even before pytest gets the signal. pytest appends each signal it receives (and each
    injection call it makes) to *ack_path* (:data:`gameday.runtime.interrupts.ACK_ENV`); a signal
    pytest did not acknowledge within :data:`ACK_GRACE` is forwarded.
    """

    def __init__(self, argv: list[str], env: dict[str, str], ledger: Path, ack_path: Path,
                 stop_path: Path | None = None) -> None:
        self.argv, self.env = argv, env
        self.ledger = ledger
        self.ack_path = ack_path
        self.stop_path = stop_path
        self.first_at: float | None = None
        """When the first signal reached this process (monotonic, as pytest's ack lines)."""
        self.injections: list[tuple[float, str]] = []
        """(monotonic time, label) of each injection call pytest made."""
        self.proc: subprocess.Popen[bytes] | None = None
        self.received: list[tuple[int, float]] = []
        """Signals not yet matched to an acknowledgement or forwarded."""
        self.acks: list[_Ack] = []
        self._ack_offset = 0
        self.forwarded: dict[int, float] = {}
        """Signal -> when it was last forwarded (its own acknowledgement is not a match)."""
        self.expect: dict[int, int] = {}
        self.count = 0
        self.first: int | None = None
        self.in_effect: list[str] = []
        """Ledger entries of pytest's when the first signal came."""
        self.ready = False
        """pytest has installed its signal handlers (its ``ready`` line in *ack_path*)."""
        self.stopped_early = False
        """This process stopped pytest itself: a signal came before pytest was ready."""
        self.announced = False
        """The first signal's line was written."""

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in HANDLED}
        try:
            # SIGTERM if this process dies, so pytest still reverts (e.g. `kill -9` of the wrapper).
            # SIGINT ignored until pytest's handlers are in (its `ready` line): a Ctrl-C while it
            # imports its plugins would print a traceback; this process stops it instead.
            self.proc = spawn(self.argv, death_signal=signal.SIGTERM, ignore=(signal.SIGINT,), env=self.env)
            while True:
                try:
                    rc = self.proc.wait(0.05)
                    break
                except subprocess.TimeoutExpired:
                    self._relay()
        finally:
            for sig, prev in previous.items():
                signal.signal(sig, prev)
        return self._report_exit(rc)

    def _say(self, line: str) -> None:
        # os.write, not print: this also runs in the signal handler, which may have
        # interrupted a print (a buffered stream cannot be re-entered).
        with contextlib.suppress(OSError):
            os.write(2, (line + "\n").encode(errors="replace"))

    def _pending(self) -> list[str]:
        return ledger_pending(self.ledger, self.proc.pid) if self.proc is not None else []

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self.first is None and self.stop_path is not None:
            write_stop(self.stop_path, signum, now)  # first: the injection gate reads it
        self.count += 1
        self.received.append((signum, now))
        pid = self.proc.pid if self.proc is not None else "?"
        if self.first is None:
            self.first, self.first_at = signum, now
            self.in_effect = self._pending()
            if self.ready:  # else pytest has started nothing yet: _relay stops it, _report_exit says so
                self._announce()
            return
        if not self.ready:
            return  # being stopped already (_relay)
        pending = self._pending()
        self._say(f"gameday: {signal_name(signum)} again: "
                  + (f"still reverting: {', '.join(pending)} (in the ledger {self.ledger})" if pending else
                     "nothing of this run is pending in the ledger; pytest is finishing its teardown (a "
                     "steady-state check after a revert, stopping the load and the federation)")
                  + f"; waiting for pytest (pid {pid})")

    def _announce(self) -> None:
        self.announced = True
        pid = self.proc.pid if self.proc is not None else "?"
        self._say(f"gameday: {signal_name(self.first or signal.SIGINT)}: pytest (pid {pid}) reverts every fault and "
                  "stops the run; waiting for it, however long it takes (Ctrl-C again shows what is left)")

    def _read_acks(self) -> None:
        try:
            with self.ack_path.open("rb") as fh:
                fh.seek(self._ack_offset)
                data = fh.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        self._ack_offset += end
        for line in data[:end].splitlines():
            if line.startswith(READY.encode()):
                self.ready = True
                continue
            if line.startswith(INJECT.encode()):
                with contextlib.suppress(ValueError, IndexError):
                    _, when, label = line.decode(errors="replace").split(maxsplit=2)
                    self.injections.append((float(when), label))
                continue
            try:
                sig_s, t_s = line.split()
                ack = _Ack(int(sig_s), float(t_s))
            except ValueError:
                continue
            if self.expect.get(ack.sig, 0) and ack.t >= self.forwarded.get(ack.sig, 0.0):
                self.expect[ack.sig] -= 1  # the acknowledgement of a signal we forwarded
                ack.used = True
            self.acks.append(ack)

    def _relay(self) -> None:
        if self.proc is None:
            return
        self._read_acks()
        if self.first is not None and self.ready and not self.announced:
            self._announce()
        if self.received and not self.ready:
            # pytest is still importing its plugins (SIGINT ignored, nothing started): stop it
            # quietly; SIGTERM's default action, or its handler if it got ready meanwhile.
            if not self.stopped_early:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGTERM)
                self.stopped_early = True
            self.received.clear()
            return
        now = time.monotonic()
        for event in list(self.received):
            sig, t = event
            match = next((a for a in self.acks if not a.used and a.sig == sig and abs(a.t - t) <= ACK_GRACE), None)
            if match is not None:  # it reached pytest too (sent to the process group)
                match.used = True
                self.received.remove(event)
            elif now - t > ACK_GRACE:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, sig)
                self.forwarded[sig] = time.monotonic()
                self.expect[sig] = self.expect.get(sig, 0) + 1
                self.received.remove(event)

    def _say_injections_after(self, got: int, left: list[str]) -> None:
        """Name every injection call pytest made after the first signal reached this process
        (there should be none: the stop file gates each one; one made at the same instant
        can still race it), and whether it was reverted; or say there was none."""
        if self.first_at is None:
            return  # the signal went to pytest alone: its own gate saw it first
        late = [(t - self.first_at, label) for t, label in self.injections if t >= self.first_at]
        if not late:
            self._say(f"gameday: no fault was injected after the {signal_name(got)}")
            return
        for dt, label in late:
            state = "still in the ledger" if any(label.startswith(w) or w in label for w in left) else "reverted"
            self._say(f"gameday: {label} was injected {dt:.2f} s after the {signal_name(got)} ({state})")

    def _report_exit(self, rc: int) -> int:
        """Say how pytest ended after a signal or a kill, and what the ledger holds from it;
        returns this command's exit status: 128 + the signal after one (never 0), pytest's
        own status otherwise."""
        self._read_acks()
        # A signal sent to pytest alone (not to this process) counts too: pytest acknowledged it.
        got = self.first if self.first is not None else next((a.sig for a in self.acks), None)
        if got is not None and not self.ready:
            self._say(f"gameday: {signal_name(got)} before the run started; nothing was injected")
            return 128 + got
        left = self._pending()
        restore = f"run `gameday restore --reports {self.ledger.parent.parent}`"
        if rc < 0 and (got is None or -rc not in HANDLED):
            if not self.ready:  # its handlers were not in yet: nothing had started
                self._say(f"gameday: pytest was stopped by {signal.Signals(-rc).name} before the run started; "
                          "nothing was injected")
                return 128 - rc
            # Killed by what no handler can see (kill -9, the OOM killer, a crash): only the ledger knows.
            self._say(f"\ngameday: pytest (pid {self.proc.pid if self.proc else '?'}) was killed "
                      f"({signal.Signals(-rc).name}); it could not revert anything")
            self._say(f"gameday: still in the ledger: {', '.join(left)}: {restore}" if left else
                      f"gameday: nothing was pending in the ledger from it ({self.ledger})")
            return 128 + got if got is not None else 128 - rc
        if got is None:
            if rc == EXIT_INCONCLUSIVE:
                self._say("gameday: inconclusive: harness starved: the observer could not read the federation at "
                          f"the rate its figures need, so no verdict failed the federation (exit {rc}); run the "
                          "drill again on a less busy machine")
            return rc
        reverted = [w for w in self.in_effect if w not in left]
        how = f"exited with code {rc}" if rc >= 0 else f"was killed by {signal.Signals(-rc).name}"
        self._say(f"gameday: pytest {how} after {signal_name(got)}; reverted: "
                  + (", ".join(reverted) if reverted else "nothing was pending in the ledger when it came")
                  + f"; exit status {128 + got}")
        self._say_injections_after(got, left)
        if rc == 0:  # pytest's own handler makes it 2: 0 means the interrupt went astray
            self._say(f"gameday: pytest reported success although {signal_name(got)} reached it: the run is "
                      "not a pass; check its report for a fault injected after the signal")
        if left:
            self._say(f"gameday: still in the ledger: {', '.join(left)}: {restore}")
        else:
            self._say(f"gameday: ledger: nothing pending from this run ({self.ledger})")
        return 128 + got


def _cmd_restore(args: argparse.Namespace) -> int:
    from gameday.restore import forget, restore  # noqa: PLC0415

    reports = Path(args.reports).absolute() if args.reports else None
    for module in args.plugin or ():
        # Faults and targets a conftest or plugin registered exist only once imported.
        try:
            importlib.import_module(module)
        except ImportError as exc:
            print(f"gameday restore: -p {module}: cannot import it ({exc}); is it on the Python path "
                  "(PYTHONPATH) here?", file=sys.stderr)
            return 2
    if args.forget:
        return forget(reports, args.forget, out=sys.stdout)
    return restore(reports, keep=args.keep, out=sys.stdout, lock_timeout=args.drill_lock_timeout)


def _cmd_down(args: argparse.Namespace) -> int:
    from gameday.restore import held_faults, stop_leftover_federations  # noqa: PLC0415

    reports = Path(args.reports).absolute()
    stopped = stop_leftover_federations(reports, only_orphans=False, out=sys.stdout, force=args.force)
    print(f"stopped {stopped} federation(s) under {reports}")
    if not args.force and any(held_faults(reports).values()):
        return 1  # a federation was left running on purpose: say so in the exit code
    return 0


def _cmd_init(args: argparse.Namespace) -> int:
    from gameday.cli.scaffold import init  # noqa: PLC0415

    init(Path(args.dir), force=args.force, ci=args.ci)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from gameday.reports.generate import ReportRequest, make_report  # noqa: PLC0415

    report = make_report(ReportRequest(
        reports=Path(args.reports), results=Path(args.results) if args.results else None,
        output=Path(args.output) if args.output else None, generator=args.generator,
        history=Path(args.history) if args.history else None))
    if report.note:
        print(f"gameday report: {report.note}", file=sys.stderr)
    print(f"{report.tests} test(s) from {report.results}, {report.runs_in_history} run(s) in the trend; "
          f"report ({report.generator}): {report.index}", flush=True)
    if args.open:
        _open_report(report.index, served=report.generator != "builtin")
    return 0


def _cmd_inconclusive(args: argparse.Namespace) -> int:
    from gameday.reports.junit import inconclusive_tests  # noqa: PLC0415

    undecided = [u for path in args.junit for u in inconclusive_tests(Path(path))]
    seen: set[str] = set()
    for u in undecided:
        if u.nodeid not in seen:
            seen.add(u.nodeid)
            print(u.nodeid)
            if args.reasons:
                print(f"    {u.reason}", file=sys.stderr)
    return 0 if seen else 1


def _open_report(index: Path, *, served: bool) -> None:
    import webbrowser  # noqa: PLC0415

    if not served:  # one self-contained file: the browser opens it from disk
        webbrowser.open(index.resolve().as_uri())
        return
    from gameday.reports.serve import serve_directory  # noqa: PLC0415

    # Allure's page loads its data with requests browsers refuse from file://: serve it.
    with serve_directory(index.parent) as url, contextlib.suppress(KeyboardInterrupt):
        print(f"serving the report at {url}index.html; Ctrl-C stops", flush=True)
        # Ctrl-C may come while the browser command still runs (webbrowser waits for some).
        webbrowser.open(f"{url}index.html")
        threading.Event().wait()


def _seconds(raw: str) -> float:
    """``gameday up --seconds``: a finite, non-negative number of seconds (at most a day)."""
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 86400:  # also false for NaN
        raise argparse.ArgumentTypeError(f"got {raw[:80]!r}, expected a number of seconds >= 0 and <= 86400")
    return value


def _add_up(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """gameday up: the local federation, until Ctrl-C."""
    up = sub.add_parser("up", help="bring the local federation up and show its status",
                        description="Starts the reference federation on this machine (loopback only, no "
                        "root), prints where each component listens, and keeps it up until Ctrl-C, SIGTERM "
                        "or --seconds; then stops every process it started.")
    up.add_argument("--topology", type=settings.cli_type("topology"),
                    help="topology YAML (default: clusters/local.yaml)")
    up.add_argument("--workdir", help="where logs and state go (default: reports/.gameday/up)")
    up.add_argument("--seconds", type=_seconds, help="stop after this many seconds instead of waiting for Ctrl-C")
    up.set_defaults(fn=_cmd_up)


def _add_drill(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """gameday drill: the headline drill through pytest."""
    dr = sub.add_parser("drill", help="run the headline random-gateway drill under load and print verdicts",
                        description="Runs suites/gameday/test_gateway_outage.py through pytest on the "
                        "default local target. Extra arguments are passed to pytest. Exit status: pytest's "
                        f"(0 passed, 1 a verdict failed), {EXIT_INCONCLUSIVE} when every failure was "
                        "inconclusive (the harness was starved: neither pass nor fail), 128 + N after signal N.")
    dr.add_argument("--seed", type=settings.cli_type("seed"),
                    help="seed for the region pick (default: random, printed)")
    dr.add_argument("--topology", type=settings.cli_type("topology"),
                    help="topology YAML (default: clusters/local.yaml)")
    dr.add_argument("--profile", type=settings.cli_type("profile"),
                    help="drill your own federation: its profile YAML (the external target; see the README)")
    dr.add_argument("--rounds", type=settings.cli_type("rounds"), help="repeat the drill N times with seeded picks")
    dr.add_argument("--round-jitter", metavar="SECONDS", type=settings.cli_type("round-jitter"),
                    help="before each round's fault, wait a seeded random 0..SECONDS, so that rounds land at "
                    "independent phases of the federation's health-check cycle (default 0)")
    dr.add_argument("--reports", default="reports", type=settings.cli_type("reports"),
                    help="where run data goes (default: reports)")
    dr.add_argument("--prediction-slack", metavar="SECONDS", type=settings.cli_type("prediction-slack"),
                    help="besides the 180 s limit, each figure is judged against the window the federation's own "
                    "timing predicts (detection fall x probe_interval [+ timeouts], propagation, DNS TTL; printed "
                    "in the header): seconds it may lie beyond that window and its resolution and still pass "
                    "(default 0.3, measured on the reference federation; README, 'Predictions')")
    dr.add_argument("--accept-observed-ttl", action="store_true",
                    help="with --profile: drill although the DNS server answers with another TTL than the "
                    "profile's timing.dns_ttl, judging with the observed one (default: refuse, nothing injected)")
    dr.add_argument("--test", help="run this pytest node id (a drill of your own) instead of the headline "
                    "drill, from the current directory")
    dr.add_argument("--fault", choices=sorted(DRILLS),
                    help="run the suite's drill of this fault instead of the headline gateway_down: "
                    "region_blackhole (a whole region cut off), store_down (the node leading the data is "
                    "killed: the state layer's verdicts), store_isolated (that node frozen and back as it was: "
                    "fencing)")
    dr.set_defaults(fn=_cmd_drill)


def _add_restore(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """gameday restore: revert what a killed runner left in the ledger."""
    rs = sub.add_parser("restore", help="revert every fault a killed runner left in the ledger",
                        description="Reverts what the ledger holds, checks health, stops orphaned "
                        "federations. Without --reports: ./reports and every ledger a run recorded in "
                        "the per-user index (so it works from any directory).")
    rs.add_argument("--reports", default=None,
                    help="only this reports directory (the one holding .gameday/ledger.json)")
    rs.add_argument("--keep", action="store_true",
                    help="leave orphaned federations running after restoring them (default: stop them)")
    rs.add_argument("--forget", metavar="ID",
                    help="drop the ledger entry ID (or a unique prefix) without reverting it, e.g. when its "
                    "target is gone for good; says what is dropped")
    lock_env = settings.OPTION["drill-lock-timeout"].env
    rs.add_argument("--drill-lock-timeout", metavar="SECONDS", type=settings.cli_type("drill-lock-timeout"),
                    # a string default goes through type=, so a bad environment value is refused the same way
                    default=os.environ.get(lock_env, f"{settings.Settings.drill_lock_timeout:g}"),
                    help="on a shared federation (external, kind, kube), wait up to SECONDS for another run's "
                    f"drill on it to end before reverting (default: {settings.Settings.drill_lock_timeout:g}, "
                    f"or ${lock_env}); an entry that waited longer stays in the ledger")
    rs.add_argument("-p", "--plugin", metavar="MODULE", action="append",
                    help="import MODULE first (repeatable), as pytest -p does: the module that registers "
                    "the faults or targets a conftest or plugin added to the run")
    rs.set_defaults(fn=_cmd_restore)


def _add_down(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """gameday down: stop the federations left running."""
    dn = sub.add_parser("down", help="stop every federation still running under the reports directory",
                        description="Stops every local federation still running under --reports (one a killed "
                        "runner left, or gameday up's). One whose ledger still holds an unreverted fault is left "
                        "alone (run gameday restore first) unless --force.")
    dn.add_argument("--reports", default="reports", help="the reports directory (default: reports)")
    dn.add_argument("--force", action="store_true",
                    help="also stop federations that hold an unreverted fault (clears their ledger entries)")
    dn.set_defaults(fn=_cmd_down)


def _add_init(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """gameday init: scaffold game days in a project."""
    it = sub.add_parser("init", help="scaffold game days in your project: topology, a drill, conformance, config",
                        description="Writes drills/topology.yaml, drills/test_gateway_drill.py, "
                        "drills/test_conformance.py, a conftest.py if there is none, and gameday's "
                        "[tool.pytest.ini_options] lines; never overwrites a file without --force.")
    it.add_argument("dir", nargs="?", default=".", help="the project directory (default: here)")
    it.add_argument("--force", action="store_true", help="overwrite files gameday init wrote before")
    it.add_argument("--ci", choices=("github",), help="also write a scheduled workflow for this CI")
    it.set_defaults(fn=_cmd_init)


def _add_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """gameday report: the HTML report of a run."""
    rp = sub.add_parser("report", help="generate the HTML report of a run (Allure when installed, else one page)",
                        description="Generates the HTML report of an Allure results directory (default: the "
                        "newest run's under --reports). With the Allure command line (npm allure-commandline; "
                        "$GAMEDAY_ALLURE, PATH, or ~/.cache/gameday/allure) into reports/allure-report, "
                        "carrying the previous report's history so Trend and History fill in; without it, a "
                        "self-contained page into reports/gameday-report/index.html.")
    rp.add_argument("--results", help="the Allure results directory (default: the newest run's under --reports)")
    rp.add_argument("--output", help="where the report goes (default: reports/allure-report, or "
                    "reports/gameday-report for the self-contained page)")
    rp.add_argument("--reports", default="reports", help="the reports directory (default: reports)")
    rp.add_argument("--history", help="the trend's history file (default: <reports>/history.jsonl)")
    rp.add_argument("--generator", choices=("auto", "allure", "builtin"), default="auto",
                    help="allure: require the Allure command line; builtin: the self-contained page; "
                    "auto (default): Allure when installed")
    rp.add_argument("--open", action="store_true", help="open the report in a browser (Allure's is served "
                    "on loopback HTTP until Ctrl-C)")
    rp.set_defaults(fn=_cmd_report)

def _add_inconclusive(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """gameday inconclusive: the tests a JUnit report records as inconclusive (harness starved)."""
    ic = sub.add_parser("inconclusive", help="list the tests a JUnit report records as inconclusive (to rerun them)",
                        description="Prints the pytest node id of every test that a JUnit XML report of a "
                        "gameday run records as inconclusive (its harness was starved on a busy machine: "
                        "neither a pass nor a fail of the federation), one per line, for a CI to run just "
                        "those again on a quieter machine: pytest @FILE reads them. Exits 0 when it listed "
                        "any, 1 when there were none, 2 when a report is missing or not JUnit XML.")
    ic.add_argument("junit", nargs="+", help="JUnit XML report(s) of pytest runs with gameday (--junitxml)")
    ic.add_argument("--reasons", action="store_true", help="also print each test's reason, on stderr")
    ic.set_defaults(fn=_cmd_inconclusive)


def _cmd_rbac(args: argparse.Namespace) -> int:
    import yaml  # noqa: PLC0415

    from gameday.targets.k8s import profile_plan as pp  # noqa: PLC0415
    from gameday.targets.k8s import rbac  # noqa: PLC0415
    from gameday.targets.profile import load_profile  # noqa: PLC0415

    if args.profile:
        loaded = load_profile(Path(args.profile))
        k = loaded.profile.kubernetes
        if k is None:
            raise GamedayError(f"{args.profile}: has no `kubernetes:` section: no Kubernetes fault to grant")
        faults = [(name, None) for name in k.faults] + [(name, r) for r, table in k.regions.items() for name in table]
        perms = []
        for name, region in faults:
            inject, revert = pp.plan_inject(pp.locate(loaded.profile, name, region, str(args.profile)), pp.Observed())
            perms += rbac.needed(inject, revert)
        source, contexts = args.profile, dict(k.contexts)
    else:
        perms, n, contexts = _topology_permissions(Path(args.topology))
        faults, source = [("", None)] * n, f"{args.topology} (the kube target's reference federation)"
    kind, subject = ("ServiceAccount", args.service_account) if args.service_account else ("User", args.user)
    out = [f"# gameday rbac: least privilege for the {len(faults)} Kubernetes fault(s) of {source} and their "
           "exact inverses (gameday asks for exactly these with SelfSubjectAccessReviews before each fault)"]
    for cluster, docs in sorted(rbac.role_manifests(sorted(set(perms)), subject_kind=kind,
                                                    subject_name=subject).items()):
        where = f"cluster {cluster} (context {contexts.get(cluster, '?')})"
        for doc in docs:
            doc["metadata"].setdefault("annotations", {})["gameday.dev/cluster"] = where
            _validate_strictly(doc)
            out += [f"---\n# {where}", yaml.safe_dump(doc, sort_keys=False).rstrip()]
    print("\n".join(out))
    return 0


def _topology_permissions(path: Path) -> tuple[list[Any], int, dict[str, str]]:
    """Every kube fault of the reference federation deployed from topology *path*, on every
    region it applies to, with its inverse: (permissions, faults planned, cluster -> context)."""
    from gameday.errors import ConfigError  # noqa: PLC0415
    from gameday.faults.catalogue import FAULTS  # noqa: PLC0415
    from gameday.model.topology import GLOBAL_CLUSTER, load_topology  # noqa: PLC0415
    from gameday.targets.k8s import plan, rbac  # noqa: PLC0415

    topology = load_topology(path)
    desired = plan.Observed.desired(topology)
    perms: list[Any] = []
    planned = 0
    for name in plan.K8S_ACTIONS:
        fault = FAULTS.get(name)
        if fault is None or isinstance(plan.K8S_ACTIONS.get(name), plan.NotDeployed):
            continue
        # a required parameter's value does not change which permissions the plan needs
        params = {p.name: p.default if not p.required else {"tier": "gameday"} if p.name == "labels" else 1.0
                  for p in fault.params}
        for region in [r.name for r in topology.regions] if fault.needs_region else [None]:
            try:
                recorded = dict(params)
                inject = plan.plan_inject(topology, name, region, recorded, desired)
                perms += rbac.needed(inject, plan.plan_revert(topology, name, region, recorded))
                planned += 1
            except (ConfigError, TypeError, ValueError):
                continue  # not plannable offline in this shape: nothing to grant for it
    contexts = {r.name: f"kind-gd-{r.name}" for r in topology.regions} | {GLOBAL_CLUSTER: f"kind-gd-{GLOBAL_CLUSTER}"}
    return perms, planned, contexts


def _validate_strictly(doc: dict[str, object]) -> None:
    """Against the real Kubernetes schemas, strictly, where they are installed (the kube extra)."""
    try:
        import kubernetes_validate  # noqa: PLC0415
    except ImportError:
        return
    from gameday.targets.k8s.objects import SCHEMA_VERSION  # noqa: PLC0415

    kubernetes_validate.validate(doc, SCHEMA_VERSION, strict=True)


def _add_rbac(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """gameday rbac: the least-privilege Role and RoleBinding a profile's Kubernetes faults need."""
    rb = sub.add_parser("rbac", help="print the least-privilege Role and RoleBinding (per cluster and namespace) "
                        "that a profile's Kubernetes faults and their exact inverses need",
                        description="Prints, as YAML for kubectl apply, per cluster of the profile's "
                        "kubernetes.contexts: a Role and a RoleBinding per namespace granting exactly the "
                        "verbs and resources its faults and their exact inverses need (the same permissions "
                        "the kube target checks with SelfSubjectAccessReviews before each fault), validated "
                        "strictly against the Kubernetes schemas when kubernetes-validate is installed.")
    what = rb.add_mutually_exclusive_group(required=True)
    what.add_argument("--profile", help="the federation profile (its `kubernetes:` section)")
    what.add_argument("--topology", help="a topology the kube/kind target deploys the reference federation from "
                      "(its faults on every region; contexts shown as kind's)")
    who = rb.add_mutually_exclusive_group()
    who.add_argument("--user", default="gameday", help="the User the RoleBindings name (default: gameday)")
    who.add_argument("--service-account", metavar="NAMESPACE/NAME",
                     help="bind a ServiceAccount instead (a CI job's)")
    rb.set_defaults(fn=_cmd_rbac)


def _parser() -> argparse.ArgumentParser:
    """The ``gameday`` command line: one sub-command per ``_add_*`` function."""
    parser = argparse.ArgumentParser(prog="gameday", description=(__doc__ or "").replace("``", ""),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gameday {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for add in (_add_up, _add_drill, _add_restore, _add_down, _add_init, _add_report, _add_inconclusive, _add_rbac):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gameday`` console command."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.cmd != "drill":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        rc: int = args.fn(args, extra) if args.cmd == "drill" else args.fn(args)
    except GamedayError as exc:
        print(f"gameday: error: {exc}", file=sys.stderr)
        return 2
    return rc


if __name__ == "__main__":
    sys.exit(main())
