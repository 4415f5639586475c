"""Drills that must not run are refused before anything is injected; a dry run injects nothing.

The slow tests start one real local federation each (the refusals need its regions, the
dry run its health check), so there are few of them: one session holds several cases.
The others plan offline: a local target that is never started, a kube target in dry-run
whose client factory fails the test if it is ever called.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gameday.drill import Drill
from gameday.errors import DrillRefused
from gameday.faults import Ledger
from gameday.faults.catalogue import CATALOGUE
from gameday.interfaces import RegionInfo
from gameday.model import preflight
from gameday.model.topology import load_topology
from gameday.runtime.settings import SLO, Settings
from gameday.targets.k8s import files as k8s_files
from gameday.targets.k8s.kube import KubeTarget
from gameday.targets.local import LocalTarget

REPO = Path(__file__).resolve().parents[2]
INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"

# Every test first replaces the target's inject with one that fails the test: if the
# refusal or the dry run let anything through, the test fails on that call.
NEVER_INJECT = """
import pytest
from gameday.model import preflight
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
    # stale_after below the 4 s limit below, or the session is refused before any drill
    timing = {**yaml.safe_load((REPO / "clusters" / "local.yaml").read_text())["timing"], "stale_after": 3.0}
    topo = _topology(pytester, regions=regions, timing=timing)
    pytester.makeini(INI)
    pytester.makepyfile(test_refused=NEVER_INJECT + """
def test_n_minus_1(drill, never_inject):
    with drill.fault("gateway_down", "a"):
        raise AssertionError("the block must not run")

def test_ttl_longer_than_the_switchover_limit(drill, never_inject):
    with drill.fault("gateway_unready", "b"):  # capacity holds without b: only the TTL is refused
        raise AssertionError("the block must not run")

def test_credentials_that_could_not_revert(drill, never_inject, monkeypatch):
    # a target whose credentials could inject but not revert (kube's access reviews say so)
    # (a fault that takes no region out: this topology refuses those on capacity or TTL first)
    lacking = ["global (context staging-global): patch deployments/scale (apps) in namespace gameday"]
    monkeypatch.setattr(never_inject, "missing_permissions", lambda kind, region, params: lacking, raising=False)
    with drill.fault("control_plane_down"):
        raise AssertionError("the block must not run")
""")
    result = pytester.runpytest_subprocess(f"--gameday-topology={topo}", "--gameday-switchover-limit=4",
                                           timeout=180)
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines([
        "*DrillRefused: refusing control_plane_down: the local target's credentials lack what the fault or its "
        "exact inverse needs: global (context staging-global): patch deployments/scale (apps) in namespace gameday. "
        "`gameday rbac` prints a Role granting exactly what the faults need; nothing was injected",
    ])
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
        "    dns convergence: 0.40-0.60 s: detection 0.40-0.60 s + GSLB propagation <= 0 s (timing.gslb_delay 0*",
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


# -- the pure checks (gameday.model.preflight) -------------------------------------------------------------
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
    t = load_topology().timing  # 3 x 0.2 s + 0.15 s = 0.75 s to detect
    timing = preflight.HealthChecks(t.fall, t.probe_interval, t.probe_timeout)
    assert preflight.check_clients_can_move(timing, 5, 5.75).endswith("= 5.75 s <= 5.75 s")
    with pytest.raises(DrillRefused, match=r"DNS TTL 5 s = 5.75 s, above the switchover limit 5.7 s"):
        preflight.check_clients_can_move(timing, 5, 5.7)
    unknown = r"detection time unknown \(no health-check timing given; counted as 0 s\)"
    with pytest.raises(DrillRefused, match=unknown + r" \+ DNS TTL 60 s = 60 s, above .* 30 s"):
        preflight.check_clients_can_move(None, 60, 30)


def test_the_dry_run_says_which_parts_are_absent_instead_of_that_they_answer() -> None:
    common: dict[str, Any] = {"action": "gateway_down a", "seed": 3, "round_index": 0, "checks": [],
                              "regions": ["a", "b"], "baseline": 1.0, "ledger": "l.json", "inject": "stop",
                              "revert": "start", "restore_timeout": 60.0}
    full = preflight.dry_run_plan(nodes=["gateway-b"], control_plane=True, **common)
    assert "  1. steady state for 1 s: gateway-b route to a, b; the control plane answers" in full
    assert "  6. wait up to 60 s until every entry node routes to a, b again" in full
    # A profile without entry nodes or a control plane: said to be absent, never "answers".
    bare = preflight.dry_run_plan(nodes=[], control_plane=False, **common)
    text = "\n".join(bare)
    assert ("  1. steady state for 1 s: no entry nodes declared: the GSLB answers a, b; no control plane declared "
            "(versions are n/a)") in bare
    assert "  6. wait up to 60 s until the GSLB answers a, b again (no entry nodes declared)" in bare
    assert "the control plane answers" not in text and "every entry node" not in text


# -- the fault ledger: what a killed run left is said before anything starts ----------------------------
LEDGER_DRILL = """
from pathlib import Path
import pytest

@pytest.mark.gameday
def test_drill(drill):
    with drill.fault("gateway_down", "b", baseline=0.5) as fault:
        Path("injected").write_text("yes")
        drill.observe_switchover(fault, timeout=30)
"""


def _unknown_target_entry(ledger: Ledger) -> str:
    entry = ledger.record("gateway_down", "a", {}, "nosuchtarget", {"context": "gone"})
    return entry.id


@pytest.mark.parametrize("problem", ["corrupt", "unknown-target"])
def test_a_ledger_the_run_cannot_trust_refuses_the_drill_before_anything_starts(
        pytester: pytest.Pytester, problem: str) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_drill=LEDGER_DRILL)
    ledger = Ledger(pytester.path / "reports" / ".gameday" / "ledger.json")
    if problem == "corrupt":
        ledger.path.parent.mkdir(parents=True)
        ledger.path.write_text('{"pending": [{"id": "ab')  # a write cut short
        expected = f"gameday: the fault ledger {ledger.path} is unreadable (is not valid JSON"
    else:
        entry_id = _unknown_target_entry(ledger)
        expected = (f"holds 1 entry no target of this run can revert: gateway_down a on target 'nosuchtarget' "
                    f"(entry {entry_id}")
    before = ledger.path.read_bytes()
    result = pytester.runpytest_subprocess("-p", "no:randomly", timeout=120)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret != 0, out
    assert expected in out, out
    assert "refusing to drill: run `gameday restore --reports" in out, out
    assert "nothing was started or injected" in out, out
    result.assert_outcomes(errors=1)
    assert not (pytester.path / "injected").exists()
    assert not (pytester.path / "reports" / ".gameday" / "federations").exists(), "a federation was started"
    assert ledger.path.read_bytes() == before  # left as found, for `gameday restore`


@pytest.mark.slow
@pytest.mark.parametrize(("problem", "how"), [("corrupt", "ini"), ("unknown-target", "env")])
def test_ignore_ledger_problems_says_what_it_found_and_drills(pytester: pytest.Pytester, problem: str,
                                                             how: str) -> None:
    pytester.makeini(INI + ("gameday_ignore_ledger_problems = true\n" if how == "ini" else ""))
    pytester.makepyfile(test_drill=LEDGER_DRILL)
    ledger = Ledger(pytester.path / "reports" / ".gameday" / "ledger.json")
    if problem == "corrupt":
        ledger.path.parent.mkdir(parents=True)
        ledger.path.write_text("{truncated")
    else:
        entry_id = _unknown_target_entry(ledger)
    if how == "env":
        pytester._monkeypatch.setenv("GAMEDAY_IGNORE_LEDGER_PROBLEMS", "1")
    result = pytester.runpytest_subprocess("-p", "no:randomly", timeout=180)
    out = result.stdout.str()
    result.assert_outcomes(passed=1)
    assert (pytester.path / "injected").exists()
    assert "going on (--gameday-ignore-ledger-problems)" in out, out
    if problem == "corrupt":
        aside = list(ledger.path.parent.glob("ledger.json.corrupt-*"))
        assert len(aside) == 1 and aside[0].read_text() == "{truncated", out
        assert f"moved aside to {aside[0]}" in out, out
        assert ledger.pending() == []
    else:
        assert "kept for `gameday restore`" in out, out
        assert [e.id for e in ledger.pending()] == [entry_id]  # still there for restore / --forget


# -- timings that feed a verdict must let it fail ---------------------------------------------------------
@pytest.mark.parametrize(("timing", "args", "refused"), [
    ({"stale_after": 600.0}, [], "topology.yaml: timing.stale_after: got 600 s, expected less than the switchover "
     "limit 180 s (--gameday-switchover-limit)*'no stale-snapshot alarms' could never fail*"),
    ({"stale_after": 10.0}, ["--gameday-switchover-limit=10"], "topology.yaml: timing.stale_after: got 10 s, "
     "expected less than the switchover limit 10 s*"),
    ({}, ["--gameday-recovery-window=1"], "--gameday-recovery-window: got 1 s, expected at least 1.67 s at 60 req/s "
     "offered*"),
    ({}, ["--gameday-recovery-window=5", "--gameday-rate=10"], "--gameday-recovery-window: got 5 s, expected at "
     "least 10 s at 10 req/s offered*"),
    # the same values just inside their bounds are accepted: the checks refuse no more than they must
    ({"stale_after": 9.9}, ["--gameday-switchover-limit=10"], None),
    ({}, ["--gameday-recovery-window=1.7"], None),
    ({"stale_after": 179.0}, [], None),
])
def test_a_timing_that_would_keep_its_verdict_from_failing_is_refused_naming_file_and_field(
        pytester: pytest.Pytester, timing: dict[str, float], args: list[str], refused: str | None) -> None:
    base = yaml.safe_load((REPO / "clusters" / "local.yaml").read_text())["timing"]
    topo = _topology(pytester, timing={**base, **timing})
    pytester.makeini(INI)
    pytester.makepyfile(test_t="def test_t(): pass\n")
    result = pytester.runpytest_subprocess(f"--gameday-topology={topo}", *args, "--co", "-q", timeout=60)
    if refused is None:
        assert result.ret == 0, result.stdout.str() + result.stderr.str()
        return
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gameday: {pytester.path}/{refused}"
                                 if refused.startswith("topology") else f"ERROR: gameday: {refused}"])



PROFILE = {
    "name": "team",
    "service": {"fqdn": "app.example.test", "dns": {"server": "127.0.0.1", "port": 9},
                "load": {"port": 9, "path": "/", "host": "app.example.test"}},
    "regions": [{"name": "a", "gateway": "127.0.1.1", "weight": 50},
                {"name": "b", "gateway": "127.0.2.1", "weight": 50}],
    "load": {"rate": 20},
}


@pytest.mark.parametrize(("window", "refused"), [("3", True), ("5", False)])
def test_a_profiles_recovery_window_is_checked_against_its_load(pytester: pytest.Pytester, window: str,
                                                              refused: bool) -> None:
    # A profile's federation: its stale detection is its own, but gameday judges client recovery.
    (pytester.path / "team.yaml").write_text(yaml.safe_dump(PROFILE))
    pytester.makeini(INI)
    pytester.makepyfile(test_t="def test_t(): pass\n")
    result = pytester.runpytest_subprocess("--gameday-target=external", "--gameday-profile=team.yaml",
                                           f"--gameday-recovery-window={window}", "--co", "-q", timeout=60)
    err = result.stderr.str()
    if refused:
        assert result.ret == pytest.ExitCode.USAGE_ERROR, err
        result.stderr.fnmatch_lines(["ERROR: gameday: --gameday-recovery-window: got 3 s, expected at least 5 s "
                                     "at 20 req/s offered (*team.yaml, load.rate, or --gameday-rate)*"])
    else:
        assert "--gameday-recovery-window" not in err, err  # whatever else this unreachable federation fails on


UNWRITABLE = NEVER_INJECT + """
import os, subprocess
from pathlib import Path

def test_ledger_cannot_be_written(drill, never_inject):
    mnt = Path(os.environ["REPORTS_MOUNT"])
    filler = mnt / "filler"
    if os.environ["HOW"] == "full":
        with filler.open("wb") as fh, pytest.raises(OSError):  # until ENOSPC
            for _ in range(4096):
                fh.write(b"x" * 65536)
                fh.flush()
                os.fsync(fh.fileno())
    else:  # a read-only bind over the ledger's folder: the federation's open files keep working
        ledger_dir = mnt / ".gameday"
        subprocess.run(["mount", "--bind", str(ledger_dir), str(ledger_dir)], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ledger_dir)], check=True)
    try:
        with pytest.raises(DrillRefused) as refused:
            with drill.fault("gateway_down", "b"):
                raise AssertionError("the block must not run")
    finally:
        if os.environ["HOW"] == "full":
            filler.unlink()
        else:
            subprocess.run(["umount", str(mnt / ".gameday")], check=True)
    print("REFUSED:", refused.value)
    assert drill.results == [] and drill.active is None
    never_inject.check_health(timeout=2)  # gateway-b still answers
"""


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs for the reports folder: needs root")
@pytest.mark.parametrize(("how", "error"), [("full", "No space left on device"),
                                            ("read-only", "Read-only file system")])
def test_a_reports_filesystem_that_cannot_take_the_ledger_refuses_before_injection(
        pytester: pytest.Pytester, how: str, error: str) -> None:
    # The filesystem fills (or turns read-only) after the federation came up, before the fault:
    # the ledger's probe write fails and the drill is refused, naming the folder and the error.
    mnt = pytester.path / "reports"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)], check=True)
    try:
        pytester.makeini(INI)
        pytester.makepyfile(test_unwritable=UNWRITABLE)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("REPORTS_MOUNT", str(mnt))
            mp.setenv("HOW", how)
            result = pytester.runpytest_subprocess(f"--gameday-reports={mnt}", "-s", timeout=180)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*REFUSED: refusing gateway_down b: the fault ledger {mnt}/.gameday/ledger.json "
                                 f"cannot be written: {error} ({mnt}/.gameday)*nothing was injected"])
    assert "reached the federation" not in result.stdout.str()
