"""Drill slots (gameday.runtime.drill_slots): drills whose federations share this machine take
turns. Real processes hold the slots; a killed holder frees its slot at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gameday.errors import DrillLockTimeout, TargetUnreachable
from gameday.interfaces import RunsOnThisMachine, Target
from gameday.runtime.drill_lock import POLL_INTERVAL
from gameday.runtime.drill_slots import SLOTS_DIR_ENV, DrillSlots, slot_count
from gameday.targets.local import LocalTarget
from tests.test_drill_lock import Recorder, _drill

LOADED_SLACK_S = 2.0  # a loaded 2-core CI machine can delay a step by ~1-2 s (issue 22)

HOLD = """
import pathlib, sys, time
from gameday.runtime.drill_lock import POLL_INTERVAL
from gameday.runtime.drill_slots import DrillSlots
slots = DrillSlots(int(sys.argv[1]), what=sys.argv[3], directory=pathlib.Path(sys.argv[4]))
slots.acquire(30)
print("held", slots.held.key, flush=True)
deadline = time.monotonic() + 60
while not pathlib.Path(sys.argv[2]).exists() and time.monotonic() < deadline:
    time.sleep(0.01)
"""


class Holder:
    """A real process holding one of *count* slots in *directory* until :meth:`release`."""

    def __init__(self, count: int, directory: Path, tmp_path: Path, what: str) -> None:
        self.release_file = tmp_path / f"release-{time.monotonic_ns()}"
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD, str(count), str(self.release_file), what,
                                      str(directory)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.slot = self.proc.stdout.readline().split()[-1]

    def release(self) -> None:
        self.release_file.touch()
        self.proc.wait(10)


@pytest.fixture
def slots_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "slots"
    monkeypatch.setenv(SLOTS_DIR_ENV, str(where))  # the drill's default directory, apart from other tests
    return where


def test_a_third_drill_waits_for_one_of_two_slots_and_takes_the_first_that_frees(
        slots_dir: Path, tmp_path: Path) -> None:
    first, second = (Holder(2, slots_dir, tmp_path, f"test holder-{i}") for i in (1, 2))
    try:
        assert {first.slot, second.slot} == {"slot-0", "slot-1"}
        seen: list[str] = []
        mine = DrillSlots(2, what="test me", directory=slots_dir)
        with pytest.raises(DrillLockTimeout) as err:
            mine.acquire(0.6, on_wait=lambda holders, waited: seen.append(" ".join(h.describe() for h in holders)))
        assert "all 2 drill slots of this machine are still held after" in str(err.value)
        assert f"pid {first.proc.pid}" in str(err.value) and f"pid {second.proc.pid}" in str(err.value)
        assert seen and "test holder-1" in seen[0] and "test holder-2" in seen[0]
        second.release()
        # Free by now (the holder has exited): taken at the first try, within a poll interval
        # plus LOADED_SLACK_S; a waiter that missed the release would wait out the 10 s.
        assert mine.acquire(10) < POLL_INTERVAL + LOADED_SLACK_S
        assert mine.held is not None and mine.held.key == second.slot
        mine.release()
        mine.release()  # idempotent
    finally:
        first.release()
        second.release()


def test_a_killed_holder_frees_its_slot_at_once(slots_dir: Path, tmp_path: Path) -> None:
    holder = Holder(1, slots_dir, tmp_path, "test doomed")
    mine = DrillSlots(1, directory=slots_dir)
    with pytest.raises(DrillLockTimeout):
        mine.acquire(0.2)
    os.kill(holder.proc.pid, signal.SIGKILL)
    holder.proc.wait(10)
    assert mine.acquire(5) < 5
    mine.release()


def test_the_number_of_slots_is_one_per_cpu_unless_set() -> None:
    assert slot_count(None) == len(os.sched_getaffinity(0))
    assert (slot_count(3), slot_count(0)) == (3, 0)
    with pytest.raises(ValueError, match="at least 1"):
        DrillSlots(0)


class HereRecorder(Recorder):
    """A target whose federation runs on this machine (and refuses at its health check)."""

    def runs_on_this_machine(self) -> bool:
        return True


def test_a_drill_on_this_machine_waits_for_a_slot_before_its_health_check_and_refuses_after_the_timeout(
        slots_dir: Path, tmp_path: Path) -> None:
    holder = Holder(1, slots_dir, tmp_path, "test other.py::test_drill")
    try:
        target, progress = HereRecorder(), list[str]()
        assert isinstance(target, RunsOnThisMachine) and isinstance(target, Target)
        drill = _drill(target, tmp_path, progress, timeout=1.2, slots=1)
        with pytest.raises(DrillLockTimeout) as err, drill.fault("control_plane_down"):
            raise AssertionError("the block must not run")
        assert str(err.value).startswith("refusing control_plane_down: all 1 drill slots of this machine are still "
                                         "held after"), err.value
        assert str(err.value).endswith("nothing was injected")
        assert target.calls == []  # not even the health check
        assert progress and all("waiting for one of this machine's 1 drill slot(s), held by pid "
                                f"{holder.proc.pid}" in line for line in progress), progress
        # With the slot free, the drill takes it and gives it back when it ends (here: refused at
        # its health check), so the holder's successor is not kept waiting.
        holder.release()
        with pytest.raises(TargetUnreachable), drill.fault("control_plane_down"):
            raise AssertionError("the block must not run")
        assert target.calls == ["check_health"]
        free = DrillSlots(1, directory=slots_dir)
        free.acquire(0)  # free at once (a timeout of 0 raises when it is not)
        free.release()
    finally:
        holder.release()


def test_only_targets_on_this_machine_take_slots(slots_dir: Path, tmp_path: Path) -> None:
    holder = Holder(1, slots_dir, tmp_path, "test other.py::test_drill")
    try:
        target = Recorder()  # not on this machine: no slot, straight to its health check
        drill = _drill(target, tmp_path, [], timeout=0.5, slots=1)
        with pytest.raises(TargetUnreachable), drill.fault("control_plane_down"):
            raise AssertionError("the block must not run")
        # 0: no limit, even on this machine.
        here = HereRecorder()
        drill = _drill(here, tmp_path, [], timeout=0.5, slots=0)
        with pytest.raises(TargetUnreachable), drill.fault("control_plane_down"):
            raise AssertionError("the block must not run")
        assert LocalTarget.runs_on_this_machine(None) is True  # type: ignore[arg-type]
    finally:
        holder.release()
