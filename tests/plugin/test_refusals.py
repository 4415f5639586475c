"""Drills that must not run are refused before anything is injected; a dry run injects nothing.

The slow tests start one real local federation each (the refusals need its regions, the
dry run its health check), so there are few of them: one session holds several cases.
The others plan offline: a local target that is never started, a kube target in dry-run
whose client factory fails the test if it is ever called.
"""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gameday import preflight
from gameday.drill import Drill
from gameday.errors import DrillRefused
from gameday.faults import Ledger
from gameday.faults.catalogue import CATALOGUE
from gameday.interfaces import RegionInfo
from gameday.settings import SLO, Settings
from gameday.targets.k8s import files as k8s_files
from gameday.targets.k8s.kube import KubeTarget
from gameday.targets.local import LocalTarget
from gameday.topology import load_topology

REPO = Path(__file__).resolve().parents[2]
INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"

# Every test first replaces the target's inject with one that fails the test: if the
# refusal or the dry run let anything through, the test fails on that call.
NEVER_INJECT = """
import pytest
from gameday import preflight
from gameday.drill import Drill
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


@pytest.mark.slow
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


@pytest.mark.slow
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
        "  prediction for gateway_down (from topology 'local'):",
        "    detection 3 x 0.2 s checks, each failing at once (refused or unready): 0.40-0.60 s",
        "    switchover: 0.40-0.70 s: detection 0.40-0.60 s + entry-node propagation <= 0.1 s (broadcast_delay 0 s *",
        "    dns convergence: 0.40-0.60 s: detection 0.40-0.60 s + GSLB propagation <= 0 s",
        "    client recovery: 0.00-6.60 s: <= DNS convergence 0.60 s + TTL 5 s *",
        "  1. steady state for 1 s: gateway-*, proxy-* route to a, b, c; the control plane answers",
        "  2. record the fault in the ledger *ledger.json",
        "  3. inject gateway_down ?: stop gateway-? (SIGTERM)",
        "  4. observe (the test's with-block)",
        "  5. revert (the exact inverse): start gateway-? again on the same address and port; remove the ledger entry",
        "  6. wait up to 60 s until every entry node routes to a, b, c again",
    ])
    assert not (pytester.path / "reports" / ".gameday" / "ledger.json").exists()


PARAMS: dict[str, dict[str, Any]] = {
    "sync_delay": {"seconds": 2.0}, "gateway_blip": {"seconds": 0.5}, "probe_flap": {"period": 1.0, "down": 0.3},
    "region_labels": {"labels": {"x": "y"}},
}


@pytest.mark.parametrize("kind", sorted(CATALOGUE))
def test_the_local_target_plans_every_fault_and_its_inverse_without_starting(kind: str, tmp_path: Path) -> None:
    target = LocalTarget(load_topology(), tmp_path / "fed")  # planned, never started
    region = "b" if CATALOGUE[kind].needs_region else None
    inject, revert = target.plan_fault(kind, region, dict(PARAMS.get(kind, {})))
    assert inject and revert and inject != revert
    assert not re.search(r"\{[a-z_]+\}", inject + revert), "every placeholder is filled"
    if region is not None:
        assert "b" in inject and "b" in revert
    assert not (tmp_path / "fed" / "state.json").exists(), "planning starts nothing"


def _no_client(context: str) -> Any:
    raise AssertionError(f"the dry run tried to open an API client for {context!r}")


def test_a_kube_dry_run_drill_prints_its_api_calls_and_skips(tmp_path: Path) -> None:
    out = io.StringIO()
    target = KubeTarget(load_topology(k8s_files.KIND_TOPOLOGY), tmp_path, allow=["kind-gd-*"], dry_run=True,
                        client_factory=_no_client, out=out)
    target.up()
    drill = Drill(target, Settings(seed=1, dry_run=True), seed_key="t", ledger=Ledger(tmp_path / "ledger.json"),
                  offered=60, margin=0.2)
    with pytest.raises(pytest.skip.Exception) as skipped, drill.fault("gateway_down", "a"):
        raise AssertionError("the block must not run")
    assert "inject gateway_down a: the API calls printed above" in skipped.value.msg
    printed = out.getvalue()
    assert "gameday dry-run: scale Deployment gameday/gateway to 0 [a]" in printed
    assert "gameday dry-run: scale Deployment gameday/gateway to " in printed.split("to 0 [a]", 1)[1]  # the revert
    assert not (tmp_path / "ledger.json").exists()


def test_a_lowered_switchover_limit_refuses_a_long_ttl_offline(tmp_path: Path) -> None:
    target = LocalTarget(load_topology(), tmp_path / "fed")  # never started: refused before it is touched
    drill = Drill(target, Settings(slo=SLO(switchover_limit=3)), seed_key="t",
                  ledger=Ledger(tmp_path / "ledger.json"), offered=60, margin=0.2)
    with pytest.raises(DrillRefused, match=r"= 5.75 s, above the switchover limit 3 s .*nothing was injected"), \
            drill.fault("gateway_down", "a"):
        raise AssertionError("the block must not run")


# -- the pure checks (gameday.preflight) -------------------------------------------------------------
REGIONS = [RegionInfo("a", 50, 80, ""), RegionInfo("b", 30, 30, ""), RegionInfo("c", 20, 30, "")]


def test_capacity_is_checked_for_the_regions_the_drill_takes_out() -> None:
    assert preflight.check_capacity(REGIONS, ["c"], offered=60, margin=0.2) == (
        "capacity with c out: a, b would have 80 + 30 = 110 req/s for 60 req/s x (1 + 0.2) = 72 req/s")
    with pytest.raises(DrillRefused) as err:
        preflight.check_capacity(REGIONS, ["a"], offered=60, margin=0.2, action="gateway_down a")
    assert str(err.value) == ("refusing gateway_down a: with a out, b, c would have 30 + 30 = 60 req/s for 60 req/s "
                              "x (1 + 0.2) = 72 req/s; nothing was injected")
    with pytest.raises(DrillRefused, match="with a, b out, c would have 30 = 30 req/s"):
        preflight.check_capacity(REGIONS, ["a", "b"], offered=20, margin=0.6)


def test_detection_plus_ttl_must_fit_the_switchover_limit() -> None:
    timing = load_topology().timing  # 3 x 0.2 s + 0.15 s = 0.75 s to detect
    assert preflight.check_clients_can_move(timing, 5, 5.75).endswith("= 5.75 s <= 5.75 s")
    with pytest.raises(DrillRefused, match=r"DNS TTL 5 s = 5.75 s, above the switchover limit 5.7 s"):
        preflight.check_clients_can_move(timing, 5, 5.7)
    unknown = r"detection time unknown \(no health-check timing given; counted as 0 s\)"
    with pytest.raises(DrillRefused, match=unknown + r" \+ DNS TTL 60 s = 60 s, above .* 30 s"):
        preflight.check_clients_can_move(None, 60, 30)
