"""Drills that must not run are refused before anything is injected; a dry run injects nothing.

Each test starts one real local federation (the refusals need its regions, the dry run
its health check), so there are few of them: one session holds several cases.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"

# Every test first replaces the target's inject with one that fails the test: if the
# refusal or the dry run let anything through, the test fails on that call.
NEVER_INJECT = """
import pytest
from gameday.errors import DrillRefused

@pytest.fixture
def never_inject(federation, monkeypatch):
    def inject(kind, region, params):
        raise AssertionError(f"{kind} {region} reached the federation")
    monkeypatch.setattr(federation, "inject", inject)
    return federation
"""


def _topology(pytester: pytest.Pytester, **changes: object) -> Path:
    topo = yaml.safe_load((REPO / "clusters" / "local.yaml").read_text())
    topo.update(changes)
    path = pytester.path / "topology.yaml"
    path.write_text(yaml.safe_dump(topo))
    return path


def test_n_minus_1_and_ttl_refusals_come_before_anything_is_injected(pytester: pytest.Pytester) -> None:
    # a carries 2 x 40, b and c 2 x 15: without a, 60 req/s remain for 60 x 1.2 = 72.
    regions = [{"name": "a", "weight": 50, "fallback": "b", "instances": 2, "capacity_rps": 40},
               {"name": "b", "weight": 30, "fallback": "a", "instances": 2, "capacity_rps": 15},
               {"name": "c", "weight": 20, "fallback": "a", "instances": 2, "capacity_rps": 15}]
    topo = _topology(pytester, regions=regions)
    pytester.makeini(INI)
    pytester.makepyfile(test_refused=NEVER_INJECT + """
def test_n_minus_1(drill, never_inject):
    with drill.fault("gateway_down", "a"):
        raise AssertionError("the block must not run")

def test_ttl_longer_than_the_switchover_limit(drill, never_inject):
    with drill.fault("gateway_unready", "b"):  # capacity holds without b: only the TTL is refused
        raise AssertionError("the block must not run")
""")
    result = pytester.runpytest_subprocess(f"--gameday-topology={topo}", "--gameday-switchover-limit=4",
                                           timeout=180)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*DrillRefused: refusing gateway_down a: with a out, b, c would have 30 + 30 = 60 req/s for 60 req/s x "
        "(1 + 0.2) = 72 req/s; nothing was injected",
    ])
    result.stdout.fnmatch_lines([
        "*DrillRefused: refusing gateway_unready b: clients honour the DNS TTL, so they cannot all have moved before "
        "detection 3 x 0.2 s + 0.15 s probe timeout = 0.75 s + DNS TTL 5 s = 5.75 s, above the switchover limit 4 s "
        "(--gameday-switchover-limit); lower timing.dns_ttl or raise the limit; nothing was injected",
    ])
    assert "reached the federation" not in result.stdout.str()
    assert not (pytester.path / "reports" / ".gameday" / "ledger.json").exists()


def test_dry_run_prints_the_plan_skips_and_injects_nothing(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    shutil.copy(REPO / "suites" / "gameday" / "test_gateway_outage.py", pytester.path)
    pytester.makepyfile(test_zz_after=NEVER_INJECT + """
def test_blackhole_plan_then_the_federation_is_untouched(drill, never_inject):
    with pytest.raises(pytest.skip.Exception) as skipped:
        with drill.fault("region_blackhole", "b"):
            raise AssertionError("the block must not run")
    plan = skipped.value.msg
    assert "dry run of region_blackhole b" in plan and "nothing was injected" in plan
    assert "resume them (SIGCONT): " in plan and "gateway-b" in plan
    never_inject.check_health(timeout=2)  # every process answers: none was stopped or frozen
    assert drill.results == [] and drill.active is None  # nothing observed, nothing recorded
""")
    result = pytester.runpytest_subprocess("--gameday-dry-run", "--gameday-seed=7", "-rs",
                                           timeout=180)
    result.assert_outcomes(skipped=1, passed=1)
    result.stdout.fnmatch_lines([
        "SKIPPED *dry run of gateway_down ? (seed 7, round 1): nothing was injected",
        "  passed: capacity with ? out: * req/s",
        "  passed: clients can move within the switchover limit: * <= 180 s",
        "  passed: the federation is healthy",
        "  1. steady state for 1 s: gateway-*, proxy-* route to a, b, c; the control plane answers",
        "  2. record the fault in the ledger *ledger.json",
        "  3. inject gateway_down ?: stop gateway-? (SIGTERM)",
        "  4. observe (the test's with-block)",
        "  5. revert (the exact inverse): start gateway-? again on the same address and port; remove the ledger entry",
        "  6. wait up to 60 s until every entry node routes to a, b, c again",
    ])
    assert not (pytester.path / "reports" / ".gameday" / "ledger.json").exists()
