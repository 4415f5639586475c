"""The parts of a drill (gameday/drill/), each on its own: the turn, the guard of the faults in
effect, the wait for the restore, the checks before a fault and the preflight phase.

The whole drill is exercised against the real federation by tests/plugin and the suites; these
pin each part's own contract with target doubles, real ledgers and real lock holders.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gameday.drill import waits
from gameday.drill.checks import DrillChecks
from gameday.drill.context import ActiveFault, DrillContext
from gameday.drill.guard import FaultGuard
from gameday.drill.phases import FaultPhases
from gameday.drill.turns import Turns
from gameday.errors import (
    DrillLockError,
    DrillLockTimeout,
    DrillRefused,
    FaultError,
    FaultUnavailable,
    RestoreIncomplete,
)
from gameday.faults import FAULTS, Ledger
from gameday.interfaces import RegionInfo
from gameday.model.timeline import FaultWindow, NodeObs, RequestRec, Timeline
from gameday.reports.steps import NoSteps
from gameday.runtime.drill_lock import DrillLock
from gameday.runtime.drill_slots import DrillSlots
from gameday.runtime.interrupts import Interrupts
from gameday.runtime.settings import SLO, Settings
from gameday.verdicts.predict import StatedTiming
from gameday.verdicts.result import DrillResult
from tests.test_drill_lock import Recorder
from tests.test_drill_slots import Holder, slots_dir  # noqa: F401 (a fixture)


class ThreeRegions(Recorder):
    """A target double with three regions of 100 req/s; records its injections and reverts."""

    def __init__(self, revert_delay: float = 0.0, revert_fails: bool = False) -> None:
        super().__init__()
        self.revert_delay, self.revert_fails = revert_delay, revert_fails

    def regions(self) -> list[RegionInfo]:
        return [RegionInfo(r, 1, 100, f"127.0.0.{i}") for i, r in enumerate("abc", 1)]

    def revert(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        self.calls.append(f"revert {kind} {region}")
        time.sleep(self.revert_delay)
        if self.revert_fails:
            raise RuntimeError("the API said no")


def _ctx(target: Any, tmp_path: Path, *, settings: Settings | None = None, offered: float = 60,
         lines: list[str] | None = None, skip_unavailable: bool = False) -> DrillContext:
    return DrillContext(
        target=target, settings=settings or Settings(seed=1), ledger=Ledger(tmp_path / "ledger.json"),
        regions=tuple(target.regions()), faults=FAULTS, offered=offered, margin=0.2, load=None,
        progress=(lines if lines is not None else []).append, round=0, seed_key="tests/x.py::test_x", dns_ttl=5.0,
        steps=NoSteps(), interrupts=Interrupts(), skip_unavailable_faults=skip_unavailable, on_result=None,
        on_block_end=None)


def _in_effect(ctx: DrillContext, guard: FaultGuard, kind: str, region: str, tl: Timeline,
               lost: tuple[str, ...]) -> ActiveFault:
    """A fault recorded in the ledger and pushed on the guard's stack, as the inject phase leaves it."""
    entry = ctx.ledger.record(kind, region, {}, "recorder", {})
    window = FaultWindow(kind, region, time.monotonic(), time.monotonic())
    result = DrillResult(fault=window, timeline=tl, slo=SLO(), survivors=(), capacity={}, offered=1, margin=0,
                         lost=lost, started=0.0)
    active = ActiveFault(window, result, SimpleNamespace(error=None), entry.id)  # type: ignore[arg-type]
    guard.stack.append(active)
    return active


# -- the turn ------------------------------------------------------------------------------------------
class SharedHere(Recorder):
    """Shared (a drill lock) and on this machine (a drill slot)."""

    def drill_lock_key(self) -> str:
        return "test:turns"

    def runs_on_this_machine(self) -> bool:
        return True


def test_a_turn_whose_slot_times_out_gives_back_the_drill_lock_it_took(slots_dir: Path,  # noqa: F811
                                                                        tmp_path: Path) -> None:
    holder = Holder(1, slots_dir, tmp_path, "test other.py::test_drill")
    try:
        phases, lines = list[str](), list[str]()
        turns = Turns(SharedHere(), Settings(seed=1, drill_lock_timeout=0.4, local_drill_slots=1), what="test t",
                      progress=lines.append)
        with pytest.raises(DrillLockTimeout, match="refusing gateway_down b: all 1 drill slots"):
            turns.take("gateway_down b", phases.append)
        assert phases == ["lock", "slot"]
        assert turns.note is None
        free = DrillLock("test:turns")
        free.acquire(0)  # free at once (a timeout of 0 raises when it is not): the refused turn gave it back
        free.release()
        holder.release()
        turns.take("gateway_down b", phases.append)
        assert turns.note == "held on test:turns"
        with pytest.raises(DrillLockError, match="this process already holds the drill lock on test:turns"):
            DrillLock("test:turns").acquire(0)
        turns.release()
        turns.release()  # idempotent
        assert turns.note is None
        for held in (DrillLock("test:turns"), DrillSlots(1, directory=slots_dir)):
            held.acquire(0)
            held.release()
    finally:
        holder.release()


def test_a_target_neither_shared_nor_here_takes_no_turn(tmp_path: Path) -> None:
    turns = Turns(Recorder(), Settings(seed=1, local_drill_slots=1), what="test t", progress=print)  # type: ignore[arg-type]
    phases = list[str]()
    turns.take("gateway_down b", phases.append)
    assert phases == [] and turns.note is None
    turns.release()


# -- the guard -------------------------------------------------------------------------------------------
def test_two_threads_reverting_one_fault_revert_it_once_and_clear_its_ledger_entry(tmp_path: Path) -> None:
    target = ThreeRegions(revert_delay=0.2)
    ctx = _ctx(target, tmp_path)
    guard = FaultGuard(ctx)
    tl = Timeline(t0=time.monotonic())
    active = _in_effect(ctx, guard, "gateway_down", "b", tl, ("b",))
    threads = [threading.Thread(target=guard.revert, args=(active, None)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert target.calls == ["revert gateway_down b"]
    assert active.reverted and active.window.t_revert is not None and active.window.aborted is None
    assert [m.label for m in tl.marks] == ["revert"]
    assert ctx.ledger.pending() == []


def test_a_failed_revert_keeps_its_ledger_entry_and_says_how_to_restore(tmp_path: Path) -> None:
    ctx = _ctx(ThreeRegions(revert_fails=True), tmp_path)
    guard = FaultGuard(ctx)
    active = _in_effect(ctx, guard, "gateway_down", "b", Timeline(t0=0.0), ("b",))
    with pytest.raises(RestoreIncomplete, match="reverting gateway_down b failed; the ledger keeps it: run "
                                                "`gameday restore`"):
        guard.revert(active, None)
    assert not active.reverted
    assert [e.id for e in ctx.ledger.pending()] == [active.ledger_id]


def test_the_stop_condition_reverts_every_fault_innermost_first_once_the_breach_lasts(tmp_path: Path) -> None:
    target = ThreeRegions()
    ctx = _ctx(target, tmp_path, settings=Settings(seed=1, slo=SLO(stop_error_ratio=0.5, stop_after=1.0)))
    guard = FaultGuard(ctx)
    tl = Timeline(t0=0.0)
    outer = _in_effect(ctx, guard, "gateway_down", "a", tl, ("a",))
    inner = _in_effect(ctx, guard, "gateway_down", "b", tl, ("a", "b"))
    # 100 % of requests fail from t=10 on; 40 % before: under the ratio, no breach.
    tl.requests.extend(RequestRec(5 + i * 0.01, 200 if i % 5 > 1 else 0, 0.01) for i in range(500))
    tl.requests.extend(RequestRec(10 + i * 0.01, 0, 0.01) for i in range(300))
    guard.on_tick(9.9)
    assert target.calls == []
    guard.on_tick(11.0)  # the breach starts
    guard.on_tick(11.9)  # 0.9 s: not yet
    assert target.calls == []
    guard.on_tick(12.05)
    assert target.calls == ["revert gateway_down b", "revert gateway_down a"]
    assert all(f.reverted and f.window.aborted and "client error ratio 100% above 50%" in f.window.aborted
               for f in (outer, inner))
    assert [m.label for m in tl.marks] == ["stop_condition", "revert", "revert"]
    assert ctx.ledger.pending() == []
    guard.on_tick(12.5)  # already reverted: nothing more
    assert len(target.calls) == 2


# -- the wait for the restore ------------------------------------------------------------------------------
def _reverted(tmp_path: Path, nodes: list[NodeObs]) -> tuple[FaultGuard, ActiveFault]:
    ctx = _ctx(ThreeRegions(), tmp_path)
    guard = FaultGuard(ctx)
    t_revert = time.monotonic() - 1.0
    tl = Timeline(t0=0.0, nodes=[NodeObs(t_revert + dt, n.node, n.ok, routable=n.routable) for dt, n in
                                 zip((0.1, 0.2, 0.3, 0.4), nodes, strict=False)])
    active = _in_effect(ctx, guard, "gateway_down", "b", tl, ("b",))
    active.window.t_revert = t_revert
    entry = [SimpleNamespace(name=f"gw-{r}", region=r) for r in "abc"]
    active.observer = SimpleNamespace(sources=SimpleNamespace(entry_nodes=entry, control_plane=None))  # type: ignore[assignment]
    return guard, active


def test_the_restore_is_seen_when_every_entry_node_routes_to_every_region_again(tmp_path: Path) -> None:
    every = ("a", "b", "c")
    guard, active = _reverted(tmp_path, [NodeObs(0, f"gw-{r}", True, routable=every) for r in "abc"])
    waits.restored(guard, active, timeout=2.0)
    assert active.window.t_restored == active.window.t_revert + 0.3  # type: ignore[operator]
    assert [m.label for m in active.result.timeline.marks] == ["restored"]


def test_a_restore_that_leaves_one_node_routing_around_the_region_is_not_seen_and_says_so(tmp_path: Path) -> None:
    nodes = [NodeObs(0, "gw-a", True, routable=("a", "b", "c")), NodeObs(0, "gw-b", True, routable=("a", "b", "c")),
             NodeObs(0, "gw-c", True, routable=("a", "c"))]
    guard, active = _reverted(tmp_path, nodes)
    started = time.monotonic()
    with pytest.raises(FaultError, match=r"after reverting gateway_down b the federation did not return to steady "
                                         r"state within 0.3 s \(every entry node routing to \['a', 'b', 'c'\]\)"):
        waits.restored(guard, active, timeout=0.3)
    assert time.monotonic() - started >= 0.3
    assert active.window.t_restored is None
    # Still out (N-2: another fault holds c): routing around c is the steady state to wait for.
    guard2, active2 = _reverted(tmp_path / "n2", [NodeObs(0, f"gw-{r}", True, routable=("a", "b")) for r in "ab"])
    waits.restored(guard2, active2, timeout=2.0, still_lost=("c",))
    assert active2.window.t_restored is not None


# -- the checks before a fault -------------------------------------------------------------------------------
class StatesTtl(ThreeRegions):
    """States its timing; the DNS server answers with another TTL when *contradicted*."""

    def __init__(self, contradicted: bool) -> None:
        super().__init__()
        self.contradicted = contradicted

    def stated_timing(self, *, prefer_observed_ttl: bool = False) -> StatedTiming:
        ttl = 30.0 if prefer_observed_ttl and self.contradicted else 5.0
        return StatedTiming(source="profile team.yaml", probe_interval=1.0, probe_timeout=0.5, fall=3, dns_ttl=ttl)

    def timing_contradiction(self) -> str | None:
        return "the DNS server answers with TTL 30 s, team.yaml timing.dns_ttl says 5 s" if self.contradicted else None


def test_the_prediction_is_refused_on_a_contradicted_ttl_unless_the_observed_one_is_accepted(tmp_path: Path) -> None:
    fault = FAULTS["gateway_down"]
    unpredicted = DrillChecks(_ctx(ThreeRegions(), tmp_path)).prediction(fault, "gateway_down b",
                                                                         entry_nodes_route=True)
    assert "the recorder target states no failover timing" in "\n".join(unpredicted.lines())
    stated = DrillChecks(_ctx(StatesTtl(False), tmp_path)).prediction(fault, "gateway_down b", entry_nodes_route=True)
    with pytest.raises(DrillRefused, match=r"refusing gateway_down b: the DNS server answers with TTL 30 s, "
                                           r"team.yaml timing.dns_ttl says 5 s\. Correct the stated value, or drill "
                                           r"with --gameday-accept-observed-ttl"):
        DrillChecks(_ctx(StatesTtl(True), tmp_path)).prediction(fault, "gateway_down b", entry_nodes_route=True)
    observed = DrillChecks(_ctx(StatesTtl(True), tmp_path, settings=Settings(seed=1, accept_observed_ttl=True))) \
        .prediction(fault, "gateway_down b", entry_nodes_route=True)
    # Judged with the TTL the server answers with: the clients' window moves by the 25 s difference.
    assert observed.window("client_recovery").latest == pytest.approx(stated.window("client_recovery").latest + 25)


# -- the preflight phase ---------------------------------------------------------------------------------------
def _phases(ctx: DrillContext) -> tuple[FaultPhases, FaultGuard]:
    guard = FaultGuard(ctx)
    return FaultPhases(ctx, guard, Turns(ctx.target, ctx.settings, what="t", progress=ctx.progress),
                       DrillChecks(ctx), []), guard


def test_a_nested_fault_is_checked_against_every_region_lost_so_far(tmp_path: Path) -> None:
    # 60 req/s x 1.2 = 72: a or c alone carries it (100), so N-1 passes; N-2 is judged the same way.
    ctx = _ctx(ThreeRegions(), tmp_path)
    phases, guard = _phases(ctx)
    first = phases.preflight("gateway_down", "a", {}, baseline=1, restore_timeout=5)
    assert (first.parent, first.already_lost, first.lost, first.takes_region_out) == (None, (), ("a",), True)
    parent = _in_effect(ctx, guard, "gateway_down", "a", Timeline(t0=0.0), ("a",))
    second = phases.preflight("gateway_down", "b", {}, baseline=1, restore_timeout=5)
    assert (second.parent, second.already_lost, second.lost, second.label) == (parent, ("a",), ("a", "b"),
                                                                               "gateway_down b")
    heavy, heavy_guard = _phases(_ctx(ThreeRegions(), tmp_path / "heavy", offered=90))  # 108 > 100 of c alone
    _in_effect(heavy.ctx, heavy_guard, "gateway_down", "a", Timeline(t0=0.0), ("a",))
    with pytest.raises(DrillRefused, match="gateway_down b"):
        heavy.preflight("gateway_down", "b", {}, baseline=1, restore_timeout=5)
    assert heavy.ctx.target.calls == []  # type: ignore[attr-defined]


class CannotBlackhole(ThreeRegions):
    def plan_fault(self, kind: str, region: str | None, params: dict[str, Any]) -> tuple[str, str]:
        if kind == "region_blackhole":
            raise FaultUnavailable("the profile names no firewall for it")
        return f"stop {region}", f"start {region}"


def test_a_fault_the_target_cannot_plan_skips_a_conformance_check_and_errors_a_drill(tmp_path: Path) -> None:
    phases, _ = _phases(_ctx(CannotBlackhole(), tmp_path, skip_unavailable=True))
    with pytest.raises(pytest.skip.Exception, match="target recorder cannot inject region_blackhole b: the profile "
                                                     "names no firewall for it"):
        phases.preflight("region_blackhole", "b", {}, baseline=1, restore_timeout=5)
    strict, _ = _phases(_ctx(CannotBlackhole(), tmp_path))
    with pytest.raises(FaultUnavailable):
        strict.preflight("region_blackhole", "b", {}, baseline=1, restore_timeout=5)
    planned = strict.preflight("gateway_down", "b", {}, baseline=1, restore_timeout=5)
    assert planned.plan == ("stop b", "start b")
