"""Run one federation component: ``python -m gameday.fedapp ROLE --spec FILE [--region R] [--instance I]``.

Roles: ``controlplane``, ``agent`` (needs --region), ``gateway`` (--region),
``proxy`` (--region), ``app`` (--instance), ``gslb``, ``storectl`` (an ``async`` state layer).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from gameday.fedapp.common import run_component
from gameday.fedapp.spec import FederationSpec

ROLES = {
    "controlplane": "gameday.fedapp.controlplane",
    "agent": "gameday.fedapp.agent",
    "gateway": "gameday.fedapp.gateway",
    "proxy": "gameday.fedapp.proxy",
    "app": "gameday.fedapp.app",
    "gslb": "gameday.fedapp.gslb",
    "storectl": "gameday.fedapp.storectl",
}


def run_role(role: str, spec_path: str, region: str | None, instance: str | None) -> None:
    """Import the role's module and run its ``serve(spec, region, instance, stop)`` until stopped."""
    if role not in ROLES:
        raise SystemExit(f"unknown role {role!r}; expected one of {sorted(ROLES)}")
    spec = FederationSpec.load(spec_path)
    module = importlib.import_module(ROLES[role])
    run_component(lambda stop: module.serve(spec, region, instance, stop))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m gameday.fedapp", description=__doc__)
    p.add_argument("role", choices=sorted(ROLES))
    p.add_argument("--spec", required=True, help="federation spec.json written by the launcher")
    p.add_argument("--region")
    p.add_argument("--instance")
    a = p.parse_args(argv)
    run_role(a.role, a.spec, a.region, a.instance)


if __name__ == "__main__":
    main(sys.argv[1:])
