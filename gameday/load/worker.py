"""A locust worker for a gameday master on another machine: ``python -m gameday.load.worker``.

When one machine cannot offer a drill's load, run the drill with
``--gameday-load-expect-workers N`` (the harness's locust master then waits for N workers)
and start, on each load machine that has gameday installed::

    python -m gameday.load.worker --master HARNESS_HOST:5557

The worker runs gameday's built-in user (:mod:`gameday.load.locustfile`, imported from the
installed package, so nothing is copied). It needs no other setting: the master sends it
the service name, the DNS server, the rate per user and the timeouts, and measures its
clock at connect time; the worker sends its request records back, and the master puts
them on the harness's clock. The load machines must reach the federation's DNS server and
gateways at the addresses the harness's target reports.

The process *becomes* locust (``exec``): Ctrl-C or SIGTERM stops it; it also exits when the
master quits at the end of the drill.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gameday.load.runner import BUILTIN_LOCUSTFILE
from gameday.runtime.settings import parse_host_port

DEFAULT_MASTER_PORT = 5557
"""locust's own default master port."""


def worker_argv(master: str, locustfile: str = str(BUILTIN_LOCUSTFILE)) -> list[str]:
    """The locust command line of a remote worker of the master at ``HOST[:PORT]``."""
    host, port = parse_host_port(master, DEFAULT_MASTER_PORT)
    return [sys.executable, "-m", "locust", "-f", locustfile, "--worker",
            "--master-host", host, "--master-port", str(port)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gameday.load.worker", description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", required=True, metavar="HOST[:PORT]",
                    help=f"the gameday harness's locust master (port default {DEFAULT_MASTER_PORT})")
    args = ap.parse_args(argv)
    try:
        cmd = worker_argv(args.master)
    except ValueError as exc:
        ap.error(str(exc))
    os.environ["GAMEDAY_REMOTE"] = "1"
    os.environ.pop("GAMEDAY_RECORDS", None)  # records go to the master, never to a local file
    os.execv(cmd[0], cmd)  # noqa: S606  (becomes locust: signals reach it directly)
    return 0  # pragma: no cover  (exec does not return)


if __name__ == "__main__":
    raise SystemExit(main())
