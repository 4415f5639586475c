"""Negative controls: run the real suites against deliberately broken federations.

Each broken federation is the default topology with one misconfiguration; the suite
test that guards against it must fail, with a message that explains it, and the
other suite tests run alongside must not fail because of it.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "suites"
INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider -p no:gameday_plots -p no:gameday_history\n"
"""The controls judge verdicts (each drill's figures file), not reports: no timeline plot (about a
CPU-second per drill) and no history (each control's directory is new: nothing to judge against)."""


# Beneath every control's own change: health checks that wait 0.5 s, not local.yaml's 0.15 s. A
# control's drill runs beside another on a loaded 2-core machine, where one check against a region
# it did not touch can take over 0.15 s; the drill then reads its harness as starved and the test
# as inconclusive (every rerun in three fresh-clone CIs was one). A refused or unready gateway still
# fails its check at once, so the defects these controls break show the same.
BASE: dict[str, Any] = {"timing": {"probe_timeout": 0.5}}


@pytest.fixture
def broken_run(pytester: pytest.Pytester) -> Callable[..., pytest.RunResult]:
    """Copy suite files into a pytester dir, write a broken topology, run them.

    Call as ``broken_run(["gameday/test_gateway_outage.py"], {"control_plane": {...}}, "--opt")``:
    the dict is deep-merged into clusters/local.yaml.
    """

    def run(suite_files: list[str], changes: dict[str, Any], *args: str, timeout: float = 300) -> pytest.RunResult:
        pytester.makeini(INI)
        for rel in suite_files:
            dst = pytester.path / Path(rel).name
            shutil.copy(SUITES / rel, dst)
        topo = yaml.safe_load((REPO / "clusters" / "local.yaml").read_text())
        merge_changes(topo, BASE)
        merge_changes(topo, changes)
        (pytester.path / "broken.yaml").write_text(yaml.safe_dump(topo))
        return pytester.runpytest_subprocess("--gameday-topology=broken.yaml", *args, timeout=timeout)

    return run


def merge_changes(base: dict[str, Any], changes: dict[str, Any]) -> None:
    for k, v in changes.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge_changes(base[k], v)
        else:
            base[k] = v


def seed_picking(region: str, nodeid: str, regions: tuple[str, ...] = ("a", "b", "c")) -> int:
    """A --gameday-seed under which the drill *nodeid* picks *region* first (the drill's rng)."""
    for seed in range(1, 10_000):
        if random.Random(f"{seed}:{nodeid}:0").choice(list(regions)) == region:
            return seed
    raise AssertionError(f"no seed picks {region}")
