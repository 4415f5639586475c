"""The prediction of DESIGN.md §8 and the vs-prediction verdicts, on hand-made timelines."""

from __future__ import annotations

from pathlib import Path

import pytest

from gameday.model.timeline import CpObs, DnsObs, FaultWindow, NodeObs, RequestRec, Timeline
from gameday.model.topology import load_topology
from gameday.runtime.settings import SLO
from gameday.verdicts.predict import StatedTiming, from_topology, judge, predict, unpredicted
from gameday.verdicts.result import DrillResult

NODES = ("gateway-a", "proxy-a", "gateway-c", "proxy-c")
LOCAL = StatedTiming(source="test", probe_interval=0.2, probe_timeout=0.15, fall=3, dns_ttl=1.0,
                     gslb_propagation=0.0, entry_propagation=0.1, entry_propagation_from="stated", request=1.0)


def test_detection_of_a_refused_gateway_is_fall_minus_one_to_fall_intervals() -> None:
    p = predict(LOCAL, "gateway_down", "at once", entry_nodes_route=True)
    assert p.detection is not None
    assert (p.detection.earliest, p.detection.latest) == pytest.approx((0.4, 0.6))
    assert p.window("dns_convergence").shown() == "0.40-0.60 s"
    assert p.window("switchover").shown() == "0.40-0.70 s"
    cr = p.window("client_recovery")
    assert (cr.earliest, cr.latest) == pytest.approx((0.0, 0.6 + 1.0 + 1.0))
    assert "TTL 1 s" in cr.derivation
    assert "3 x 0.2 s checks, each failing at once" in p.summary()


def test_a_hung_gateway_fails_each_check_at_the_timeout() -> None:
    p = predict(LOCAL, "gateway_hung", "at the timeout", entry_nodes_route=True)
    assert p.detection is not None
    # (fall - 1) x interval + timeout .. fall x (interval + timeout)
    assert (p.detection.earliest, p.detection.latest) == pytest.approx((0.55, 1.05))


def test_the_default_topology_predicts_from_its_own_timings() -> None:
    topo = load_topology()
    t = from_topology(topo, "topology local")
    assert (t.probe_interval, t.probe_timeout, t.fall, t.dns_ttl) == (0.2, 0.15, 3, 5.0)
    assert t.entry_propagation == pytest.approx(topo.control_plane.broadcast_delay + 0.1)
    delayed = from_topology(topo.with_overrides(control_plane={"broadcast_delay": 2.0}), "t")
    w = predict(delayed, "gateway_down", "at once", entry_nodes_route=True).window("switchover")
    assert (w.earliest, w.latest) == pytest.approx((2.4, 2.7))  # the stated delay moves both bounds


def test_a_stated_gslb_delay_widens_only_the_dns_path_and_says_where_it_came_from() -> None:
    topo = load_topology()
    batched = from_topology(topo.with_overrides(timing={**topo.timing.model_dump(), "gslb_delay": 1.5}), "t")
    assert batched.gslb_propagation == 1.5
    p = predict(batched, "gateway_down", "at once", entry_nodes_route=True)
    plain = predict(from_topology(topo, "t"), "gateway_down", "at once", entry_nodes_route=True)
    dns, dns0 = p.window("dns_convergence"), plain.window("dns_convergence")
    assert (dns.earliest, dns.latest) == pytest.approx((dns0.earliest, dns0.latest + 1.5))  # a batch may be due
    assert "GSLB propagation <= 1.5 s (timing.gslb_delay: the reference GSLB applies its health decisions " \
           "every 1.5 s)" in dns.derivation
    assert p.window("client_recovery").latest == pytest.approx(plain.window("client_recovery").latest + 1.5)
    assert p.window("switchover") == plain.window("switchover")  # the entry nodes do not ask the GSLB
    assert "answers from its decisions at once" in dns0.derivation


def test_an_unknown_input_makes_the_window_unknown_never_a_pass() -> None:
    none = StatedTiming(source="profile p.yaml")
    p = predict(none, "gateway_down", "at once", entry_nodes_route=True)
    assert all(not p.window(n).known for n in ("switchover", "dns_convergence", "client_recovery"))
    assert "probe_interval, probe_timeout, fall not stated (profile p.yaml)" in str(p.window("switchover").unknown)
    # detection stated, entry-node propagation not: only switchover (on entry nodes) is unknown
    partial = StatedTiming(source="p", probe_interval=1.0, probe_timeout=0.5, fall=3, dns_ttl=5.0)
    q = predict(partial, "gateway_down", "at once", entry_nodes_route=True)
    assert not q.window("switchover").known and "timing.propagation" in str(q.window("switchover").unknown)
    assert q.window("dns_convergence").known and q.window("client_recovery").known
    # no entry node routes: switchover is measured from DNS, predicted from it
    r = predict(partial, "gateway_down", "at once", entry_nodes_route=False)
    assert r.window("switchover").shown() == "2.00-4.00 s"  # 2-3 s + one request (1 s)
    assert not predict(LOCAL, "region_blackhole", None, entry_nodes_route=True).window("switchover").known
    assert unpredicted("x", "why").window("dns_convergence").unknown == "why"


def test_judge_tolerates_resolution_and_slack_and_fails_outside() -> None:
    w = predict(LOCAL, "gateway_down", "at once", entry_nodes_route=True).window("switchover")  # 0.4-0.7
    assert judge(w, 1.0, 0.1, slack=0.3).outcome == "pass"  # 0.7 + 0.1 + 0.3 = 1.1
    late = judge(w, 1.5, 0.1, slack=0.3)
    assert late.outcome == "late" and late.by == pytest.approx(0.4)
    assert judge(w, 0.31, 0.1, slack=0.3).outcome == "pass"  # 0.4 - 0.1 (no slack below: nothing makes it early)
    early = judge(w, 0.05, 0.1, slack=5.0)
    assert early.outcome == "early" and early.by == pytest.approx(0.25)
    assert judge(w, 0.05, 0.1, slack=0.3, injection_uncertainty=0.3).outcome == "pass"
    assert judge(w, None, 0.0, slack=0.3).outcome == "not reached"
    assert judge(unpredicted("x", "why").window("switchover"), 1.0, 0.1, slack=0.3).outcome == "n/a"


def _result(*, switch_at: float, dns_at: float, cp_at: float, errors_until: float, t_fault: float = 1.0,
            timing: StatedTiming = LOCAL) -> DrillResult:
    """A drill of gateway_down b at *t_fault*: the control plane's version rises at *cp_at*, every
    entry node excludes b at *switch_at*, the GSLB stops answering b at *dns_at*, client requests
    fail until *errors_until* (all absolute times)."""
    tl = Timeline()
    for i in range(200):
        t = round(i * 0.1, 3)
        for n in NODES:
            tl.add(NodeObs(t, n, True, 2 if t >= switch_at else 1, ("a", "c") if t >= switch_at else ("a", "b", "c")))
        tl.add(CpObs(t, 2 if t >= cp_at else 1))
        tl.add(DnsObs(t, True, ("a",) if t >= dns_at else ("a", "b"), ttl=1))
    for i in range(400):
        t = i * 0.05
        tl.add(RequestRec(t, 0 if t_fault <= t < errors_until and i % 3 == 0 else 200, 0.01))
    window = FaultWindow("gateway_down", "b", t_fault, t_fault, t_revert=19.0, t_restored=19.5)
    return DrillResult(fault=window, timeline=tl, slo=SLO(recovery_window=3.0), survivors=NODES, capacity={},
                       offered=1, margin=0, lost=("b",), started=0.0, switchover_observed=True,
                       prediction=predict(timing, "gateway_down", "at once", entry_nodes_route=True))


def test_a_drill_inside_its_windows_passes_all_three() -> None:
    res = _result(switch_at=1.6, dns_at=1.6, cp_at=1.5, errors_until=2.5)
    verdicts = res.assert_as_predicted()
    assert [v.outcome for v in verdicts] == ["pass", "pass", "pass"]
    assert [v.name for v in res.verdicts] == ["switchover_vs_prediction", "dns_convergence_vs_prediction",
                                              "client_recovery_vs_prediction"]
    summary = res.summary()
    assert summary["vs_prediction"]["switchover"]["outcome"] == "pass"  # type: ignore[index]
    assert summary["prediction"]["windows"]["switchover"]["latest_s"] == pytest.approx(0.7)  # type: ignore[index]


def test_a_figure_an_aborted_drill_never_reached_is_na_and_otherwise_fails() -> None:
    # Clients still failing when the block ended: client recovery is not reached.
    never = _result(switch_at=1.6, dns_at=1.6, cp_at=1.5, errors_until=30.0)
    assert never.vs_prediction("client_recovery").outcome == "fail"
    aborted = _result(switch_at=1.6, dns_at=1.6, cp_at=1.5, errors_until=30.0)
    aborted.fault.aborted = "interrupted by Ctrl-C (SIGINT)"
    verdict = aborted.vs_prediction("client_recovery")
    assert (verdict.outcome, verdict.detail) == (
        "n/a", "client recovery not reached before the drill was aborted (interrupted by Ctrl-C (SIGINT))")


def test_slow_detection_is_named_as_probe_rounds_instead_of_fall() -> None:
    # the control plane only learns at t+1.5 s: 7-8 rounds of 0.2 s, not 3
    res = _result(switch_at=2.6, dns_at=2.6, cp_at=2.5, errors_until=3.5)
    with pytest.raises(AssertionError, match=r"not as predicted: switchover vs prediction: switchover 1\.60 s "
                       r".* later than predicted 0\.40-0\.70 s .*detection took 1\.50 s, about 8 probe rounds of "
                       r"0\.2 s instead of fall = 3"):
        res.assert_as_predicted()
    assert [v.outcome for v in res.verdicts] == ["fail", "fail", "pass"]


def test_a_gslb_answering_after_the_health_state_changed_is_named() -> None:
    res = _result(switch_at=1.6, dns_at=4.0, cp_at=1.5, errors_until=2.5)
    with pytest.raises(AssertionError) as exc:
        res.assert_as_predicted()
    assert [v.outcome for v in res.verdicts] == ["pass", "fail", "pass"]
    assert "DNS kept answering region b 2.50 s after the federation's health state changed (control-plane v2 " \
           "at t+0.50 s" in str(exc.value)
    assert "states so in timing.gslb_delay" in str(exc.value)  # the field that would have said so


def test_clients_holding_the_address_past_the_ttl_are_named() -> None:
    res = _result(switch_at=1.6, dns_at=1.6, cp_at=1.5, errors_until=10.0)
    with pytest.raises(AssertionError) as exc:
        res.assert_as_predicted()
    assert [v.outcome for v in res.verdicts] == ["pass", "pass", "fail"]
    assert "clients kept the old address past the TTL" in str(exc.value)


def test_faster_than_the_stated_timing_fails_too() -> None:
    # every node moved 0.1 s after the fault: 3 checks 0.2 s apart cannot have failed by then
    res = _result(switch_at=1.1, dns_at=1.1, cp_at=1.05, errors_until=1.2)
    with pytest.raises(AssertionError, match=r"faster than the stated timing allows .* the fault did not take "
                       r"effect as declared, or the timing is wrong"):
        res.assert_as_predicted()
    assert [v.outcome for v in res.verdicts] == ["fail", "fail", "pass"]  # client recovery has no lower bound


def test_an_unknown_input_is_na_with_the_reason() -> None:
    res = _result(switch_at=5.0, dns_at=5.0, cp_at=5.0, errors_until=9.0, timing=StatedTiming(source="profile p"))
    verdicts = res.assert_as_predicted()  # n/a never raises, never passes
    assert [v.outcome for v in verdicts] == ["n/a", "n/a", "n/a"]
    assert "not stated (profile p)" in verdicts[0].detail


def test_every_built_in_target_states_its_timing() -> None:
    from gameday.interfaces import StatesTiming
    from gameday.targets.external import ExternalTarget
    from gameday.targets.k8s.kind import KindTarget
    from gameday.targets.k8s.kube import KubeTarget
    from gameday.targets.k8s.profiled import ProfileKubeTarget
    from gameday.targets.local import LocalTarget

    for cls in (LocalTarget, KindTarget, KubeTarget, ExternalTarget, ProfileKubeTarget):
        assert issubclass(cls, StatesTiming), cls


def test_the_local_target_states_the_topology_it_runs(tmp_path: Path) -> None:
    from gameday.targets.local import LocalTarget

    target = LocalTarget(load_topology().with_overrides(control_plane={"broadcast_delay": 1.5}), tmp_path / "fed")
    t = target.stated_timing()  # planned, never started
    assert (t.probe_interval, t.fall, t.dns_ttl, t.entry_propagation) == (0.2, 3, 5.0, pytest.approx(1.6))
    assert t.source == "topology 'local'" and target.timing_contradiction() is None
