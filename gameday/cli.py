"""The ``gameday`` command.

``gameday up``       bring the local federation up, print its status, stop on Ctrl-C.
``gameday drill``    run the headline random-gateway drill on the default target (via pytest).
``gameday restore``  revert every fault a killed runner left in the ledger.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path

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


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gameday`` console command."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="gameday", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="bring the local federation up and show its status")
    up.add_argument("--topology", help="topology YAML (default: clusters/local.yaml)")
    up.add_argument("--workdir", help="where logs and state go (default: reports/.gameday/up)")
    up.add_argument("--seconds", type=float, help="stop after this many seconds instead of waiting for Ctrl-C")
    up.set_defaults(fn=_cmd_up)
    args = parser.parse_args(argv)
    try:
        rc: int = args.fn(args)
    except GamedayError as exc:
        print(f"gameday: error: {exc}", file=sys.stderr)
        return 2
    return rc


if __name__ == "__main__":
    sys.exit(main())
