"""``gameday restore`` and a session's own leftovers take turns on a shared federation.

A revert outside a drill changes the federation as much as a drill's fault does: on a
federation other runs drill too (external, kind, kube), it waits for the drill lock that
their drills hold, instead of reverting under a drill in progress. Tested with a real
external target whose revert command writes a marker file, a real holder process of the
federation's lock, and the real ``gameday restore`` (in process and as the CLI).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gameday.errors import DrillLockTimeout, TargetError
from gameday.faults import Ledger
from gameday.model.topology import load_topology
from gameday.plugin.session import SessionState, revert_own_leftovers
from gameday.restore import federation_turn, ledger_path, restore
from gameday.runtime.interrupts import Interrupts
from gameday.runtime.settings import Settings
from gameday.targets import registry
from gameday.targets.external import ExternalTarget
from gameday.targets.local import LocalTarget

from ..lock_holder import LockHolder

REPO = Path(__file__).resolve().parents[2]
KEY = "federation:app.example.test.@127.0.0.1:9"

class HealthyExternal(ExternalTarget):
    """The external target with a health check that passes: the profile's federation is not
    running here, and what is tested is when the revert runs, not the federation's health."""

    name = "healthy-external"

    def check_health(self, timeout: float) -> None:
        return None


def _profile(tmp_path: Path) -> Path:
    revert = {"argv": ["sh", "-c", "date +%s.%N >> reverted"], "timeout": 5}
    profile = {
        "name": "turns",
        "service": {"fqdn": "app.example.test", "dns": {"server": "127.0.0.1", "port": 9}, "load": {"port": 9}},
        "regions": [{"name": "a", "gateway": "127.0.1.1", "weight": 1,
                     "faults": {"gateway_down": {"inject": {"argv": ["true"]}, "revert": revert}}},
                    {"name": "b", "gateway": "127.0.2.1", "weight": 1}],
    }
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


INJECT = """
import os, pathlib, sys
from tests.faults.test_restore_takes_turns import HealthyExternal
from gameday.faults import Ledger
from gameday.targets import registry
target = HealthyExternal.from_file(sys.argv[1])
ledger = Ledger(pathlib.Path(sys.argv[2]))
params = {}
entry = ledger.record("gateway_down", "a", params, target.name, target.ref(), attach=registry.attach_path(target))
target.inject("gateway_down", "a", params)
ledger.update_params(entry.id, params)
os._exit(9)  # killed mid-drill: the fault stays in effect and in the ledger
"""


def _inject(tmp_path: Path, reports: Path) -> tuple[ExternalTarget, Ledger]:
    """Inject gateway_down a for real in a runner that then dies, as a killed one would."""
    profile = _profile(tmp_path)
    ledger = Ledger(ledger_path(reports))
    runner = subprocess.run([sys.executable, "-c", INJECT, str(profile), str(ledger.path)], cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=False)
    assert runner.returncode == 9, runner.stderr
    (entry,) = ledger.pending()
    assert entry.attach == f"{__name__}:HealthyExternal.attach" and entry.runner_pid != os.getpid()
    target = HealthyExternal.from_file(profile)
    assert target.drill_lock_key() == KEY
    return target, ledger


def _inject_here(tmp_path: Path, reports: Path) -> tuple[ExternalTarget, Ledger]:
    """Inject gateway_down a in this process (a session whose drill never reached its revert)."""
    target = HealthyExternal.from_file(_profile(tmp_path))
    ledger = Ledger(ledger_path(reports))
    params: dict[str, Any] = {}
    entry = ledger.record("gateway_down", "a", params, target.name, target.ref(), attach=registry.attach_path(target))
    target.inject("gateway_down", "a", params)
    ledger.update_params(entry.id, params)
    return target, ledger


def _reverts(tmp_path: Path) -> list[float]:
    marker = tmp_path / "reverted"
    return [float(x) for x in marker.read_text().split()] if marker.exists() else []


def test_restore_waits_for_another_runs_drill_then_reverts(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    _, ledger = _inject(tmp_path, reports)
    out = io.StringIO()
    with LockHolder(KEY, tmp_path, what="test other-run::test_drill") as holder:
        released: list[float] = []
        timer = threading.Timer(1.0, lambda: released.append(holder.release()))
        timer.start()
        try:
            rc = restore(reports, keep=True, out=out, lock_timeout=30)
        finally:
            timer.join()
    text = out.getvalue()
    assert rc == 0, text
    assert "WAIT  gateway_down a [" in text and f"the drill lock on {KEY} is held by pid {holder.pid}" in text
    assert "test other-run::test_drill" in text and "waiting up to 30 s" in text
    assert "OK    gateway_down a" in text
    (reverted_at,) = _reverts(tmp_path)
    assert reverted_at >= released[0], "the revert ran while the other run's drill held the lock"
    assert ledger.pending() == []


def test_restore_that_waited_too_long_reverts_nothing_and_keeps_the_entry(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    _, ledger = _inject(tmp_path, reports)
    out = io.StringIO()
    with LockHolder(KEY, tmp_path, what="test other-run::test_drill") as holder:
        t0 = time.monotonic()
        rc = restore(reports, keep=True, out=out, lock_timeout=0.5)
        assert time.monotonic() - t0 < 5
        assert rc == 1
        text = out.getvalue()
        assert "FAIL  gateway_down a [" in text
        assert f"not reverted: the drill lock on {KEY} was still held by pid {holder.pid}" in text
        assert "after 0.5 s (--drill-lock-timeout); run `gameday restore` again" in text
        assert _reverts(tmp_path) == []
        assert [e.kind for e in ledger.pending()] == ["gateway_down"]
    # The drill ended: the same command now reverts it (as the CLI, with its option).
    cli = subprocess.run([sys.executable, "-m", "gameday.cli", "restore", "--reports", str(reports),
                          "--drill-lock-timeout", "5"], capture_output=True, text=True, timeout=60, check=False,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "OK    gateway_down a" in cli.stdout and "WAIT" not in cli.stdout
    assert len(_reverts(tmp_path)) == 1
    assert ledger.pending() == []


def test_the_cli_refuses_a_bad_lock_timeout_from_the_option_or_the_environment(tmp_path: Path) -> None:
    for args, env in ((["--drill-lock-timeout", "soon"], {}), ([], {"GAMEDAY_DRILL_LOCK_TIMEOUT": "-1"})):
        cli = subprocess.run([sys.executable, "-m", "gameday.cli", "restore", "--reports", str(tmp_path), *args],
                             capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **env})
        assert cli.returncode == 2, cli.stdout + cli.stderr
        assert "argument --drill-lock-timeout" in cli.stderr, cli.stderr
        assert "Traceback" not in cli.stderr


def test_a_sessions_own_leftover_waits_its_turn_too(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    target, ledger = _inject_here(tmp_path, reports)
    state = SessionState(settings=Settings(drill_lock_timeout=0.5, reports=reports), topology=load_topology(),
                         interrupts=Interrupts())
    assert state.ledger.path == ledger.path
    with LockHolder(KEY, tmp_path):
        revert_own_leftovers(state, target)  # times out: logged, the entry stays for `gameday restore`
        assert _reverts(tmp_path) == [] and len(ledger.pending()) == 1
    revert_own_leftovers(state, target)
    assert len(_reverts(tmp_path)) == 1 and ledger.pending() == []
    assert state.swept == ["gateway_down a"]


def test_a_target_that_owns_its_federation_takes_no_lock(tmp_path: Path) -> None:
    local = LocalTarget(load_topology(), tmp_path)  # never started: only its type matters
    ran = []
    # timeout 0: if it tried to take any lock held elsewhere, this would raise at once
    with LockHolder(KEY, tmp_path), federation_turn(local, timeout=0, what="test"):
        ran.append(True)
    assert ran == [True]
    # The same call for a shared federation whose lock is held does not run the block.
    external = HealthyExternal.from_file(_profile(tmp_path))
    with LockHolder(KEY, tmp_path), pytest.raises(DrillLockTimeout), \
            federation_turn(external, timeout=0, what="test"):
        ran.append(False)
    assert ran == [True]


def test_an_unattachable_entry_still_fails_with_its_reason(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="no recorded profile"):
        HealthyExternal.attach({"profile": str(tmp_path / "gone.yaml")})
