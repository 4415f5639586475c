"""R14 on a generated 12-region topology, both ways: the regional layout passes it, and the
same topology forced to the ``global`` layout fails exactly R14 (R5 passes beside it on both,
so the failure is R14's own and not a broken federation).

Each run is one pytester subprocess with its own 12-region federation (75 processes in the
regional layout), so the two share one xdist worker instead of loading both cores at once.
Timings are lighter and more tolerant than clusters/local.yaml's (0.5 s probes with a 1 s
timeout, 1 s heartbeats, 5 s region timeout): on a loaded 2-core machine 75 processes'
probes and heartbeats otherwise time out and health flaps everywhere. The checks' timeouts
follow from the timings.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from gameday.model.topology import generated_topology

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "suites" / "conformance"
INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"
FILES = ("test_r14_regional_control_planes.py", "test_r05_versions.py")
LIGHT = {"probe_interval": 0.5, "probe_timeout": 1.0, "heartbeat_interval": 1.0, "region_timeout": 5.0,
         "stale_after": 15.0}

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("r14-twelve-regions")]


def _run(pytester: pytest.Pytester, layout: str | None) -> pytest.RunResult:
    pytester.makeini(INI)
    for name in FILES:
        shutil.copy(SUITES / name, pytester.path / name)
    topo = generated_topology(12, layout=layout, **LIGHT)  # type: ignore[arg-type]
    assert topo.layout == (layout or "regional")
    (pytester.path / "twelve.yaml").write_text(yaml.safe_dump(topo.model_dump(mode="json")))
    return pytester.runpytest_subprocess("--gameday-topology=twelve.yaml", "-v", timeout=420)


def test_r14_passes_on_twelve_regions_in_the_regional_layout(pytester: pytest.Pytester) -> None:
    result = _run(pytester, None)  # the default above 10 regions
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_r14_regional_control_planes_above_ten_regions PASSED*"])


def test_r14_fails_on_twelve_regions_forced_to_the_global_layout(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "global")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*test_r14_regional_control_planes_above_ten_regions FAILED*",
        "*expected a control plane per region with 12 regions (R14); the target exposes none for*",
    ])
    assert "test_r5_versions_monotonic_across_a_change_and_a_restart PASSED" in result.stdout.str()
