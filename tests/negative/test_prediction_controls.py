"""The vs-prediction verdicts (DESIGN.md §8) fail against federations slower than they say.

Each control runs the real headline drill (suites/gameday/test_gateway_outage.py) against a
federation broken in one way that still fails over far inside the 180 s limit: every other
verdict passes, and the vs-prediction verdict of the stage that was broken fails, naming it.
The drill's figures file says which verdicts failed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
    # The GSLB and the agents probe every 0.6 s while the topology states 0.2 s: detection takes
    # 1.2-1.8 s against the predicted 0.4-0.6 s (DNS convergence, tolerance 0.6 + ~0.1 + 0.3 s).
    result = broken_run([HEADLINE], {**TTL_1, "defects": {"probe_interval_factor": 3.0}},
                        *OPTS)
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


CACHING_LOCUSTFILE = '''
"""gameday's user, but caching every answer for 10 x its TTL (a resolver that ignores TTLs)."""
import itertools
import time

from gameday.load import locustfile as base

USERS = 20  # clusters/local.yaml load.users
_ORDER = itertools.count()


class CachingUser(base.GamedayUser):
    def resolve(self) -> str:
        now = time.monotonic()
        if self.addr is not None and now < self.expires:
            return self.addr
        first = self.addr is None
        addr = base.GamedayUser.resolve(self)
        hold = 10 * (self.expires - now)
        if first:
            # Locust starts every user at once, so their caches would all expire together, at
            # one moment that falls anywhere in the 10 s after the fault. Spread them: the n-th
            # user holds its first answer n/20 of the time, and every answer after that in full.
            hold *= (next(_ORDER) % USERS + 1) / USERS
        self.expires = now + hold
        return addr
'''


def test_clients_caching_answers_for_10x_the_ttl_fail_client_recovery_vs_prediction(broken_run, pytester):
    # Each of the 20 users (3 requests/s) holds an answer for 10 s, their caches expiring 0.5 s
    # apart, so about 14 of them hold their answer past the predicted 2.6 s after the fault. One
    # of those holding the failed region is 9 errors of a 3 s window's ~180 requests, above the
    # 1 % SLO beyond the binomial noise allowance. The control fails only when none of the 14
    # holds the failed region: 0.5^14 = 6e-5 with region a (50 % of answers; c's 20 % would make
    # it 4 %). Without the spread, every user re-resolved at the same moment, anywhere in 10 s:
    # two fresh-clone CI runs passed the control (2.40 s, 0.90 s), a quarter of runs would.
    # Half the users may fail at once: the stop condition (50 % errors for 5 s) is raised so
    # that it does not abort the drill this control is about.
    (pytester.path / "caching_locustfile.py").write_text(CACHING_LOCUSTFILE)
    seed = seed_picking("a", HEADLINE_ID)
    result = broken_run([HEADLINE], TTL_1, f"--gameday-seed={seed}", *OPTS,
                        "--gameday-locustfile=caching_locustfile.py", "--gameday-stop-error-ratio=0.95")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: not as predicted: client_recovery vs prediction: client "
                                 "recovery * later than predicted 0.00-2.60 s*clients kept the old address past "
                                 "the TTL*"])
    _only_failed(pytester, "client_recovery_vs_prediction")


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
