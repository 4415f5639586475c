"""The drill lock (:mod:`gameday.runtime.drill_lock`) with real processes and real signals.

A holder process takes the lock through the public seam (``drill_lock``) and keeps it until
the test touches a file; a waiter process (or this one) contends:

- the waiter waits, its wait names the holder, and it gets the lock only after the release;
- with a short timeout it fails naming the holder, and a drill fails so before its health
  check (so before anything is injected: nothing in the ledger);
- ``kill -9`` of the holder frees the lock at once, and its note left in the file never blocks;
- Ctrl-C (SIGINT) of the holder and an exception in the block release it;
- the drill takes the lock only on a target with the capability (negative control: the same
  drill on the same target without it goes straight to its health check).

The drill-level tests use :class:`Recorder`, a small target double that only records which of
its methods the drill called (its health check refuses at once): they test the orchestration's
order, not a federation. The concurrent real drills are in tests/external/test_drill_lock_xdist.py.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gameday.drill import Drill
from gameday.errors import DrillLockError, DrillLockTimeout, TargetUnreachable
from gameday.faults import Ledger
from gameday.interfaces import Endpoints, RegionInfo, SharedFederation, Target
from gameday.observers.sources import Sources
from gameday.reports.allure_attach import categorise
from gameday.runtime.drill_lock import DrillLock, Holder, drill_lock, lock_path
from gameday.runtime.settings import Settings

KEY = "test:shared-federation"

HOLD = """
import pathlib, sys, time
from gameday.runtime.drill_lock import drill_lock
key, release = sys.argv[1], pathlib.Path(sys.argv[2])
with drill_lock(key, what="test holder.py::test_holds", timeout=0):
    print("held", flush=True)
    deadline = time.monotonic() + 60
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    print("releasing", time.time(), flush=True)
print("released", flush=True)
"""

WAIT = """
import sys, time
from gameday.runtime.drill_lock import DrillLock
from gameday.errors import DrillLockTimeout
lock = DrillLock(sys.argv[1], what="test waiter.py::test_waits")
def on_wait(holder, waited):
    print("waiting for drill lock held by", holder.describe() if holder else None, f"{waited:.2f}", flush=True)
try:
    waited = lock.acquire(float(sys.argv[2]), on_wait=on_wait)
except DrillLockTimeout as exc:
    print("timeout:", exc, flush=True)
    sys.exit(3)
print("acquired", time.time(), f"{waited:.2f}", flush=True)
lock.release()
"""


class Proc:
    """A ``python -c`` process whose stdout lines are read by a thread (never a blocking read)."""

    def __init__(self, code: str, *args: str, worker: str) -> None:
        env = {**os.environ, "PYTEST_XDIST_WORKER": worker}
        self.popen = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self._q.put(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.popen.pid

    def expect(self, prefix: str, timeout: float = 20.0) -> str:
        """The next line starting with *prefix* (earlier lines are kept in :attr:`lines`)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._q.get(timeout=left)
            except queue.Empty:
                break
            self.lines.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starting {prefix!r} within {timeout:g} s; pid {self.pid} printed {self.lines}, "
                             f"exit code {self.popen.poll()}")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(10)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    try:
        yield started
    finally:
        for p in started:
            p.stop()


def _hold(procs: list[Proc], release: Path, key: str = KEY) -> Proc:
    holder = Proc(HOLD, key, str(release), worker="gw7")
    procs.append(holder)
    holder.expect("held")
    return holder


def test_a_second_process_waits_naming_the_holder_and_gets_the_lock_only_after_the_release(
        procs: list[Proc], tmp_path: Path) -> None:
    holder = _hold(procs, tmp_path / "release")
    waiter = Proc(WAIT, KEY, "30", worker="gw1")
    procs.append(waiter)
    line = waiter.expect("waiting for drill lock held by")
    assert f"held by pid {holder.pid} (worker gw7, test holder.py::test_holds) since " in line, line
    waiter.expect("waiting for drill lock held by")  # still waiting, and saying so, half a second later
    assert waiter.popen.poll() is None
    (tmp_path / "release").touch()
    released_at = float(holder.expect("releasing").split()[1])
    acquired = waiter.expect("acquired").split()
    assert float(acquired[1]) >= released_at, (acquired, released_at)
    assert float(acquired[2]) >= 0.5  # it waited (two reports, 0.5 s apart, came before)
    assert waiter.popen.wait(10) == 0


def test_a_short_timeout_fails_naming_the_holder(procs: list[Proc], tmp_path: Path) -> None:
    holder = _hold(procs, tmp_path / "release")
    waiter = Proc(WAIT, KEY, "0.3", worker="gw1")
    procs.append(waiter)
    line = waiter.expect("timeout:")
    assert (f"the drill lock on {KEY} is still held by pid {holder.pid} (worker gw7, test holder.py::test_holds) "
            "since ") in line, line
    assert "--gameday-drill-lock-timeout 0.3" in line
    assert waiter.popen.wait(10) == 3
    assert holder.popen.poll() is None  # the holder was not disturbed


def test_kill_9_of_the_holder_frees_the_lock_at_once_and_its_stale_note_never_blocks(
        procs: list[Proc], tmp_path: Path) -> None:
    holder = _hold(procs, tmp_path / "release")
    waiter = Proc(WAIT, KEY, "60", worker="gw1")
    procs.append(waiter)
    waiter.expect("waiting for drill lock held by")
    killed_at = time.time()
    os.kill(holder.pid, signal.SIGKILL)
    acquired_at = float(waiter.expect("acquired").split()[1])
    # At once: the kernel drops the dead holder's lock and the waiter's next poll takes it, long
    # before its 60 s timeout (a correctness bound, loose for a loaded machine, not a benchmark).
    assert acquired_at - killed_at < 10, acquired_at - killed_at

    # A holder killed while nobody waits leaves its note in the file: it blocks nobody.
    second = _hold(procs, tmp_path / "release-2")
    os.kill(second.pid, signal.SIGKILL)
    second.popen.wait(10)
    assert Holder.parse(lock_path(KEY).read_bytes()) is not None  # the dead holder's note is still there
    lock = DrillLock(KEY)
    lock.acquire(0)  # 0: do not wait; it would raise DrillLockTimeout if the lock were held
    now = lock.holder()
    assert now is not None and now.pid == os.getpid(), now  # the note is ours now
    lock.release()


def test_ctrl_c_of_the_holder_and_an_exception_in_the_block_release_the_lock(
        procs: list[Proc], tmp_path: Path) -> None:
    holder = _hold(procs, tmp_path / "release")
    os.kill(holder.pid, signal.SIGINT)
    assert holder.popen.wait(10) != 0  # KeyboardInterrupt ended it ...
    assert "releasing" not in holder.lines and "released" not in holder.lines  # ... inside the block
    assert lock_path(KEY).read_bytes() == b""  # its `finally` released it (a kill -9 leaves the note)
    lock = DrillLock(KEY)
    lock.acquire(0)  # free: 0 would raise DrillLockTimeout if it were held
    lock.release()

    # A waiter interrupted by Ctrl-C stops waiting at once and holds nothing.
    holder = _hold(procs, tmp_path / "release-2")
    waiter = Proc(WAIT, KEY, "60", worker="gw1")
    procs.append(waiter)
    waiter.expect("waiting for drill lock held by")
    os.kill(waiter.pid, signal.SIGINT)
    assert waiter.popen.wait(5) != 0
    assert holder.popen.poll() is None
    (tmp_path / "release-2").touch()
    holder.expect("released")

    seen: list[DrillLock] = []

    def fails_inside() -> None:
        with drill_lock(KEY, timeout=0) as held:
            seen.append(held)
            assert held.held
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fails_inside()
    assert not seen[0].held
    waiter = Proc(WAIT, KEY, "0", worker="gw1")  # another process takes it without waiting
    procs.append(waiter)
    waiter.expect("acquired")


def test_one_process_cannot_wait_for_itself_and_other_keys_do_not_wait(tmp_path: Path) -> None:
    with drill_lock(KEY, what="test outer") as outer:
        started = time.monotonic()
        with pytest.raises(DrillLockError, match=rf"this process already holds the drill lock on {KEY} \(test outer\)"):
            DrillLock(KEY).acquire(30)
        assert time.monotonic() - started < 5  # refused at once, not after the 30 s timeout
        with drill_lock("test:another-federation", timeout=0) as other:
            assert other.path != outer.path and other.held
    assert not outer.held


def test_a_lock_directory_that_cannot_be_written_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(DrillLockError, match=r"cannot open the drill lock file .*file/.*GAMEDAY_STATE_DIR"):
        DrillLock(KEY, directory=tmp_path / "file").acquire(0)


# -- the drill takes it: only on a shared federation, before anything touches it --------------------------
class Recorder:
    """A target double: records the drill's calls to it; its health check refuses at once."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def up(self) -> None: ...
    def deploy(self) -> None: ...
    def down(self) -> None: ...

    def regions(self) -> list[RegionInfo]:
        return [RegionInfo("a", 1, 100, "127.0.0.1"), RegionInfo("b", 1, 100, "127.0.0.2")]

    def endpoints(self) -> Endpoints:
        raise AssertionError("not reached in these tests")

    def sources(self) -> Sources:
        raise AssertionError("not reached in these tests")

    def check_health(self, timeout: float) -> None:
        self.calls.append("check_health")
        raise TargetUnreachable("recorder: refusing, as a federation that is not healthy does; nothing was injected")

    def inject(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        self.calls.append("inject")

    def revert(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        self.calls.append("revert")

    def ref(self) -> dict[str, Any]:
        return {}


class SharedRecorder(Recorder):
    def drill_lock_key(self) -> str:
        return KEY


def _drill(target: Target, tmp_path: Path, progress: list[str], timeout: float, slots: int | None = None) -> Drill:
    return Drill(target, Settings(seed=1, drill_lock_timeout=timeout, local_drill_slots=slots),
                 seed_key="tests/x.py::test_drill",
                 ledger=Ledger(tmp_path / "ledger.json"), offered=10, margin=0.2, progress=progress.append)


def test_a_drill_on_a_shared_federation_waits_then_fails_before_its_health_check_naming_the_holder(
        procs: list[Proc], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    holder = _hold(procs, tmp_path / "release")
    target, progress = SharedRecorder(), list[str]()
    assert isinstance(target, SharedFederation) and isinstance(target, Target)
    drill = _drill(target, tmp_path, progress, timeout=1.2)
    with caplog.at_level(logging.WARNING, logger="gameday.drill"), pytest.raises(DrillLockTimeout) as err, \
            drill.fault("control_plane_down"):
        raise AssertionError("the block must not run")
    msg = str(err.value)
    assert msg.startswith(f"refusing control_plane_down: the drill lock on {KEY} is still held by pid {holder.pid} "
                          "(worker gw7, test holder.py::test_holds) since "), msg
    assert msg.endswith("; nothing was injected"), msg
    assert err.value.holder is not None and err.value.holder.pid == holder.pid
    assert target.calls == []  # not even the health check: another drill's fault would fail it
    assert not (tmp_path / "ledger.json").exists()
    # The wait is on the live line (every 0.5 s) and in the log (once per holder).
    assert len(progress) >= 2, progress
    assert all(f"waiting for drill lock held by pid {holder.pid} (worker gw7" in line for line in progress), progress
    warned = [r.getMessage() for r in caplog.records if "waiting for drill lock" in r.getMessage()]
    assert len(warned) == 1 and f"held by pid {holder.pid} (worker gw7" in warned[0], warned


def test_a_drill_holds_the_lock_from_its_health_check_and_releases_it_when_that_fails(
        procs: list[Proc], tmp_path: Path) -> None:
    target, progress = SharedRecorder(), list[str]()
    checked_while: list[Holder | None] = []
    real_check = target.check_health

    def check_health(timeout: float) -> None:
        checked_while.append(DrillLock(KEY).holder())
        real_check(timeout)

    target.check_health = check_health  # type: ignore[method-assign]
    with pytest.raises(TargetUnreachable, match="recorder: refusing"), \
            _drill(target, tmp_path, progress, timeout=0).fault("control_plane_down"):
        raise AssertionError("the block must not run")
    (who,) = checked_while
    assert who is not None and who.pid == os.getpid() and who.what == "test tests/x.py::test_drill", who
    assert progress == []  # nobody else held it: no wait to show
    # Released on that exception: another process takes it at once.
    waiter = Proc(WAIT, KEY, "0", worker="gw1")
    procs.append(waiter)
    waiter.expect("acquired")


def test_negative_control_a_target_without_the_capability_is_not_serialised(procs: list[Proc], tmp_path: Path) -> None:
    _hold(procs, tmp_path / "release")
    target, progress = Recorder(), list[str]()
    assert not isinstance(target, SharedFederation)
    with pytest.raises(TargetUnreachable), _drill(target, tmp_path, progress, timeout=0).fault("control_plane_down"):
        raise AssertionError("the block must not run")
    assert target.calls == ["check_health"]  # straight on, past the held lock
    assert progress == []


def test_opting_out_by_setting_the_method_to_none_is_not_shared() -> None:
    class Unshared(SharedRecorder):
        drill_lock_key = None  # type: ignore[assignment]

    assert isinstance(SharedRecorder(), SharedFederation)
    assert not isinstance(Unshared(), SharedFederation)


def test_the_timeout_option_has_an_ini_twin_and_an_environment_variable_and_is_checked(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    ini = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"
    pytester.makeini(ini + "gameday_drill_lock_timeout = 7\n")
    pytester.makepyfile("def test_x(gameday_settings): print('TIMEOUT', gameday_settings.drill_lock_timeout)")
    monkeypatch.setenv("GAMEDAY_DRILL_LOCK_TIMEOUT", "9")
    pytester.runpytest("-s").stdout.fnmatch_lines(["*TIMEOUT 7.0*"])
    pytester.runpytest("-s", "--gameday-drill-lock-timeout=0").stdout.fnmatch_lines(["*TIMEOUT 0.0*"])
    pytester.makeini(ini)
    pytester.runpytest("-s").stdout.fnmatch_lines(["*TIMEOUT 9.0*"])
    monkeypatch.delenv("GAMEDAY_DRILL_LOCK_TIMEOUT")
    pytester.runpytest("-s").stdout.fnmatch_lines(["*TIMEOUT 900.0*"])
    for bad in ("-1", "inf", "1e9"):
        result = pytester.runpytest(f"--gameday-drill-lock-timeout={bad}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: gameday: --gameday-drill-lock-timeout (command line): got '{bad}', "
                                     "expected a finite number >= 0 and <= 86400"])


def test_a_lock_timeout_is_a_refused_drill_in_the_allure_report() -> None:
    message = ("gameday.errors.DrillLockTimeout: refusing gateway_down b: the drill lock on k8s:kind-gd-a/gameday "
               "is still held by pid 4242 (worker gw1, test x) since 15:03:07 after 900.0 s; nothing was injected")
    assert categorise("broken", message) == "Refused drills"
