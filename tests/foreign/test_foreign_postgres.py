"""What a failover did to the data of a federation gameday did not build: a real PostgreSQL primary
and standby behind a team's tiny HTTP service (``postgres.py``), drilled through the ``external``
target with a profile whose ``state:`` section says how to write and read back (issue 27 item 6).

The fault ``pg_failover`` is the profile's own commands: the standby is cut off from the primary
for 0.5 s (replication stalled: the primary goes on acknowledging writes the standby never
receives), then the primary is stopped (``pg_ctl stop -m immediate``) and the standby promoted;
the inverse re-creates the old primary as the new one's standby.

- Asynchronous replication: every write the primary acknowledged during the stall is gone from
  the promoted standby. ``data_loss`` is measured and fails, counting them (at 40 writes/s over
  the 0.5 s stall, ~20; none acknowledged in the stall, the only way this could pass, is
  e^-20 likely), and the ids it names are not in the database.
- Synchronous replication (``synchronous_standby_names = '*'``) under the same stall: a commit
  waits for the standby, so the stalled writes are never acknowledged (they are indeterminate)
  and ``data_loss`` passes with 0 of the acknowledged writes lost.

Both measure write recovery (the first acknowledgement of a write sent after the fault); the
synchronous one is also judged against the profile's stated replication (sync: 0 lost).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from tests.foreign.conftest import FOREIGN_GROUP
from tests.foreign.federation import PACKAGES_SCRIPT
from tests.foreign.postgres import PACKAGES, PgFederation, missing

pytestmark = [pytest.mark.slow, FOREIGN_GROUP]

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"
#: Seconds the standby is cut off before the primary is stopped.
CUT_S = 0.5
#: Writes per second: ~20 acknowledged by the primary during the cut.
WRITE_RATE = 40.0

DRILL = '''
import pytest


@pytest.mark.gameday
def test_pg_failover(drill):
    # 2 s of steady state under the writer before the failover, 3 s after it
    with drill.fault("pg_failover", baseline=2.0) as fault:
        result = drill.observe(fault, seconds=3)
    result.assert_verdict("write_recovery")  # writes accepted again by the promoted standby
    result.assert_verdict("data_loss")  # no acknowledged write lost
    result.assert_verdict("data_loss_vs_prediction")  # as the profile's stated replication predicts
'''


def _ensure_packages(lock_dir: Path) -> None:
    if missing() is None:
        return
    env = {**os.environ, "GAMEDAY_FOREIGN_PACKAGES": PACKAGES}
    with FileLock(str(lock_dir / "foreign-debian-packages.lock"), timeout=600):
        r = subprocess.run([str(PACKAGES_SCRIPT)], capture_output=True, text=True, timeout=600, check=False, env=env)
    why = missing()
    if why is not None:
        pytest.skip(f"the PostgreSQL federation cannot run here: {why} ({r.stderr.strip()[-400:]})")


@pytest.fixture(scope="module")
def pg_federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgFederation]:
    """A running PostgreSQL federation for the module; every process stopped at the end, and none
    left (the servers' children are checked by their process titles, not their process group)."""
    _ensure_packages(tmp_path_factory.getbasetemp().parent)
    fed = PgFederation.plan()
    try:
        fed.start()
        yield fed
    finally:
        fed.stop()
        left = fed.leftovers()
        if not left:
            fed.remove()
        assert not left, f"processes outlived the PostgreSQL federation in {fed.root}: {left}"


@pytest.fixture
def pg(pg_federation: PgFederation) -> Iterator[PgFederation]:
    """The module's federation, whole before the test and after it (a failed drill may leave the
    old primary down: the fault's own inverse puts it back)."""
    pg_federation.heal()
    try:
        yield pg_federation
    finally:
        pg_federation.heal()


def _drill(pytester: pytest.Pytester, profile: Path) -> tuple[pytest.RunResult, dict[str, Any], float]:
    pytester.makeini(INI)
    pytester.makepyfile(test_pg=DRILL)
    start = time.monotonic()
    result = pytester.runpytest_subprocess("--gameday-target=external", f"--gameday-profile={profile}",
                                           "--gameday-seed=27", timeout=180)
    took = time.monotonic() - start
    (path,) = sorted(pytester.path.glob("reports/runs/*/drills/*/figures-*.json"))
    figures: dict[str, Any] = json.loads(path.read_text())
    print(json.dumps(figures.get("state"), indent=2))
    return result, figures, took


def _summary(mode: str, figures: dict[str, Any], took: float) -> str:
    st = figures["state"]
    loss, rec = st["data_loss"], st["write_recovery"]
    return (f"{mode}: writes {st['writes']}; {loss['lost']} of {loss['acked_read_back']} acknowledged lost, RPO "
            f"{loss['rpo_s'] if loss['rpo_s'] is None else round(loss['rpo_s'], 3)} s; {loss['indeterminate']} "
            f"indeterminate ({loss['indeterminate_found']} stored); write recovery {rec['value_s']:.3f} s "
            f"(+/- {rec['resolution_s']} s, node {rec['region']}); drill run {took:.1f} s")


def test_async_replication_loses_the_writes_acknowledged_during_the_stall_and_data_loss_fails(
        pg: PgFederation, pytester: pytest.Pytester, tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    pg.set_sync(False)
    before = pg.state()["primary"]
    profile = pg.write_profile(tmp_path / "pg.yaml", replication="async", max_lag=0.1, cut=CUT_S,
                               write_rate=WRITE_RATE)
    result, figures, took = _drill(pytester, profile)
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    verdicts = {v["name"]: v["outcome"] for v in figures["verdicts"]}
    assert verdicts == {"write_recovery": "pass", "data_loss": "fail"}, verdicts
    loss = figures["state"]["data_loss"]
    assert loss["error"] is None and loss["unread"] == 0, loss
    assert 1 <= loss["lost"] < loss["acked_read_back"], loss
    # acknowledged before the injection returned (during the stall), none after it
    assert loss["lost_from_s"] < 0 and loss["lost_to_s"] < 0 and loss["rpo_s"] > 0, loss
    assert f"AssertionError: data loss: {loss['lost']} of {loss['acked_read_back']} acknowledged writes lost" in out
    # the lost ids really are not in the promoted primary (the report lists up to 20 of them)
    ids = ",".join(f"'{i}'" for i in loss["lost_ids"])
    assert pg.state()["primary"] != before  # the drill failed over (and its revert kept the new primary)
    assert pg.count(f"id IN ({ids})") == 0
    rec = figures["state"]["write_recovery"]
    assert rec["value_s"] is not None and rec["region"].endswith(f"-{pg.state()['primary']}"), rec
    summary = _summary("async", figures, took)
    print(summary)
    record_property("foreign_postgres_async", summary)


def test_sync_replication_under_the_same_stall_loses_nothing_and_data_loss_passes(
        pg: PgFederation, pytester: pytest.Pytester, tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    pg.set_sync(True)
    profile = pg.write_profile(tmp_path / "pg.yaml", replication="sync", max_lag=None, cut=CUT_S,
                               write_rate=WRITE_RATE)
    result, figures, took = _drill(pytester, profile)
    result.assert_outcomes(passed=1)
    verdicts = {v["name"]: v["outcome"] for v in figures["verdicts"]}
    assert verdicts == {"write_recovery": "pass", "data_loss": "pass", "data_loss_vs_prediction": "pass"}, verdicts
    loss = figures["state"]["data_loss"]
    assert loss["error"] is None and loss["lost"] == 0 and loss["acked_read_back"] > 0, loss
    # the stalled commits were never acknowledged: they waited for the standby until the primary died
    assert figures["state"]["writes"]["indeterminate"] >= 1, figures["state"]["writes"]
    summary = _summary("sync", figures, took)
    print(summary)
    record_property("foreign_postgres_sync", summary)
