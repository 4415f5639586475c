"""The state layer's verdicts (DESIGN.md section 9) fail against a store broken to make them fail.

The suite drill ``gameday/test_store_down.py`` kills the store node that leads the data. On the
default topology (``sync``: one replica per region, an acknowledgement is a quorum's) it passes
with no acknowledged write lost (the suites run it). Here the store is broken: it keeps the data
in one replica, in memory, on the primary region's node (``defects.store_unreplicated``), while
the topology still states ``sync``: the store acknowledges writes no other node holds, and the
node's death takes every one of them. ``data_loss`` must fail, naming the count and when the lost
writes were acknowledged, and must not be made inconclusive (it is an exact count).
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

STORE_DOWN = "gameday/test_store_down.py"

FALSE_PASS: dict[str, float] = {
    "test_an_unreplicated_store_fails_data_loss_and_only_data_loss": math.exp(-10),
    "test_async_replication_losing_more_than_its_stated_lag_fails_data_loss_vs_prediction": math.exp(-10),
    "test_a_promotion_slower_than_stated_fails_write_recovery_vs_prediction_and_only_it": math.exp(-12.5),
    "test_reads_from_a_lagging_regional_copy_fail_stale_reads_and_only_stale_reads": 0.0,  # set below
}
"""The random controls here and the chance each states (in its comments) of passing by luck: the
Poisson writer sending nothing in the moments that decide it, or every stale read's client landing
on the primary. ``bench/control_odds.py`` runs each 20 times and writes the observed rate beside it.
The other controls here are decided by counts a defect fixes (every task processed in every region,
a split brain's writes after the promotion), not by luck."""


# The stale-reads control (below): a read-after-write session reads through the region its own
# writer client's DNS answer names, and that answer holds for the 5 s TTL, longer than the 3 s stall:
# the unit of independence is the client, not the write (the first statement, (1/3)^15 per write,
# was false: a bench run saw it fail 1 in 7). It passes by luck when no client whose answer is b or c
# (weights 30 + 20 of 100: q = 0.5) writes in the first EARLY s of the stall (a write later in it is
# stale for less than the 1 s the control asks for). With Poisson writes at RYW_RATE/s spread over
# RYW_WRITERS clients (independent Poisson streams, RYW_RATE x EARLY / RYW_WRITERS each), that is
# prod over the clients of P(it sends none) + P(it sends some) x P(its answer is a).
RYW_WRITERS, RYW_RATE, EARLY, Q_OTHER = 20, 20.0, 1.5, 0.5
_LAM = RYW_RATE * EARLY / RYW_WRITERS
FALSE_PASS["test_reads_from_a_lagging_regional_copy_fail_stale_reads_and_only_stale_reads"] = (
    math.exp(-_LAM) + (1 - math.exp(-_LAM)) * (1 - Q_OTHER)) ** RYW_WRITERS  # 5.4e-5


def _failed_with(result: pytest.RunResult, pattern: str) -> re.Match[str]:
    """The drill failed once, with an assertion matching *pattern* (printed: the figures), never
    inconclusive: each verdict here is an exact count or fails by a margin no starvation explains."""
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    failure = re.search(pattern, out)
    assert failure, out[-3000:]
    print(failure.group(0))
    assert "INCONCLUSIVE" not in out
    return failure


def _figures(root: Path) -> dict[str, object]:
    (path,) = sorted(root.glob("reports/runs/*/drills/*/figures-*.json"))
    data: dict[str, object] = json.loads(path.read_text())
    return data


def test_an_unreplicated_store_fails_data_loss_and_only_data_loss(broken_run, pytester):
    result = broken_run([STORE_DOWN], {"defects": {"store_unreplicated": True}})
    failure = _failed_with(result,
                           r"AssertionError: data loss: (\d+) of (\d+) acknowledged writes lost \(acknowledged from "
                           r"t(-[\d.]+) s to t(-[\d.]+) s around the fault; RPO ([\d.]+) s\)")
    lost, acked = int(failure.group(1)), int(failure.group(2))
    # Every write acknowledged before the kill was held by the one replica only: all of them are
    # lost, all acknowledged before the fault (the writes acknowledged after the restore are not).
    # The drill's 2 s baseline under 5 writes/s makes "none acknowledged before the kill", the one
    # way this control could pass, e^-10 = 5e-5 likely (the writer starts before the baseline).
    assert 1 <= lost < acked
    # (the latest can read "t-0.00 s": acknowledged during the kill call, which t_fault ends)
    assert float(failure.group(4)) <= 0 and float(failure.group(5)) > 0
    summary = _figures(pytester.path)
    state = summary["state"]
    assert isinstance(state, dict)
    assert state["data_loss"]["lost"] == lost  # the figure is in figures-N.json too
    verdicts = {v["name"]: v["outcome"] for v in summary["verdicts"]}  # type: ignore[union-attr]
    # fencing first: n/a (a sync store's acknowledgements name no epoch); writes taken again once the
    # node is back, at the revert (t+8 s): inside the window a Raft election would take (3.0-10.8 s),
    # so the election's prediction cannot tell this store elected nobody; the test stops at data_loss
    assert verdicts == {"fencing": "n/a", "write_recovery": "pass", "write_recovery_vs_prediction": "pass",
                        "data_loss": "fail"}, verdicts


def test_consumers_in_every_region_fail_duplicates_and_only_duplicates(broken_run, pytester):
    # Each region's workers consume the task queue through a consumer of their own, with no claim
    # on what they process (cron jobs running in every region): every task is processed once per
    # region. The same drill passes on the default topology (a shared work-queue consumer, each
    # processing claimed by task id). Every verdict before it (data loss, its prediction, write
    # recovery) passes: the defect breaks only the queue. It cannot pass by luck: about 2 tasks/s
    # over the drill's ~12 s, each processed 3 times; none acknowledged at all fails it too.
    result = broken_run([STORE_DOWN], {"defects": {"consumers_per_region": True}})
    failure = _failed_with(result,
                           r"AssertionError: duplicates: (\d+) of (\d+) acknowledged tasks processed more than once "
                           r"\((\S+) (\d+) times")
    assert int(failure.group(1)) == int(failure.group(2)) >= 1  # every one of them
    # once per region at least (three), more where a stalled worker's task was redelivered (a CI
    # run at load 13 saw one processed 4 times)
    assert int(failure.group(4)) >= 3, failure.group(0)
    summary = _figures(pytester.path)
    verdicts = {v["name"]: v["outcome"] for v in summary["verdicts"]}  # type: ignore[union-attr]
    # (the store's Raft election as stated, nats-server's: the defect leaves it)
    assert verdicts == {"fencing": "n/a", "write_recovery": "pass", "write_recovery_vs_prediction": "pass",
                        "data_loss": "pass", "data_loss_vs_prediction": "pass", "stale_reads": "pass",
                        "duplicates": "fail"}, verdicts


STALL = "gameday/test_replication_stall.py"


def test_async_replication_losing_more_than_its_stated_lag_fails_data_loss_vs_prediction(broken_run, pytester):
    # The same drill passes on the default sync topology (the suites run it): one replica frozen,
    # every acknowledgement was both others', nothing lost. Here replication is asynchronous with
    # a stated max lag of 0.5 s: the primary acknowledged ~10 writes during the 2 s stall that
    # the promoted standby never got. data_loss_vs_prediction fails (asserted first): its RPO about
    # the stall (> 1 s), more than the stated lag allows; never inconclusive. By luck it could pass only if no write was
    # acknowledged in the stall's 2 s at 5 writes/s: e^-10 = 5e-5.
    result = broken_run([STALL], {"state": {"replication": "async", "max_lag": 0.5}})
    failure = _failed_with(result,
                           r"AssertionError: data loss against the stated replication: (\d+) of (\d+) acknowledged "
                           r"writes lost \(acknowledged from t(-[\d.]+) s to t(-[\d.]+) s around the fault; RPO "
                           r"([\d.]+) s\).*predicts RPO <= 0.5 s")
    assert int(failure.group(1)) >= 1 and float(failure.group(5)) > 1.0, failure.group(0)
    figures = [json.loads(p.read_text()) for p in pytester.path.glob("reports/runs/*/drills/*/figures-*.json")]
    verdicts = {f["fault"]: {v["name"]: v["outcome"] for v in f["verdicts"]} for f in figures}
    # the stall's own block asserts nothing; the primary's loss, data_loss_vs_prediction first
    assert verdicts == {"replication_lag": {}, "store_down": {"data_loss_vs_prediction": "fail"}}, verdicts
    assert float(failure.group(4)) <= 0  # every lost write was acknowledged before the kill returned
    (log,) = pytester.path.glob("reports/.gameday/federations/*/logs/storectl.log")
    promoted = [json.loads(line) for line in log.read_text().splitlines() if '"store_promoted"' in line]
    # the primary declared failed (epoch 2: no primary, writes refused), then a standby promoted, once
    failed = [json.loads(line) for line in log.read_text().splitlines() if '"store_primary_failed"' in line]
    assert len(failed) == 1 and failed[0]["epoch"] == 2, failed
    assert len(promoted) == 1 and promoted[0]["epoch"] == 3, promoted


def _verdicts(root: Path) -> dict[str, str]:
    return {v["name"]: v["outcome"] for v in _figures(root)["verdicts"]}  # type: ignore[union-attr]


def test_an_old_primary_that_comes_back_unfenced_fails_fencing(broken_run, pytester):
    # async replication: the store controller promotes a standby when the primary's node is
    # killed (epoch 2). Healthy, the old primary's stream stops taking clients' writes once its
    # node is back, and its region's apps follow the announced primary: fencing passes. Broken,
    # it is never fenced and its region's apps keep writing to it at epoch 1: once it is back
    # (the revert), they are acknowledged there, after the promotion: split brain.
    # The healthy twin is also slow_promotion's (below): its failover as fast as stated.
    healthy = broken_run([STORE_DOWN], {"state": {"replication": "async", "max_lag": 0.5}})
    twin = _verdicts(pytester.path)
    assert (twin.get("fencing"), twin.get("write_recovery_vs_prediction")) == ("pass", "pass"), \
        healthy.stdout.str()[-3000:]
    shutil.rmtree(pytester.path / "reports")
    result = broken_run([STORE_DOWN], {"state": {"replication": "async", "max_lag": 0.5},
                                       "defects": {"unfenced_old_primary": True}})
    failure = _failed_with(result,
                           r"AssertionError: fencing: split brain: epoch 2 from t\+[\d.]+ s; (\d+) writes acknowledged "
                           r"at an older epoch after it \(the first [\d.]+ s after it, epoch 1, through region a\)")
    assert int(failure.group(1)) >= 1
    assert _verdicts(pytester.path) == {"fencing": "fail"}  # the first verdict the drill asserts


def test_a_promotion_slower_than_stated_fails_write_recovery_vs_prediction_and_only_it(broken_run, pytester):
    # async replication, the primary's store node killed. Healthy (the twin above), the controller
    # declares it failed after fall = 3 checks 0.2 s apart (each failing at once or at the controls'
    # 0.5 s timeout), promotes once the 1 s lease ran out, and writes are taken again inside the
    # predicted 1.2-5.0 s. Broken, it waits 6 s more before promoting (an approval step nobody
    # stated): writes are refused until t+7.2 s at the earliest (8.5 s seen), past 5.0 s +
    # resolution + 0.3 s slack. Nothing is taken at an old epoch and nothing is
    # acknowledged while refused: fencing and the 180 s write-recovery limit pass. It could pass by
    # luck only if no write was sent in the ~2.5 s before the promotion (the resolution): at 5
    # writes/s, e^-12.5 = 4e-6.
    result = broken_run([STORE_DOWN], {"state": {"replication": "async", "max_lag": 0.5},
                                       "defects": {"slow_promotion": 6.0}})
    failure = _failed_with(result,
                           r"AssertionError: write recovery vs prediction: ([\d.]+) s ± ([\d.]+) s is ([\d.]+) s later "
                           r"than predicted ([\d.]+)-([\d.]+) s")
    assert float(failure.group(1)) > 6.0 and float(failure.group(5)) <= 5.0, failure.group(0)
    assert _verdicts(pytester.path) == {"fencing": "pass", "write_recovery": "pass",
                                        "write_recovery_vs_prediction": "fail"}


def test_writes_refused_past_the_limit_fail_write_recovery(broken_run, pytester):
    # The same slow promotion against the limit itself: with a 4 s limit (the switchover limit,
    # --gameday-switchover-limit, which write recovery shares), writes taken again after
    # ~6.5-7.5 s fail write_recovery, the verdict before the prediction's.
    # (stale_after below the limit, or the topology is refused: its alarm could never fail)
    result = broken_run([STORE_DOWN], {"state": {"replication": "async", "max_lag": 0.5},
                                       "defects": {"slow_promotion": 6.0}, "timing": {"stale_after": 3}},
                        "--gameday-switchover-limit=4")
    failure = _failed_with(result, r"AssertionError: write recovery ([\d.]+) s, limit 4 s: first write sent after "
                                   r"the fault acknowledged")
    assert float(failure.group(1)) > 6.0, failure.group(0)
    assert _verdicts(pytester.path) == {"fencing": "pass", "write_recovery": "fail"}


RYW = "gameday/test_read_your_writes.py"


def test_reads_from_a_lagging_regional_copy_fail_stale_reads_and_only_stale_reads(broken_run, pytester):
    # async replication, the replicator held for 3 s. Healthy, the apps read by id from the
    # primary: every client finds its own writes (the suite drill passes; run first here, so the
    # control and its healthy twin are seen on the same machine). Broken, a region's apps read from
    # that region's own copy, which the stall holds back: a client whose DNS answer is region b or
    # c does not find what it was just told is stored until the stall ends. Nothing is lost: the
    # read-back the RPO is judged on reads the primary. By luck it could pass only if no writer
    # client whose answer is b or c wrote early in the stall: FALSE_PASS above (20 clients at 20
    # writes/s: 5.4e-5; the default 8 clients at 5/s made it 0.055).
    async_state = {"state": {"replication": "async", "max_lag": 0.5, "writers": RYW_WRITERS,
                             "write_rate": RYW_RATE}}
    healthy = broken_run([RYW], async_state)
    healthy.assert_outcomes(passed=1)
    assert _verdicts(pytester.path) == {"data_loss": "pass", "stale_reads": "pass"}
    shutil.rmtree(pytester.path / "reports")
    result = broken_run([RYW], {**async_state, "defects": {"reads_from_local_replica": True}})
    failure = _failed_with(result,
                           r"AssertionError: stale reads: (\d+) of (\d+) read-after-write reads stale \((\d+) of (\d+) "
                           r"acknowledged writes not found by their own client\); longest staleness ([\d.]+) s after "
                           r"the acknowledgement; served by ([a-c?] \d+(?:, [a-c?] \d+)*)")
    assert int(failure.group(3)) >= 3, failure.group(0)
    # the stale ones were served by the regions that are not the primary (a), and stale for a
    # good part of the stall (a write acknowledged early in it waits for the stall's end)
    served = dict(part.split(" ") for part in failure.group(6).split(", "))
    assert set(served) <= {"b", "c"}, served
    assert float(failure.group(5)) > 1.0, failure.group(0)
    assert _verdicts(pytester.path) == {"data_loss": "pass", "stale_reads": "fail"}


ISOLATED = "gameday/test_store_isolated.py"


def test_an_isolated_old_primary_that_resumes_unfenced_fails_fencing(broken_run, pytester):
    # The primary's store node is frozen (alive, holding everything) while the controller promotes
    # a standby behind its back, then resumed as it was. Healthy, its stream no longer takes
    # clients' writes and its region's apps follow the announced primary: every verdict of the
    # drill passes (run first, on the same machine). Broken, it is never fenced and its region's
    # apps keep writing to it at epoch 1: once resumed, it acknowledges writes after the promotion.
    async_state = {"state": {"replication": "async", "max_lag": 0.5}}
    healthy = broken_run([ISOLATED], async_state)
    # (async may lose what was acknowledged within max_lag before the freeze: data_loss is judged
    # after fencing, so only fencing is this control's twin)
    assert _verdicts(pytester.path).get("fencing") == "pass", healthy.stdout.str()[-3000:]
    shutil.rmtree(pytester.path / "reports")
    result = broken_run([ISOLATED], {**async_state, "defects": {"unfenced_old_primary": True}})
    failure = _failed_with(result,
                           r"AssertionError: fencing: split brain: epoch \d from t\+[\d.]+ s; (\d+) writes "
                           r"acknowledged at an older epoch after it \(the first [\d.]+ s after it, epoch 1, "
                           r"through region a\)")
    assert int(failure.group(1)) >= 1
    assert _verdicts(pytester.path) == {"fencing": "fail"}
