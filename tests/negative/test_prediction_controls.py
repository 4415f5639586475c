"""The vs-prediction verdicts (DESIGN.md §8) fail against federations slower than they say.

Each control runs the real headline drill (suites/gameday/test_gateway_outage.py) against a
federation broken in one way that still fails over far inside the 180 s limit: every other
verdict passes, and the vs-prediction verdict of the stage that was broken fails, naming it.
The drill's figures file says which verdicts failed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from gameday.verdicts.stats import ratio_above
from tests.negative.conftest import seed_picking

pytestmark = pytest.mark.slow

HEADLINE = "gameday/test_gateway_outage.py"
HEADLINE_ID = "test_gateway_outage.py::test_random_gateway_outage"
TTL_1 = {"timing": {"dns_ttl": 1, "probe_timeout": 0.5}}
"""TTL 1 s keeps the drill short; the prediction reads it from the topology. Probe timeout
0.5 s (not 0.15): on a starved machine (load average ~50) the 0.15 s checks of *healthy*
gateways timed out and the GSLB failed open, which failed the 180 s DNS verdict before the
one under test; a stopped gateway refuses at once, so detection does not depend on it."""
OPTS = ("--gameday-recovery-window=3", "--gameday-utilisation-limit=0.95")
"""A short recovery window; and a utilisation limit the 1 s peak of a healthy survivor under
this load cannot reach (it was seen at 81 % of 80 % once): this file controls the
vs-prediction verdicts, the headroom verdict has its own control."""


def _verdicts(path: Path) -> dict[str, str]:
    """Verdict name -> outcome of the one drill under *path*'s reports."""
    files = sorted(path.glob("reports/runs/*/drills/*/figures-*.json"))
    assert len(files) == 1, files
    data: dict[str, Any] = json.loads(files[0].read_text())
    return {v["name"]: v["outcome"] for v in data["verdicts"]}


def _only_failed(pytester: pytest.Pytester, *names: str, may: tuple[str, ...] = ()) -> None:
    """Exactly *names* (and possibly *may*) failed; the 180 s verdicts and the rest passed."""
    verdicts = _verdicts(pytester.path)
    failed = {n for n, o in verdicts.items() if o == "fail"}
    assert set(names) <= failed <= set(names) | set(may), verdicts
    for limit in ("switchover", "dns_convergence", "client_recovery", "versions", "headroom", "stale_alarms"):
        assert verdicts[limit] == "pass", verdicts


def test_a_federation_probing_three_times_slower_than_stated_fails_its_prediction(broken_run, pytester):
    # The GSLB and the agents probe every 1 s while the topology states 0.2 s: detection takes
    # 2-3 s from the first refused probe against the predicted 0.4-0.6 s (DNS convergence,
    # tolerated up to 0.6 + ~0.1 + 0.3 s). Three times slower (1.2-1.8 s) was not enough: on a
    # loaded CI machine stopping the gateway took long enough that its first refused probe came
    # ~0.4 s before the injection call returned (t_fault), DNS "converged" at t+0.80 s and the
    # control passed. Region c (the smallest): its clients' errors stay under the stop condition.
    seed = seed_picking("c", HEADLINE_ID)
    result = broken_run([HEADLINE], {**TTL_1, "defects": {"probe_interval_factor": 5.0}},
                        f"--gameday-seed={seed}", *OPTS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: not as predicted:*dns_convergence vs prediction: dns "
                                 "convergence * later than predicted 0.40-0.60 s*detection took *probe rounds of "
                                 "0.2 s instead of fall = 3*"])
    _only_failed(pytester, "dns_convergence_vs_prediction",
                 may=("switchover_vs_prediction", "client_recovery_vs_prediction"))


def test_a_gslb_answering_a_failed_region_for_5_s_fails_dns_convergence_vs_prediction(broken_run, pytester):
    seed = seed_picking("c", HEADLINE_ID)  # the smallest region: its clients' errors stay under the stop condition
    result = broken_run([HEADLINE], {**TTL_1, "defects": {"gslb_answer_lag": 5.0}}, f"--gameday-seed={seed}",
                        *OPTS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: not as predicted: dns_convergence vs prediction: dns "
                                 "convergence * later than predicted 0.40-0.60 s*DNS kept answering region c * s "
                                 "after the federation's health state changed (control-plane v*"])
    # Clients asked the GSLB during those 5 s too: their recovery is late for the same reason.
    _only_failed(pytester, "dns_convergence_vs_prediction", may=("client_recovery_vs_prediction",))
    assert _verdicts(pytester.path)["switchover_vs_prediction"] == "pass"


def test_a_gslb_applying_its_health_decisions_in_stated_2_s_batches_passes_its_prediction(broken_run, pytester):
    """The control's other side: the reference GSLB applying every health decision at its next 2 s
    batch (``timing.gslb_delay: 2``, stated) is a healthy federation, judged against a DNS window
    2 s wider; it passes every verdict, and its DNS convergence lies inside detection + 2 s."""
    seed = seed_picking("c", HEADLINE_ID)
    result = broken_run([HEADLINE], {"timing": {**TTL_1["timing"], "gslb_delay": 2.0}}, f"--gameday-seed={seed}",
                        *OPTS)
    result.assert_outcomes(passed=1)
    verdicts = _verdicts(pytester.path)
    assert set(verdicts.values()) <= {"pass", "n/a"}, verdicts
    assert verdicts["dns_convergence_vs_prediction"] == "pass"
    figures = json.loads(next(pytester.path.glob("reports/runs/*/drills/*/figures-*.json")).read_text())
    window = figures["prediction"]["windows"]["dns_convergence"]
    assert (window["earliest_s"], window["latest_s"]) == (0.4, 2.6), window
    assert "timing.gslb_delay: the reference GSLB applies its health decisions every 2 s" in window["derivation"]
    assert 0.4 - 0.2 <= figures["dns_convergence"]["value_s"] <= 2.6 + 0.5, figures["dns_convergence"]


CACHING_LOCUSTFILE = '''
"""gameday's clients, but each caching every answer for 10 x its TTL (a resolver that ignores TTLs)."""
import random
import time

from gameday.load import locustfile as base


class CachingUser(base.GamedayUser):
    def on_start(self) -> None:
        # every client holds an answer from the start, as clients already running would: a
        # client whose first request came after the fault would hold no failed address
        base.GamedayUser.on_start(self)
        for client in self.clients:
            self.resolve(client)

    def resolve(self, client: base.Client) -> str:
        now = time.monotonic()
        if client.addr is not None and now < client.expires:
            return client.addr
        first = client.addr is None
        addr = base.GamedayUser.resolve(self, client)
        hold = 10 * client.ttl
        # a cache's phase is uniform over what it holds: the first answer is U x hold old
        age = random.random() * hold if first else 0.0
        client.resolved_at, client.expires = now - age, now - age + hold
        return addr
'''


CACHING_DRILL = '''
"""The headline drill, but client recovery judged against a 4 s limit too, and on past it."""
import pytest


@pytest.mark.gameday
def test_caching_clients(drill, load):
    region = drill.pick_region()
    with drill.fault("gateway_down", region) as fault:
        result = drill.observe_switchover(fault)
    result.assert_switchover_under()
    result.assert_dns_converged()
    result.assert_headroom()
    try:
        result.assert_client_recovered(4.0)
    except AssertionError as exc:
        print(f"LIMIT FAILED: {exc}")
    else:
        print("LIMIT PASSED")
    result.assert_versions_incremented()
    result.assert_no_stale_snapshot_alarms()
    result.assert_as_predicted()
'''


def caching_false_pass(clients: int = 200, share: float = 0.5, rate: float = 0.3, hold: float = 10.0,
                       window: float = 3.0, latest: float = 4.1, max_requests: int = 300) -> float:
    """An upper bound on the chance that the caching-clients control passes by luck.

    The control holds when client recovery fails both the 4 s limit and the 0-2.6 s prediction,
    so it can pass by luck only if some *window*-second window starting at most *latest* s after
    the fault (the 4 s limit plus its 0.1 s resolution) counts as recovered: at most ``k*``
    errors, the most :func:`~gameday.verdicts.stats.ratio_above` does not show above the 1 % SLO
    among at most *max_requests* requests (60/s over 3 s is 180; 300 is never reached). Each of
    *clients* clients holds the failed region with probability *share* (region a's weight, 50 of
    100), its cached answer expires at a time uniform over *hold* s after the fault (its cache's
    phase), and until then it sends a Poisson *rate* of requests that fail, independently of the
    others (one client's errors cluster, the clients do not: the unit is the client). Chernoff's
    bound ``P(S <= k) <= e^(tk) E[e^(-tS)]`` for each window start (0.1 s apart), summed over them.
    Errors of clients that re-resolve before the GSLB drops the region (and hold it 10 s more)
    are left out: they only make the control fail harder. The recovery rule's last step (the last
    window judged with the clients as the unit, when every window's requests show the ratio above
    the SLO) cannot pass it either: it places the recovery at the last window's start, ~10 s after
    the fault at the drill's end, past the 4 s limit."""
    k = 0
    while not ratio_above(k + 1, max_requests, 0.01)[0]:
        k += 1
    assert latest + window <= hold
    total = 0.0
    for tenth in range(round(latest * 10) + 1):
        s = tenth / 10
        best = 1.0
        for t in (x / 20 for x in range(1, 160)):
            a = rate * (1 - math.exp(-t))
            # E[e^(-a L)], L the time the client still holds the failed region within [s, s + window]:
            # expired before s (L = 0), during the window (L uniform on [0, window]), after it
            m = (s + (1 - math.exp(-a * window)) / a + (hold - s - window) * math.exp(-a * window)) / hold
            best = min(best, math.exp(t * k) * (1 - share + share * m) ** clients)
        total += best
    return min(1.0, total)


FALSE_PASS: dict[str, float] = {
    "test_clients_caching_answers_for_10x_the_ttl_fail_client_recovery_against_its_limit_and_prediction": 6e-5,
}
"""The random control here and its stated chance of passing by luck: :func:`caching_false_pass`
(5.6e-5, checked below). ``bench/control_odds.py`` measures it over 20 runs."""


def test_the_caching_controls_stated_odds_are_its_bound() -> None:
    bound = caching_false_pass()
    name = "test_clients_caching_answers_for_10x_the_ttl_fail_client_recovery_against_its_limit_and_prediction"
    assert 1e-6 < bound <= FALSE_PASS[name], bound
    assert caching_false_pass(share=0.15) > 0.05  # the start-up ramp's share (1 run in 20 before): not held


def test_clients_caching_answers_for_10x_the_ttl_fail_client_recovery_against_its_limit_and_prediction(
        broken_run, pytester):
    # Each of the 200 clients (0.3 requests/s each) resolves at the load's start and then holds
    # each answer for 10 s, at a phase uniform over those 10 s, so at the fault about half of
    # them (region a's weight) hold the failed region, and a share 1 - t/10 of those still does
    # t s later: ~27 % errors in the 3 s window from 2.6 s, against the 1 % SLO, and ~20 %
    # from 4 s, the limit this drill states. Errors cluster by client, so the odds are computed
    # with the client as the unit (caching_false_pass: at most 6e-5). Two past causes of luck:
    # the old lockstep load re-resolved every user at one moment (two fresh-clone CI runs passed
    # this control before its users were staggered by hand); and clients resolving lazily meant
    # that ~40 % first asked after the fault, while a start-up race of the GSLB (fixed) ramped
    # region a from 0 in 1 run of 20, leaving 17 clients on it: recovered "at 2.6 s" by noise.
    # Many clients fail at once: the stop condition (50 % errors for 5 s) is raised so that it
    # does not abort the drill. One run kills both verdicts: the limit's failure is caught and
    # printed, and the drill goes on to its prediction.
    (pytester.path / "caching_locustfile.py").write_text(CACHING_LOCUSTFILE)
    pytester.makepyfile(test_caching_drill=CACHING_DRILL)
    seed = seed_picking("a", "test_caching_drill.py::test_caching_clients")
    result = broken_run([], TTL_1, f"--gameday-seed={seed}", *OPTS,
                        "--gameday-locustfile=caching_locustfile.py", "--gameday-stop-error-ratio=0.95")
    result.assert_outcomes(failed=1)
    # two calls: the limit's line is in the captured output, which pytest prints after the
    # traceback that holds the prediction's whole message (the summary line after both is cut at
    # the terminal's width: 80 columns failed this test in every run of bench/control_odds.py)
    result.stdout.fnmatch_lines(["*LIMIT FAILED: clients did not recover within 4 s: *"])
    result.stdout.fnmatch_lines(["*AssertionError: not as predicted: client_recovery vs prediction: client "
                                 "recovery * later than predicted 0.00-2.60 s*clients kept the old address past "
                                 "the TTL*"])
    verdicts = _verdicts(pytester.path)
    assert {n for n, o in verdicts.items() if o == "fail"} == {"client_recovery", "client_recovery_vs_prediction"}, \
        verdicts
    for limit in ("switchover", "dns_convergence", "versions", "headroom", "stale_alarms"):
        assert verdicts[limit] == "pass", verdicts


LATE_FAULT_CONFTEST = '''
"""gateway_down whose effect starts 2 s after its command returns (a fault that does not take
effect as declared: an asynchronous API, a drain period)."""
import threading

from gameday.targets.local.faults import LOCAL_ACTIONS

_ORIGINAL = LOCAL_ACTIONS["gateway_down"]


class TwoSecondsLate:
    def __init__(self):
        self.timer = None

    def inject(self, fed, call):
        self.timer = threading.Timer(2.0, _ORIGINAL.inject, (fed, call))
        self.timer.start()

    def revert(self, fed, call):
        if self.timer is not None:
            self.timer.join()
        _ORIGINAL.revert(fed, call)

    def plan(self, fed, call):
        return _ORIGINAL.plan(fed, call)


LOCAL_ACTIONS.register("gateway_down", TwoSecondsLate(), replace=True)
'''


def test_a_fault_taking_effect_2_s_after_its_command_fails_its_prediction(broken_run, pytester):
    pytester.makeconftest(LATE_FAULT_CONFTEST)
    seed = seed_picking("c", HEADLINE_ID)
    result = broken_run([HEADLINE], TTL_1, f"--gameday-seed={seed}", *OPTS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: not as predicted: switchover vs prediction: switchover * later "
                                 "than predicted 0.40-0.70 s*detection took *, or the fault took effect late*"])
    _only_failed(pytester, "switchover_vs_prediction", "dns_convergence_vs_prediction",
                 may=("client_recovery_vs_prediction",))
