"""The ledger, the federation state file, ``gameday restore`` and ``gameday down``.

Real files, real processes and a real local federation: corrupt files are reported with
their path and moved aside (never a traceback), an entry that can never be reverted is
dropped with ``--forget``, a fault whose local federation is gone is cleared, ``down``
refuses to stop a federation that holds an unreverted fault, and ``restore`` works from
any directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import gameday.restore as restore_module
from gameday.faults.ledger import Ledger, known_ledgers
from gameday.model.topology import load_topology
from gameday.restore import DYING_GRACE_S, local_federation_gone
from gameday.runtime.procs import starttime
from gameday.runtime.statefile import CorruptFile, read_json_object, write_json_atomic
from gameday.targets.local import LocalTarget
from gameday.targets.local.federation import LocalFederation


def _gameday(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "gameday.cli", *args], cwd=cwd, capture_output=True, text=True,
                       timeout=120, check=False)
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    return r


def _dead_pid() -> int:
    """The pid of a process that has exited (a runner that was killed)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _record(ledger: Ledger, kind: str, region: str | None, target: str, ref: dict[str, object]) -> str:
    entry = ledger.record(kind, region, {}, target, ref)
    # Pretend the runner that wrote it was killed.
    data = json.loads(ledger.path.read_text())
    for e in data["pending"]:
        if e["id"] == entry.id:
            e["runner_pid"] = _dead_pid()
    ledger.path.write_text(json.dumps(data))
    return entry.id


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    return tmp_path / "reports"


# -- the state file primitives ------------------------------------------------------------------
def test_atomic_writes_leave_no_temporary_files_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "d" / "state.json"
    for i in range(20):
        write_json_atomic(path, {"n": i})
    assert read_json_object(path) == {"n": 19}
    assert sorted(p.name for p in path.parent.iterdir()) == ["state.json"]


@pytest.mark.parametrize(("content", "problem"), [
    (b'{"pending": [{"id": "ab', "not valid JSON"),
    (b"", "is empty"),
    (b"[]", "holds a JSON list, expected an object"),
    (b"{}", "no 'pending' list"),
    (b'{"pending": [], "extra": 1}', "unknown key(s) ['extra']"),
    (b'{"pending": [{"id": "x", "bogus": 1}]}', "pending[0]: unknown field(s) 'bogus'"),
    (b'{"pending": [{"id": 1}]}', "pending[0].id: expected str, got int"),
    (b'{"pending": [{"id": "x"}]}', "pending[0]: missing field 'kind'"),
    (b"\xff\xfe{\x00}\x00", "is not UTF-8 text"),
    (b"[" * 20000 + b"]" * 20000, "nested too deeply"),
])
def test_a_corrupt_ledger_is_named_and_moved_aside(reports: Path, content: bytes, problem: str) -> None:
    ledger = Ledger(reports / ".gameday" / "ledger.json")
    ledger.path.parent.mkdir(parents=True)
    ledger.path.write_bytes(content)
    with pytest.raises(CorruptFile) as info:
        ledger.pending()
    assert problem in str(info.value) and str(ledger.path) in str(info.value)

    r = _gameday("restore", "--reports", str(reports), cwd=reports.parent)
    assert r.returncode == 1
    assert f"CORRUPT ledger {ledger.path}" in r.stdout and problem in r.stdout
    aside = list(ledger.path.parent.glob("ledger.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == content  # the evidence is kept
    again = _gameday("restore", "--reports", str(reports), cwd=reports.parent)
    assert again.returncode == 0, again.stdout


def test_a_running_drill_survives_a_corrupt_ledger(reports: Path) -> None:
    ledger = Ledger(reports / ".gameday" / "ledger.json")
    ledger.path.parent.mkdir(parents=True)
    ledger.path.write_text("{truncated")
    entry = ledger.record("gateway_down", "b", {}, "local", {"workdir": "/nowhere"})
    assert [e.id for e in ledger.pending()] == [entry.id]
    assert list(ledger.path.parent.glob("ledger.json.corrupt-*"))
    ledger.remove(entry.id)
    assert ledger.pending() == []


def test_concurrent_writers_lose_no_entry(reports: Path) -> None:
    """Four processes (like xdist workers) record 25 entries each into one ledger."""
    path = reports / ".gameday" / "ledger.json"
    code = ("import sys; from pathlib import Path; from gameday.faults.ledger import Ledger\n"
            "l = Ledger(Path(sys.argv[1]))\n"
            "for i in range(25): l.record('gateway_down', 'a', {'i': i}, 'local', {'workdir': sys.argv[2]})\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), f"w{n}"]) for n in range(4)]
    assert [p.wait(60) for p in procs] == [0, 0, 0, 0]
    entries = Ledger(path).pending()
    assert len(entries) == 100 and len({e.id for e in entries}) == 100


# -- restore without a live target --------------------------------------------------------------
def test_forget_drops_an_entry_that_can_never_be_reverted(reports: Path) -> None:
    ledger = Ledger(reports / ".gameday" / "ledger.json")
    entry_id = _record(ledger, "gateway_down", "a", "nosuchtarget", {"context": "gone"})
    r = _gameday("restore", "--reports", str(reports), cwd=reports.parent)
    assert r.returncode == 1
    assert "FAIL  gateway_down a" in r.stdout and f"gameday restore --forget {entry_id}" in r.stdout

    wrong = _gameday("restore", "--reports", str(reports), "--forget", "zzz", cwd=reports.parent)
    assert wrong.returncode == 2 and "expected exactly one matching entry, found none" in wrong.stdout
    r = _gameday("restore", "--reports", str(reports), "--forget", entry_id[:6], cwd=reports.parent)
    assert r.returncode == 0, r.stdout
    assert f"FORGOT {entry_id}: gateway_down a on nosuchtarget" in r.stdout and "NOT reverted" in r.stdout
    assert ledger.pending() == []
    assert _gameday("restore", "--reports", str(reports), cwd=reports.parent).returncode == 0


def test_forget_refuses_while_the_runner_lives(reports: Path) -> None:
    ledger = Ledger(reports / ".gameday" / "ledger.json")
    entry = ledger.record("gateway_down", "a", {}, "local", {"workdir": "/nowhere"})  # this test's pid: alive
    # The CLI runs in another process, so our pid is a live runner there.
    r = _gameday("restore", "--reports", str(reports), "--forget", entry.id, cwd=reports.parent)
    assert r.returncode == 1 and "is still running and will revert it" in r.stdout
    assert [e.id for e in ledger.pending()] == [entry.id]


def test_restore_from_another_directory_finds_the_ledger(reports: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GAMEDAY_STATE_DIR", str(tmp_path / "state"))  # an index of this test's own
    ledger = Ledger(reports / ".gameday" / "ledger.json")
    _record(ledger, "gateway_down", "c", "local", {"workdir": str(tmp_path / "no-federation")})
    assert ledger.path in known_ledgers()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = _gameday("restore", cwd=elsewhere)
    assert f"ledger {ledger.path}: 1 pending" in r.stdout
    assert "CLEAR gateway_down c" in r.stdout and "is gone" in r.stdout
    assert r.returncode == 0 and ledger.pending() == []


# -- restore and down against a real federation -------------------------------------------------
@pytest.fixture
def fed_target(reports: Path) -> Iterator[LocalTarget]:
    target = LocalTarget(load_topology(), reports / ".gameday" / "federations" / "t-1")
    target.up()
    try:
        yield target
    finally:
        target.down()
        # `gameday restore` (another process) may have started components this object does
        # not know of: stop whatever the state file names too.
        LocalFederation.attach(target.fed.workdir).stop()


@pytest.mark.slow
def test_down_refuses_a_federation_holding_a_fault_then_restore_reverts_it(
        fed_target: LocalTarget, reports: Path) -> None:
    ledger = Ledger(reports / ".gameday" / "ledger.json")
    entry_id = _record(ledger, "gateway_down", "b", "local", fed_target.ref())
    fed_target.inject("gateway_down", "b", {})
    fed_target.fed.owner_pid = _dead_pid()  # as if its runner had been killed
    fed_target.fed._save_state()

    r = _gameday("down", "--reports", str(reports), cwd=reports.parent)
    assert r.returncode == 1
    assert f"refusing to stop federation {fed_target.fed.spec.run_id}" in r.stdout
    assert f"gateway_down b [{entry_id}]" in r.stdout and "gameday down --force" in r.stdout
    assert fed_target.fed.is_running("gateway-a")

    r = _gameday("restore", "--reports", str(reports), "--keep", cwd=reports.parent)
    assert r.returncode == 0, r.stdout
    assert f"OK    gateway_down b [{entry_id}]: reverted" in r.stdout
    assert ledger.pending() == []
    fed = LocalFederation.attach(fed_target.fed.workdir)
    assert fed.is_running("gateway-b")
    fed.wait_ready(20)


@pytest.mark.slow
def test_restore_signs_its_reverts_with_the_token_from_the_state_dir(fed_target: LocalTarget, reports: Path) -> None:
    """A fault reverted through an admin call (``gateway_unready``): ``gameday restore``, another
    process, finds the token through ``state.json``'s path. With a wrong token in that file the
    revert is refused (the entry stays, the message names neither token); with the right one it works."""
    fed = fed_target.fed
    ledger = Ledger(reports / ".gameday" / "ledger.json")
    entry_id = _record(ledger, "gateway_unready", "b", "local", fed_target.ref())
    fed_target.inject("gateway_unready", "b", {})
    gateway_b = fed.listen_endpoint("gateway-b").url + "/readyz"
    assert httpx.get(gateway_b, timeout=2).status_code == 503
    fed.owner_pid = _dead_pid()  # as if its runner had been killed
    fed._save_state()
    token = fed.admin_token_file.read_text()
    wrong = "x" * len(token)

    fed.admin_token_file.write_text(wrong)
    r = _gameday("restore", "--reports", str(reports), "--keep", cwd=reports.parent)
    assert r.returncode == 1 and f"FAIL  gateway_unready b [{entry_id}]" in r.stdout and "401" in r.stdout, r.stdout
    assert token not in r.stdout + r.stderr and wrong not in r.stdout + r.stderr
    assert [e.id for e in ledger.pending()] == [entry_id]
    assert httpx.get(gateway_b, timeout=2).status_code == 503

    fed.admin_token_file.write_text(token)
    r = _gameday("restore", "--reports", str(reports), "--keep", cwd=reports.parent)
    assert r.returncode == 0, r.stdout
    assert f"OK    gateway_unready b [{entry_id}]: reverted" in r.stdout
    assert httpx.get(gateway_b, timeout=2).status_code == 200
    assert ledger.pending() == []
    for path in (ledger.path, fed.workdir / "state.json", *fed.logdir.glob("*.log")):
        assert token not in path.read_text(encoding="utf-8", errors="replace"), path


@pytest.mark.slow
def test_down_force_then_restore_leaves_nothing_that_cannot_be_cleared(
        fed_target: LocalTarget, reports: Path, tmp_path: Path) -> None:
    """The sequence that used to wedge the ledger: a killed runner, `down`, then `restore`."""
    ledger = Ledger(reports / ".gameday" / "ledger.json")
    _record(ledger, "gateway_hung", "a", "local", fed_target.ref())
    fed_target.inject("gateway_hung", "a", {})
    # A second federation dir whose state file is corrupt must not stop the loop.
    bad = reports / ".gameday" / "federations" / "t-0"
    bad.mkdir(parents=True)
    (bad / "state.json").write_text('{"run_id": "x", "components": []}')

    r = _gameday("down", "--reports", str(reports), "--force", cwd=reports.parent)
    assert r.returncode == 0, r.stdout
    assert f"CORRUPT state {bad / 'state.json'}" in r.stdout
    assert f"stopped federation {fed_target.fed.spec.run_id}" in r.stdout
    assert "CLEAR gateway_hung a" in r.stdout
    assert not LocalFederation.attach(fed_target.fed.workdir).any_running()
    assert list(bad.glob("state.json.corrupt-*"))
    assert ledger.pending() == []

    # Even if the entry had survived (older versions), restore clears it: the federation is gone.
    _record(ledger, "gateway_hung", "a", "local", fed_target.ref())
    r = _gameday("restore", "--reports", str(reports), cwd=reports.parent)
    assert r.returncode == 0, r.stdout
    assert "CLEAR gateway_hung a" in r.stdout and "has no process left" in r.stdout


# -- a federation still dying after its runner's kill -9 -----------------------------------------
def _half_dead_federation(reports: Path, remnant_s: float) -> tuple[Ledger, str, subprocess.Popen[bytes]]:
    """The state a ``kill -9`` of the runner leaves for a moment: the runner (owner) and its
    nats-server dead, one component (a real process, here ``sleep``) still exiting."""
    fed = LocalFederation.from_topology(load_topology(), reports / ".gameday" / "federations" / "dying")
    fed.workdir.mkdir(parents=True, exist_ok=True)
    fed.spec.dump(fed.spec_path)
    remnant = subprocess.Popen(["sleep", str(remnant_s)])
    fed.components["nats"].pid = _dead_pid()
    fed.components["gateway-a"].pid = remnant.pid
    fed.components["gateway-a"].starttime = starttime(remnant.pid)
    fed.owner_pid = _dead_pid()
    fed._save_state()
    ledger = Ledger(reports / ".gameday" / "ledger.json")
    return ledger, _record(ledger, "gateway_down", "b", "local", {"workdir": str(fed.workdir)}), remnant


def test_restore_right_after_a_kill_9_waits_for_the_dying_federation_and_clears_its_entry(reports: Path) -> None:
    """Seen in a full run: `gameday restore` ran while the launcher was still stopping the
    components of a runner killed with -9; it tried the revert, found "nats is not running" and
    failed, leaving the entry pending though nothing was broken. Now it waits for the rest to exit."""
    ledger, entry_id, remnant = _half_dead_federation(reports, remnant_s=1.0)
    try:
        (entry,) = ledger.pending()
        t0 = time.monotonic()
        gone = local_federation_gone(entry)
        assert gone is not None and "died with its runner" in gone, gone
        assert 0.5 < time.monotonic() - t0 < DYING_GRACE_S
    finally:
        remnant.kill()
        remnant.wait()
    assert entry.id == entry_id


def test_a_remnant_that_does_not_exit_is_not_called_gone(reports: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: a process that outlives the grace keeps the federation 'may still hold it'
    (the revert is then tried and says what it finds); the owner alive means no wait at all."""
    monkeypatch.setattr(restore_module, "DYING_GRACE_S", 0.5)
    ledger, _, remnant = _half_dead_federation(reports, remnant_s=60)
    try:
        (entry,) = ledger.pending()
        assert local_federation_gone(entry) is None
        state = json.loads((Path(entry.target_ref["workdir"]) / "state.json").read_text())
        state["owner_pid"], state["owner_starttime"] = os.getpid(), starttime(os.getpid())
        (Path(entry.target_ref["workdir"]) / "state.json").write_text(json.dumps(state))
        monkeypatch.setattr(restore_module, "DYING_GRACE_S", 10.0)
        t0 = time.monotonic()
        assert local_federation_gone(entry) is None
        assert time.monotonic() - t0 < 5.0  # no wait: a wait would last the whole 10 s grace
    finally:
        remnant.kill()
        remnant.wait()
