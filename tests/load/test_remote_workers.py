"""Load from more than one machine: the harness's locust master and workers started as
``python -m gameday.load.worker --master HOST:PORT``, each a separate process with none of
the harness's settings, connecting over loopback exactly as a worker on another machine
does. One runs with its CLOCK_MONOTONIC 100000 s ahead (its own time namespace: a machine
with another uptime), so its records land on the harness's clock only if the offset the
master measured at connect time is applied.

A real DNS server (dnspython, UDP) and a real HTTP gateway on loopback stand for the
federation; every process is reaped; each test is bounded (about 10 s)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gameday.errors import LoadError
from gameday.interfaces import Endpoints
from gameday.load.runner import LoadRunner
from gameday.runtime.ports import free_port
from tests.load.loopback import loopback_federation

FQDN = "app.remote.test."
SHIFT = 100_000.0
"""Seconds the shifted worker's monotonic clock runs ahead of the harness's."""
LOADED_SLACK_S = 2.0  # a loaded 2-core CI machine (load ~11) can delay a step by ~1-2 s


@pytest.fixture
def federation() -> Iterator[Endpoints]:
    """A DNS server answering FQDN -> 127.0.0.1 (TTL 5) and a gateway serving 200s."""
    with loopback_federation(FQDN) as ep:
        yield ep


def _shifted_clock_prefix() -> list[str]:
    """``unshare`` into a time namespace whose CLOCK_MONOTONIC is SHIFT s ahead (root, or an
    unprivileged user namespace); skips, saying why, where neither is allowed."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed: no second clock to connect from")
    for prefix in (["unshare", "--time", f"--monotonic={SHIFT:.0f}"],
                   ["unshare", "--user", "--map-root-user", "--time", f"--monotonic={SHIFT:.0f}"]):
        r = subprocess.run([*prefix, sys.executable, "-c", "import time; print(time.monotonic())"],
                           capture_output=True, text=True, timeout=10, check=False)
        if r.returncode == 0 and float(r.stdout) > time.monotonic() + SHIFT / 2:
            return prefix
    pytest.skip(f"no time namespace here (unshare --time: {r.stderr.strip()[-200:]})")


def _worker_env() -> dict[str, str]:
    """A load machine's environment: none of the harness's GAMEDAY_* settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GAMEDAY_")}


def _start_worker(port: int, log: Path, prefix: list[str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("ab") as fh:
        return subprocess.Popen([*(prefix or []), sys.executable, "-m", "gameday.load.worker",
                                 "--master", f"127.0.0.1:{port}"], env=_worker_env(), cwd=log.parent,
                                stdout=fh, stderr=subprocess.STDOUT)


def _reap(procs: list[subprocess.Popen[bytes]], grace: float) -> list[int | None]:
    """Wait up to *grace* s for each to exit by itself (what it returned, None: it did not);
    kill whatever is left."""
    deadline = time.monotonic() + grace
    codes: list[int | None] = []
    for p in procs:
        try:
            codes.append(p.wait(max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append(None)
            p.kill()
            p.wait(5)
    return codes


def test_remote_workers_offer_the_load_on_the_harness_clock(federation: Endpoints, tmp_path: Path) -> None:
    prefix = _shifted_clock_prefix()
    port = free_port()
    log = tmp_path / "workers.log"
    workers = [_start_worker(port, log), _start_worker(port, log, prefix)]
    runner = LoadRunner(federation, users=4, rate=40.0, workdir=tmp_path / "load", expect_workers=2,
                        master_bind=("127.0.0.1", port), workers_wait=30, max_seconds=60)
    try:
        t_start = time.monotonic()
        runner.start(timeout=20)
        remote = runner.remote_workers()
        assert len(remote) == 2, remote
        offsets = sorted(float(str(w["offset_s"])) for w in remote.values())
        # one worker shares this clock, the other runs SHIFT s ahead: the master measured both,
        # each to within its uncertainty (half its shortest ping round trip, by construction)
        unc = runner.clock_uncertainty
        assert abs(offsets[1]) <= unc + 1e-6 and abs(offsets[0] + SHIFT) <= unc + 1e-6, (offsets, unc)
        assert 0 < unc < LOADED_SLACK_S, unc  # a loopback round trip: nothing configured to wait
        time.sleep(3.0)
        runner.poll()
        now = time.monotonic()
    finally:
        runner.stop()
        codes = _reap(workers, grace=15)
    files = sorted(p.name for p in (tmp_path / "load" / "records").glob("requests-*.jsonl"))
    assert len(files) == 2 and all(f.startswith("requests-w-") for f in files), files  # via the master
    recs = runner.records
    assert recs and all(r.status == 200 and r.region == "a" for r in recs), recs[:3]
    # on the harness's clock: the shifted worker's records would be SHIFT s in the future without it
    assert all(t_start - 1 <= r.t <= now + 1 for r in recs), (min(r.t for r in recs), t_start, now)
    per_file = [len((tmp_path / "load" / "records" / f).read_text().splitlines()) for f in files]
    assert min(per_file) > 10, per_file  # both workers offered load
    rate = runner.achieved_rate(now - 2.0, now - 0.5)
    assert rate >= 0.7 * 40, f"achieved {rate:.1f} rps of 40 offered"
    assert codes == [0, 0], f"workers did not quit with the master: {codes}; {log.read_text()[-1500:]}"


def test_too_few_workers_is_a_clear_refusal_and_nothing_is_left(federation: Endpoints, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "workers.log"
    workers = [_start_worker(port, log)]
    runner = LoadRunner(federation, users=2, rate=10.0, workdir=tmp_path / "load", expect_workers=2,
                        master_bind=("127.0.0.1", port), workers_wait=10, max_seconds=60)
    try:
        with pytest.raises(LoadError) as err:
            runner.start(timeout=10)
        msg = str(err.value)
        assert "1 of 2 load workers connected within 10 s" in msg, msg
        assert f"python -m gameday.load.worker --master HARNESS_HOST:{port}" in msg, msg
        assert "nothing was injected" in msg, msg
        assert runner.procs == []  # the master was stopped
        assert not list((tmp_path / "load" / "records").glob("requests-*.jsonl"))  # no load was offered
    finally:
        runner.stop()
        codes = _reap(workers, grace=15)
    assert codes == [0], f"the worker did not quit with the master: {codes}; {log.read_text()[-1500:]}"


def test_the_worker_command_refuses_a_bad_master_address() -> None:
    r = subprocess.run([sys.executable, "-m", "gameday.load.worker", "--master", "host:99999"],
                       capture_output=True, text=True, timeout=30, check=False, env=_worker_env())
    assert r.returncode == 2 and "expected HOST[:PORT] with a port in 1..65535, got 'host:99999'" in r.stderr


def test_workers_json_is_what_the_runner_reads(tmp_path: Path, federation: Endpoints) -> None:
    """The runner's reading of the master's workers.json, and a corrupt one read as none."""
    runner = LoadRunner(federation, users=1, rate=1.0, workdir=tmp_path, expect_workers=1)
    runner.records_dir.mkdir(parents=True)
    (runner.records_dir / "workers.json").write_text(json.dumps({"workers": {
        "w1": {"offset_s": 3.0, "uncertainty_s": 0.002}, "w2": {"offset_s": -1.0, "uncertainty_s": 0.03}}}))
    assert runner.clock_uncertainty == 0.03
    (runner.records_dir / "workers.json").write_text("{not json")
    assert runner.remote_workers() == {} and runner.clock_uncertainty == 0.0


def test_remote_clock_uncertainty_widens_client_recovery_s_resolution() -> None:
    """The same requests: the figure is the same, its resolution wider by the workers' clock
    uncertainty, and the detail says why; without remote workers it stays the step."""
    from gameday.model.timeline import RequestRec
    from gameday.verdicts.measure import client_recovery

    reqs = [RequestRec(i * 0.05, 0 if 1.0 <= i * 0.05 < 3.0 else 200, 0.01) for i in range(400)]
    local = client_recovery(reqs, 1.0, 20.0, window=5.0, slo=0.01)
    remote = client_recovery(reqs, 1.0, 20.0, window=5.0, slo=0.01, clock_uncertainty=0.004)
    assert local.value == remote.value and local.value is not None
    assert local.resolution == pytest.approx(0.1) and "clock" not in local.detail
    assert remote.resolution == pytest.approx(0.104)
    assert "±0.004 s of remote load workers' clock offsets" in remote.detail


def test_the_load_options_are_checked_like_every_option() -> None:
    from gameday.errors import ConfigError
    from gameday.runtime.settings import OPTION

    assert OPTION["load-master-bind"].parse("10.0.0.5:6000", "command line") == ("10.0.0.5", 6000)
    assert OPTION["load-master-bind"].parse("10.0.0.5", "command line") == ("10.0.0.5", 5557)
    with pytest.raises(ConfigError, match=r"--gameday-load-master-bind \(command line\): got .*port in 1\.\.65535"):
        OPTION["load-master-bind"].parse("10.0.0.5:0", "command line")
    with pytest.raises(ConfigError, match=r"--gameday-load-expect-workers \(ini gameday_load_expect_workers\)"):
        OPTION["load-expect-workers"].parse("-1", "ini gameday_load_expect_workers")
