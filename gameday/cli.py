"""The ``gameday`` command.

``gameday up``       bring the local federation up, print its status, stop on Ctrl-C.
``gameday drill``    run the headline random-gateway drill on the default target (via pytest).
``gameday restore``  revert every fault a killed runner left in the ledger.
``gameday down``     stop every federation still running under the reports directory.
``gameday init``     scaffold game days in your own project.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from gameday import __version__
from gameday.errors import GamedayError

DEFAULT_REPORTS = Path("reports")


def _cmd_up(args: argparse.Namespace) -> int:
    from gameday.fedapp.federation import LocalFederation  # noqa: PLC0415
    from gameday.topology import load_topology  # noqa: PLC0415

    topology = load_topology(args.topology)
    workdir = Path(args.workdir) if args.workdir else DEFAULT_REPORTS / ".gameday" / "up"
    fed = LocalFederation.from_topology(topology, workdir)
    stop = threading.Event()

    def _on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    t0 = time.monotonic()
    print(f"starting {len(fed.components)} processes for {len(topology.regions)} regions ...", flush=True)
    fed.start()
    try:
        print(f"ready in {time.monotonic() - t0:.2f} s\n", flush=True)
        print(fed.status_table(), flush=True)
        print(f"\nlogs: {fed.logdir}", flush=True)
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


def _headline_test() -> Path:
    """The suite's headline drill; `gameday drill` runs exactly that test through pytest.
    It ships with gameday (``gameday.suites``), so this works in any directory."""
    from gameday.resources import suites_dir  # noqa: PLC0415

    test = suites_dir() / "gameday" / "test_gateway_outage.py"
    if not test.is_file():
        raise GamedayError(f"{test} is missing: the installed gameday is incomplete; reinstall it with pip")
    return test


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
    test = _headline_test()
    reports = Path(args.reports).resolve()
    argv = [sys.executable, "-m", "pytest", f"{test}::test_random_gateway_outage", "-p", "no:cacheprovider",
            "-p", "no:locust", f"--gameday-reports={reports}", f"--junitxml={reports / 'junit-drill.xml'}",
            f"--alluredir={reports / 'allure-results'}", "-o", "console_output_style=classic"]
    if args.seed is not None:
        argv.append(f"--gameday-seed={args.seed}")
    if args.topology:
        argv.append(f"--gameday-topology={Path(args.topology).resolve()}")
    if args.rounds:
        argv.append(f"--gameday-rounds={args.rounds}")
    config = _project_config(Path.cwd())
    if config is not None:  # the project's configuration (its gameday options, markers) applies
        argv += ["-c", str(config), f"--rootdir={config.parent}"]
    argv += extra
    print("running:", " ".join(argv[2:]), flush=True)
    return subprocess.call(argv)


def _cmd_restore(args: argparse.Namespace) -> int:
    from gameday.faults.restore import forget, restore  # noqa: PLC0415

    reports = Path(args.reports).absolute() if args.reports else None
    if args.forget:
        return forget(reports, args.forget, out=sys.stdout)
    return restore(reports, keep=args.keep, out=sys.stdout)


def _cmd_down(args: argparse.Namespace) -> int:
    from gameday.faults.restore import held_faults, stop_leftover_federations  # noqa: PLC0415

    reports = Path(args.reports).absolute()
    stopped = stop_leftover_federations(reports, only_orphans=False, out=sys.stdout, force=args.force)
    print(f"stopped {stopped} federation(s) under {reports}")
    if not args.force and any(held_faults(reports).values()):
        return 1  # a federation was left running on purpose: say so in the exit code
    return 0


def _cmd_init(args: argparse.Namespace) -> int:
    from gameday.scaffold import init  # noqa: PLC0415

    init(Path(args.dir), force=args.force, ci=args.ci)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gameday`` console command."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="gameday", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gameday {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="bring the local federation up and show its status")
    up.add_argument("--topology", help="topology YAML (default: clusters/local.yaml)")
    up.add_argument("--workdir", help="where logs and state go (default: reports/.gameday/up)")
    up.add_argument("--seconds", type=float, help="stop after this many seconds instead of waiting for Ctrl-C")
    up.set_defaults(fn=_cmd_up)
    dr = sub.add_parser("drill", help="run the headline random-gateway drill under load and print verdicts",
                        description="Runs suites/gameday/test_gateway_outage.py through pytest on the "
                        "default local target. Extra arguments are passed to pytest.")
    dr.add_argument("--seed", type=int, help="seed for the region pick (default: random, printed)")
    dr.add_argument("--topology", help="topology YAML (default: clusters/local.yaml)")
    dr.add_argument("--rounds", type=int, help="repeat the drill N times with seeded picks")
    dr.add_argument("--reports", default="reports", help="where run data goes (default: reports)")
    dr.set_defaults(fn=_cmd_drill)
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
    rs.set_defaults(fn=_cmd_restore)
    dn = sub.add_parser("down", help="stop every federation still running under the reports directory")
    dn.add_argument("--reports", default="reports")
    dn.add_argument("--force", action="store_true",
                    help="also stop federations that hold an unreverted fault (clears their ledger entries)")
    dn.set_defaults(fn=_cmd_down)
    it = sub.add_parser("init", help="scaffold game days in your project: topology, a drill, conformance, config",
                        description="Writes drills/topology.yaml, drills/test_gateway_drill.py, "
                        "drills/test_conformance.py, a conftest.py if there is none, and gameday's "
                        "[tool.pytest.ini_options] lines; never overwrites a file without --force.")
    it.add_argument("dir", nargs="?", default=".", help="the project directory (default: here)")
    it.add_argument("--force", action="store_true", help="overwrite files gameday init wrote before")
    it.add_argument("--ci", choices=("github",), help="also write a scheduled workflow for this CI")
    it.set_defaults(fn=_cmd_init)
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
