"""The DESIGN.md §4 measurements on hand-made timelines: exact values, resolutions, failures."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from gameday.model.timeline import (
    AlarmObs,
    CpObs,
    DnsObs,
    FaultWindow,
    NodeObs,
    RegionalCpObs,
    RequestRec,
    Timeline,
    UtilObs,
    abort_reason,
)
from gameday.runtime.settings import SLO
from gameday.verdicts.capacity import dynamic_headroom, static_headroom
from gameday.verdicts.measure import client_recovery, dns_convergence, read_latency, switchover, version_check
from gameday.verdicts.result import DrillResult
from gameday.verdicts.stats import FALSE_FAILURE, ratio_above, units_above

NODES = ("gateway-a", "proxy-a", "gateway-c", "proxy-c")


def _timeline(switch_at: dict[str, float], until: float = 5.0) -> Timeline:
    """Entry nodes polled every 0.1 s; each stops routing to b at its time in *switch_at*."""
    tl = Timeline()
    for i in range(int(until * 10) + 1):
        t = round(i * 0.1, 3)
        for n in NODES:
            routes = ("a", "c") if t >= switch_at.get(n, 1e9) else ("a", "b", "c")
            tl.add(NodeObs(t, n, True, 2 if t >= switch_at.get(n, 1e9) else 1, routes))
        tl.add(CpObs(t, 2 if t >= 0.6 else 1))
    return tl


def test_switchover_is_the_last_surviving_node_to_switch_with_one_poll_of_resolution() -> None:
    tl = _timeline({"gateway-a": 0.7, "proxy-a": 0.8, "gateway-c": 1.2, "proxy-c": 0.9})
    f = switchover(tl.nodes, tl.cp, "b", NODES, t_fault=0.2, until=5.0)
    assert f.value == pytest.approx(1.0)
    assert f.resolution == pytest.approx(0.1)
    assert "versions [2]" in f.detail


def test_switchover_not_reached_names_the_node_behind_and_the_published_version() -> None:
    tl = _timeline({"gateway-a": 0.7, "proxy-a": 0.8, "gateway-c": 0.9})  # proxy-c never switches
    f = switchover(tl.nodes, tl.cp, "b", NODES, t_fault=0.2, until=5.0)
    assert f.value is None
    assert "proxy-c still routes to b by v1 at t+4.8 s" in f.detail
    assert "v2 published at t+0.4 s" in f.detail


def test_dns_convergence_is_the_first_answer_after_the_last_one_naming_the_region() -> None:
    tl = Timeline()
    for i in range(30):
        t = i * 0.1
        tl.add(DnsObs(t, True, ("a", "b") if t < 1.05 else ("a",)))
    f = dns_convergence(tl, "b", 0.5, 3.0)
    assert f.value == pytest.approx(0.6)
    assert f.resolution == pytest.approx(0.1)
    assert dns_convergence(tl, "a", 0.5, 3.0).value is None  # still answered at the end


def test_client_recovery_is_the_start_of_the_first_window_within_the_slo() -> None:
    reqs = [RequestRec(i * 0.05, 0 if 1.0 <= i * 0.05 < 3.0 else 200, 0.01) for i in range(400)]
    f = client_recovery(reqs, 1.0, 20.0, window=5.0, slo=0.01)
    assert f.value == pytest.approx(2.0, abs=0.11)  # the window starting at t=3.0 s is clean
    assert client_recovery(reqs, 1.0, 7.0, window=5.0, slo=0.01).value is None
    # Observed only until t=7.85 s: no window is clean, but the one from t=2.7 s holds 5 errors of 100
    # (P(Binomial(100, 0.01) >= 5) = 0.0034 > 1e-3): not shown above 1 %, so it counts.
    f = client_recovery(reqs, 1.0, 7.85, window=5.0, slo=0.01)
    assert f.value == pytest.approx(1.7, abs=0.06)
    assert "over 1.00% in every window, but not shown above it (P(Binomial(100, 0.01) >= 5) = 0.0034" in f.detail


def _clients(n_clients: int, per_client: int, failing: Callable[[int, int], bool]) -> list[RequestRec]:
    """*per_client* requests from each of *n_clients* clients, over 20 s in turn; request j of
    client c fails when ``failing(c, j)``."""
    n = n_clients * per_client
    return [RequestRec(i * 20.0 / n, 0 if failing(i % n_clients, i // n_clients) else 200, 0.01,
                       client=f"c{i % n_clients}") for i in range(n)]


def test_client_recovery_asks_the_clients_before_saying_they_never_recovered() -> None:
    # One client of 20 fails all its 30 requests in every window (5 % of the requests): counted as
    # 600 independent requests that is P(Binomial(600, 0.01) >= 30) = 1.6e-12 in every window; but a
    # client whose share of errors has mean 1 % can fail them all together 1 % of the time, and 1 of
    # 20 does 18 % of the time: not evidence (Chernoff-Hoeffding over 20 clients: 0.44). So the
    # clients recovered by the last window, not "never".
    one = _clients(20, 60, lambda c, j: c == 7)
    f = client_recovery(one, 0.0, 20.0, window=10.0, slo=0.01)
    assert f.value == pytest.approx(10.0), f.detail
    assert "the last window, error ratio 5.000%: every window's requests show it over 1.00%, but its clients' " \
           "errors cluster and do not (Chernoff-Hoeffding over 20 clients' shares (mean 5.00%) <= 0.44" in f.detail
    # Still observing (not final): no figure yet, so the drill observes on for a window within the SLO.
    assert client_recovery(one, 0.0, 20.0, window=10.0, slo=0.01, final=False).value is None
    # Negative control: the same 5 % spread over every client (each fails 1 request in 20) is shown above.
    spread = _clients(200, 6, lambda c, j: (c + j) % 20 == 0)
    f = client_recovery(spread, 0.0, 20.0, window=10.0, slo=0.01)
    assert f.value is None and "also with its clients as the unit: Chernoff-Hoeffding over 200" in f.detail, f.detail


def test_the_client_unit_does_not_place_the_recovery_in_time() -> None:
    # The outage's own first window: 30 % of 40 clients fail their first 3 requests of 15 (6 %
    # of the requests), then none. Counted by requests the first window is shown above 1 %, and
    # the recovery is the first window within it (1.5 s); by clients it would not be (too little
    # power), which would put the recovery at 0 s.
    reqs = _clients(40, 30, lambda c, j: c < 12 and j < 3)
    f = client_recovery(reqs, 0.0, 20.0, window=10.0, slo=0.01)
    assert f.value is not None and f.value > 1.0, f.detail
    assert "<= 1.00%" in f.detail


def test_the_client_unit_holds_its_false_failure_probability_where_requests_fail_together() -> None:
    # The worst healthy case for clustering: each client fails all its requests with probability
    # 1 % (the SLO), independently of the others. Over 20,000 simulated 10 s windows of 40 clients x
    # 15 requests, the client-unit rule shows the ratio above 1 % at most FALSE_FAILURE of the time;
    # the request-unit binomial, assuming the requests independent, far more often than it states.
    rng = random.Random(29)
    trials, by_client, by_request = 20_000, 0, 0
    for _ in range(trials):
        bad = [15 if rng.random() < 0.01 else 0 for _ in range(40)]
        by_client += units_above([(b, 15) for b in bad], 0.01)[0]
        by_request += ratio_above(sum(bad), 600, 0.01)[0]
    assert by_client / trials <= FALSE_FAILURE
    assert by_request / trials > 20 * FALSE_FAILURE  # why the unit matters: 5.9 %, against a stated 0.1 %


def test_client_recovery_decides_the_error_ratio_on_the_window_s_request_counts() -> None:
    # 1.2 % errors in every window: noise around a 1 % SLO with 600 requests a window (P = 0.3).
    noisy = [RequestRec(i / 60, 0 if i % 83 == 0 else 200, 0.01) for i in range(1200)]
    f = client_recovery(noisy, 0.0, 20.0, window=10.0, slo=0.01)
    assert f.value == pytest.approx(0.0) and "but not shown above it" in f.detail
    # Negative control: 5 % errors throughout never recovers (P(Binomial(600, 0.01) >= 30) = 1.6e-12).
    broken = [RequestRec(i / 60, 0 if i % 20 == 0 else 200, 0.01) for i in range(1200)]
    f = client_recovery(broken, 0.0, 20.0, window=10.0, slo=0.01)
    assert f.value is None and "false-failure probability <= 0.001" in f.detail
    # The same 5 % on 20 requests a window is not evidence of anything: it counts as recovered.
    sparse = [RequestRec(i, 0 if i % 20 == 0 else 200, 0.01) for i in range(40)]
    assert client_recovery(sparse, 0.0, 40.0, window=20.0, slo=0.01).value is not None


def test_versions_must_rise_for_the_fault_and_the_restore_and_never_fall() -> None:
    tl = Timeline()
    for t, v in [(0.0, 5), (1.0, 5), (2.0, 6), (4.0, 6), (5.0, 7), (6.0, 7)]:
        tl.add(CpObs(t, v))
    assert version_check(tl, 1.5, 4.5, 6.5).passed
    tl.add(CpObs(6.2, 3))  # an ephemeral control plane came back lower
    c = version_check(tl, 1.5, 4.5, 6.5)
    assert not c.passed
    assert "went back from v7 to v3" in c.detail
    flat = Timeline(cp=[CpObs(0.0, 5), CpObs(3.0, 5), CpObs(6.0, 5)])
    assert "did not increase for the fault" in version_check(flat, 1.0, 4.0, 6.5).detail
    assert version_check(flat, 1.0, 4.0, 6.5, require_increments=False).passed


def test_a_version_rise_during_a_slow_injection_call_counts_for_the_fault() -> None:
    # The landing CI of 2026-12-07: a stopped gateway refused its checks at the signal and the
    # control plane excluded it (v19) before the process exited 1.4 s later, when the call returned.
    tl = Timeline(cp=[CpObs(0.0, 18), CpObs(1.0, 18), CpObs(1.6, 19), CpObs(3.0, 19), CpObs(5.0, 20)])
    assert "did not increase for the fault" in version_check(tl, 2.4, 4.0, 6.0).detail
    assert version_check(tl, 2.4, 4.0, 6.0, t_call=1.0).passed
    # Negative control: a rise before the call started is not the fault's.
    assert "did not increase for the fault (stayed at v19" in version_check(tl, 2.4, 4.0, 6.0, t_call=2.0).detail


def test_static_headroom_shows_the_arithmetic() -> None:
    assert static_headroom({"a": 80, "b": 80, "c": 80}, 60, 0.2).passed
    c = static_headroom({"a": 80, "b": 30, "c": 30}, 60, 0.2)
    assert not c.passed
    assert "without a the others have 60 req/s for 60 req/s x (1 + 0.2) = 72 req/s" in c.detail


def _seconds(region: str, values: list[float], t0: float = 1.0) -> list[UtilObs]:
    """A utilisation reading every 0.5 s, each the last 1 s count: *values* per second, twice."""
    return [UtilObs(t0 + i * 0.5, region, values[i // 2]) for i in range(2 * len(values))]


def test_dynamic_headroom_fails_on_sustained_utilisation_and_on_overload_responses() -> None:
    ok = [RequestRec(1.0 + i * 0.01, 200, 0.01) for i in range(1200)]
    # c above 80 % in every one of 12 seconds: P(Binomial(12, 1/2) >= 12) = 2.4e-4 <= 1e-3.
    util = _seconds("a", [0.5] * 12) + _seconds("c", [0.9] * 12)
    c = dynamic_headroom(util, ok, ("a", "c"), start=0.5, end=14.0, utilisation_limit=0.8, overload_ratio=0.01)
    assert not c.passed
    assert "region c above 80% in 12 of 12 one-second samples" in c.detail
    assert "overloaded, P(Binomial(12, 1/2) >= 12) = 0.00024 <= 0.001 (false-failure probability)" in c.detail
    rejected = ok + [RequestRec(2.0, 503, 0.01)] * 30
    c = dynamic_headroom(_seconds("a", [0.5] * 12), rejected, ("a",), start=0.5, end=14.0,
                         utilisation_limit=0.8, overload_ratio=0.01)
    assert not c.passed and "30 of 1230 requests (2.44%) were rejected as overloaded" in c.detail


def test_a_one_second_burst_above_the_limit_is_not_overload() -> None:
    # The false failure seen once: a healthy region at ~62 % whose one second a CPU stall's burst
    # took to 81 %. One sample above of 12 (P = 0.9997): a pass, and the detail says what was seen.
    values = [0.62] * 12
    values[4] = 0.81
    c = dynamic_headroom(_seconds("b", values), [], ("b",), start=0.5, end=14.0, utilisation_limit=0.8,
                         overload_ratio=0.01)
    assert c.passed, c.detail
    assert "region b above 80% in 1 of 12 one-second samples" in c.detail and "not sustained" in c.detail
    # Before the clients moved (steady_from), a survivor's load is still ramping: not judged.
    ramp = _seconds("b", [0.95] * 3 + [0.6] * 12)
    assert dynamic_headroom(ramp, [], ("b",), start=0.5, end=16.0, utilisation_limit=0.8, overload_ratio=0.01,
                            steady_from=4.0).passed
    # Negative control: the same timeline judged from the start has 3 of 15 above: still a pass (a
    # sign test needs nearly every second above: 12 of 15 is P = 0.018), and 14 of 15 above fails.
    heavy = _seconds("b", [0.6] * 3 + [0.95] * 12)
    c = dynamic_headroom(heavy, [], ("b",), start=0.5, end=16.0, utilisation_limit=0.8, overload_ratio=0.01)
    assert c.passed and "12 of 15" in c.detail and "P = 0.018" in c.detail
    heavy = _seconds("b", [0.6] + [0.95] * 14)
    c = dynamic_headroom(heavy, [], ("b",), start=0.5, end=16.0, utilisation_limit=0.8, overload_ratio=0.01)
    assert not c.passed and "14 of 15" in c.detail


def test_too_few_utilisation_samples_cannot_decide_and_say_so() -> None:
    c = dynamic_headroom(_seconds("b", [0.9] * 5), [], ("b",), start=0.5, end=6.0, utilisation_limit=0.8,
                         overload_ratio=0.01)
    assert c.passed
    assert "5 of 5 one-second samples" in c.detail and "too few samples to decide (10 needed" in c.detail


def test_a_few_overload_responses_are_noise_around_the_slo() -> None:
    ok = [RequestRec(1.0 + i * 0.01, 200, 0.01) for i in range(100)]
    # 5 of 105 (4.8 %) against 1 %: P(Binomial(105, 0.01) >= 5) = 0.0042 > 1e-3: not shown above.
    c = dynamic_headroom(_seconds("a", [0.5] * 3), ok + [RequestRec(2.0, 503, 0.01)] * 5, ("a",), start=0.5,
                         end=3.0, utilisation_limit=0.8, overload_ratio=0.01)
    assert c.passed and "overload 4.76% (not shown above 1.00%: P(Binomial(105, 0.01) >= 5) = 0.0042)" in c.detail


def test_stale_alarms_count_every_proxy_except_those_a_blackhole_cut_off() -> None:
    tl = Timeline(alarms=[AlarmObs(2.0, "proxy-b", "stale_snapshot", "no broadcast heard"),
                          AlarmObs(2.5, "gateway-a", "stale_snapshot")])
    window = FaultWindow("gateway_down", "b", 0.9, 1.0, 4.0, 4.5)
    res = DrillResult(fault=window, timeline=tl, slo=SLO(), survivors=(), capacity={}, offered=1, margin=0,
                      lost=("b",), started=0.0)
    with pytest.raises(AssertionError, match=r"1 stale-snapshot alarm.*proxy-b at t\+1.0 s"):
        res.assert_no_stale_snapshot_alarms()
    res.cut_off = ("b",)  # a blackholed region's own proxy is stale for real
    res.assert_no_stale_snapshot_alarms()


def test_the_restore_increment_counts_from_the_start_of_the_revert_call() -> None:
    """A blackholed region's agent, resumed first, can publish before the revert call has
    resumed the rest of the region and returned: that version is the restore's."""
    tl = Timeline(cp=[CpObs(0.0, 18), CpObs(1.6, 19), CpObs(11.29, 20), CpObs(11.5, 20), CpObs(12.0, 20)])
    window = FaultWindow("region_blackhole", "c", 0.0, 0.01, t_revert=11.30, t_restored=12.0)
    window.t_revert_call = 11.25
    res = DrillResult(fault=window, timeline=tl, slo=SLO(), survivors=(), capacity={}, offered=1, margin=0,
                      lost=("c",), started=0.0)
    assert res.versions().passed, res.versions().detail
    window.t_revert_call = None  # judged from the call's return, the same timeline fails
    assert "did not increase for the restore" in res.versions().detail


def test_dynamic_headroom_says_na_for_regions_without_a_utilisation_source() -> None:
    ok = [RequestRec(1.0 + i * 0.01, 200, 0.01) for i in range(100)]
    # Region c has a source and is observed; b has none: not a failure, and said so.
    c = dynamic_headroom([UtilObs(1.0, "c", 0.5)], ok, ("b", "c"), start=0.5, end=3.0,
                         utilisation_limit=0.8, overload_ratio=0.01, unobservable=("b",))
    assert c.passed, c.detail
    assert "peak utilisation c 50%" in c.detail
    assert "utilisation n/a for b: no utilisation source" in c.detail
    # The overload ratio is the clients' own measurement: it still fails without a utilisation source.
    rejected = ok + [RequestRec(2.0, 503, 0.01)] * 8
    c = dynamic_headroom([], rejected, ("b",), start=0.5, end=3.0, utilisation_limit=0.8,
                         overload_ratio=0.01, unobservable=("b",))
    assert not c.passed
    assert "8 of 108 requests" in c.detail and "utilisation n/a for b" in c.detail
    # Without the flag, a survivor with no observation is still a failure (a source that went quiet).
    c = dynamic_headroom([], ok, ("b",), start=0.5, end=3.0, utilisation_limit=0.8, overload_ratio=0.01)
    assert not c.passed and "no utilisation observed for region b" in c.detail


def test_an_instance_outage_is_judged_by_its_regional_version_where_there_is_one() -> None:
    """R14's regional layout: the instances' health lives in the region's own snapshot, so a
    fault on them must move that region's regional version (the global one may not move at
    all); a region outage is still judged by the global version."""
    flat_global = [CpObs(0.0, 40), CpObs(2.0, 40), CpObs(5.0, 40), CpObs(6.0, 40)]
    regional = [RegionalCpObs(0.0, "c", 3), RegionalCpObs(2.0, "c", 5), RegionalCpObs(5.0, "c", 7),
                RegionalCpObs(6.0, "c", 7), RegionalCpObs(2.0, "a", 9), RegionalCpObs(3.0, "a", 1)]
    tl = Timeline(cp=flat_global, regional_cp=regional)
    c = version_check(tl, 1.0, 4.0, 6.5, regional="c")
    assert c.passed and "region c's regional version" in c.detail, c.detail
    a = version_check(tl, 1.0, 4.0, 6.5, regional="a")  # another region's regression is its own
    assert "regional control-plane version of a (poll) went back from v9 to v1" in a.detail
    window = FaultWindow("instances_unready", "c", 1.0, 1.0, t_revert=4.0, t_restored=6.5)

    def result(instance_outage: bool, timeline: Timeline) -> DrillResult:
        return DrillResult(fault=window, timeline=timeline, slo=SLO(), survivors=(), capacity={}, offered=1,
                           margin=0, lost=("c",), started=0.0, instance_outage=instance_outage)

    assert result(True, tl).versions().passed
    assert "control-plane version did not increase for the fault" in result(False, tl).versions().detail
    # No regional control planes (the global layout): the global version, as before.
    assert not result(True, Timeline(cp=flat_global)).versions().passed
    stuck = Timeline(cp=flat_global, regional_cp=[RegionalCpObs(t, "c", 3) for t in (0.0, 2.0, 5.0)])
    assert "regional control-plane version of c did not increase for the fault" in \
        result(True, stuck).versions().detail


def test_abort_reason_names_the_signal_or_the_error_and_spares_a_verdict() -> None:
    assert abort_reason(KeyboardInterrupt("Ctrl-C (SIGINT)")) == "interrupted by Ctrl-C (SIGINT)"
    assert abort_reason(KeyboardInterrupt()) == "interrupted (KeyboardInterrupt)"
    assert abort_reason(RuntimeError("first\nsecond")) == "RuntimeError: first"
    assert abort_reason(OSError()) == "OSError"
    assert abort_reason(AssertionError("switchover 200 s > 180 s")) is None  # observed: the figures stand


def test_read_latency_is_over_the_requests_served_between_the_fault_and_its_revert() -> None:
    reqs = [RequestRec(t / 10, 200, 0.010 + t / 10_000) for t in range(300)]  # 0-30 s
    reqs += [RequestRec(12.0, 0, 5.0), RequestRec(12.5, 503, 2.0)]  # failures are not latency
    lat = read_latency(reqs, 10.0, 20.0)
    assert lat is not None
    assert (lat["n"], lat["failed"], lat["to_s"]) == (101, 2, 10.0)
    assert lat["p50_s"] == pytest.approx(0.025) and lat["p99_s"] == pytest.approx(0.0299)
    assert read_latency(reqs, 40.0, 50.0) is None  # nothing sent then: no figure, not 0 ms


def test_client_recovery_observed_for_less_than_a_window_says_what_failed_not_a_worst_window() -> None:
    # An aborted drill: 3 s observed with a 10 s window, every request failing.
    reqs = [RequestRec(i / 10, 0, 0.01) for i in range(30)]
    f = client_recovery(reqs, 0.0, 3.0, window=10.0, slo=0.01)
    assert f.value is None
    assert "shorter than one 10 s window" in f.detail and "30 of 30 requests sent after the fault failed (100.0%)" \
        in f.detail, f.detail
    assert "worst window" not in f.detail


def test_the_figures_end_where_the_revert_call_starts_not_where_it_returns() -> None:
    """The landing of 2026-12-07: a foreign gateway restarted by a revert call that took 0.3 s
    served a request sent during the call, and the switchover, measured up to the call's return,
    read "region a still served the last request". What the revert does is not the fault's."""
    dns = [DnsObs(t / 10, ("a", "b") if t < 10 else ("b",)) for t in range(34)]
    reqs = [RequestRec(t / 10, 200, 0.01, region="a" if t < 10 else "b") for t in range(32)]
    reqs.append(RequestRec(3.25, 200, 0.01, region="a"))  # sent during the revert call, served by the restarted a
    window = FaultWindow("gateway_down", "a", 0.0, 0.01, t_revert=3.5)
    window.t_revert_call = 3.2
    res = DrillResult(fault=window, timeline=Timeline(dns=dns, requests=reqs), slo=SLO(), survivors=(),
                      capacity={}, offered=1, margin=0, lost=("a",), started=0.0)
    f = res.switchover()
    assert f.value is not None and f.value == pytest.approx(0.99, abs=0.11), f
    window.t_revert_call = None  # measured up to the call's return, the same timeline fails
    assert res.switchover().value is None and "still served the last request" in res.switchover().detail


def test_the_version_check_reads_to_the_end_of_the_observation_not_the_steady_state() -> None:
    """ci22 of 2026-12-07, R14 on twelve regions: an instance outage's entry nodes route back at
    once (their regions never changed), so the steady state came before the regional version rose
    for the restore; the test kept observing until it was recorded, and the check stopped short."""
    tl = Timeline(cp=[CpObs(0.0, 3), CpObs(1.0, 4), CpObs(2.6, 5), CpObs(3.0, 5)])
    window = FaultWindow("region_blackhole", "c", 0.0, 0.01, t_revert=2.0, t_restored=2.1)
    window.t_revert_call, window.t_observed = 1.9, 3.0
    res = DrillResult(fault=window, timeline=tl, slo=SLO(), survivors=(), capacity={}, offered=1, margin=0,
                      lost=("c",), started=0.0)
    assert res.versions().passed, res.versions().detail
    window.t_observed = None  # judged up to the steady state, the same timeline fails
    assert "did not increase for the restore (stayed at v4" in res.versions().detail
