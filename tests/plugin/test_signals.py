"""Signals and process lifetime, with real processes and real signals (no mocks).

``gameday drill`` runs pytest as its child; a terminal's Ctrl-C reaches the whole
process group, ``kill`` one process. Every case checks what a user relies on: the
exit says what was reverted, the ledger is empty, and no process of the run is left
(found by scanning ``/proc`` for a tag in the environment every process of the run
inherits, independently of the run's own records).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from gameday.runtime.interrupts import STOP_ENV, Interrupts, read_stop, write_stop
from gameday.runtime.procs import (
    HAVE_PDEATHSIG,
    ProcRegistry,
    die_with_parent,
    find_processes,
    pid_alive,
    stop_orphaned,
)

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"

# One test file for every moment: marker files say where the drill is.
#   started    federation and load are up (the fixtures are done)
#   baseline   the fault's steady-state check is about to run (HANG_BASELINE seconds of it)
#   injected   the fault is in effect
#   reverting  (with HANG_REVERT set) the target's revert has started; it lasts 1 s more
DRILL = """
import os, time
from pathlib import Path
import pytest

@pytest.mark.gameday
def test_hang(drill, load):
    Path("started").write_text("yes")
    Path("baseline").write_text("yes")
    # when the target's inject call started (CLOCK_MONOTONIC, one clock for every process): what
    # "injected after the signal" is judged by; the gateway's exit can come a second later on a
    # busy machine (a fresh-clone CI saw gateway-b exit 0.91 s after a signal sent just after the call)
    inner = getattr(drill.target, "_target", drill.target)
    real_inject = inner.inject
    def timed_inject(*args, **kwargs):
        Path("inject_called").write_text(repr(time.monotonic()))
        return real_inject(*args, **kwargs)
    inner.inject = timed_inject
    # when the federation's teardown started: it stops every gateway at once, but on a starved
    # machine one can exit a second before the others (a fresh-clone CI saw gateway-b go alone,
    # 4.7 s after a signal that came before any injection)
    real_down = inner.down
    def timed_down(*args, **kwargs):
        Path("down_called").write_text(repr(time.monotonic()))
        return real_down(*args, **kwargs)
    inner.down = timed_down
    if os.environ.get("HANG_REVERT"):
        # the marker from inside the target's revert (the shield is up by then), and a
        # revert that lasts: a signal sent on seeing it lands in the revert, however loaded
        # the machine (written as the block ended, it once landed before the revert began)
        target = getattr(drill.target, "_target", drill.target)
        real_revert = target.revert
        def slow_revert(*args, **kwargs):
            Path("reverting").write_text("yes")
            time.sleep(1.0)
            return real_revert(*args, **kwargs)
        target.revert = slow_revert
    with drill.fault("gateway_down", "b", baseline=float(os.environ.get("HANG_BASELINE", "1"))):
        Path("injected").write_text("yes")
        if not os.environ.get("HANG_REVERT"):
            time.sleep(120)
    Path("restored").write_text("yes")
    time.sleep(120)
"""

TAG_ENV = "GAMEDAY_TEST_TAG"


def _pending(reports: Path) -> list[dict[str, object]]:
    ledger = reports / ".gameday" / "ledger.json"
    if not ledger.exists():
        return []
    pending: list[dict[str, object]] = json.loads(ledger.read_text())["pending"]
    return pending


def leftovers(tag: str, timeout: float = 10.0) -> list[tuple[int, str]]:
    """Processes of the run still alive after *timeout* s (a process that is exiting,
    e.g. one that just received its death signal, gets that long to go)."""
    deadline = time.monotonic() + timeout
    while True:
        found = find_processes(tag)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


class Drill:
    """``gameday drill --test test_hang.py`` in its own process group, as a terminal runs it."""

    def __init__(self, path: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.path = path
        self.tag = f"gd-test-{uuid.uuid4().hex}"
        self.out = path / f"drill-{self.tag[-6:]}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gameday.cli", "drill", "--test", "test_hang.py", *extra],
            cwd=path, stdout=self.out.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, TAG_ENV: self.tag, **(env or {})},
        )

    def wait_for(self, marker: str, timeout: float = 120.0, poll: float = 0.02) -> None:
        path = self.path / marker if not marker.startswith("/") else Path(marker)
        deadline = time.monotonic() + timeout
        while not path.exists():
            assert self.proc.poll() is None, f"gameday drill exited early ({self.proc.returncode}):\n{self.text()}"
            assert time.monotonic() < deadline, f"{marker} did not appear within {timeout} s:\n{self.text()}"
            time.sleep(poll)

    def wait_for_federation(self, timeout: float = 60.0) -> None:
        """Until the federation's first processes run (its state file appeared)."""
        deadline = time.monotonic() + timeout
        while not list((self.path / "reports" / ".gameday" / "federations").glob("*/state.json")):
            assert self.proc.poll() is None, f"gameday drill exited early:\n{self.text()}"
            assert time.monotonic() < deadline, f"no federation within {timeout} s:\n{self.text()}"
            time.sleep(0.02)

    def pytest_pid(self) -> int:
        (pid,) = [p for p, cmd in find_processes(self.tag) if " -m pytest " in f" {cmd} "]
        return pid

    def send(self, how: str) -> None:
        """*how*: ``int-group`` (Ctrl-C), ``term-group``, ``hup-group`` (the terminal closed),
        ``term-wrapper``, ``kill-wrapper``."""
        sig = {"int": signal.SIGINT, "term": signal.SIGTERM, "hup": signal.SIGHUP,
               "kill": signal.SIGKILL}[how.split("-", maxsplit=1)[0]]
        if how.endswith("-group"):
            os.killpg(self.proc.pid, sig)
        else:
            os.kill(self.proc.pid, sig)

    def finish(self, timeout: float = 120.0) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)

    def text(self) -> str:
        return self.out.read_text(errors="replace")


@pytest.fixture
def hang(pytester: pytest.Pytester) -> Path:
    pytester.makeini(INI)
    pytester.makepyfile(test_hang=DRILL)
    return pytester.path


def _check_clean(d: Drill, rc: int, *, reverted: bool) -> None:
    out = d.text()
    assert rc != 0, out
    assert "Traceback" not in out, out
    assert _pending(d.path / "reports") == [], out
    assert leftovers(d.tag) == [], out
    if reverted:
        assert "reverted: gateway_down b" in out, out
    else:
        assert "no fault was in effect" in out, out


# -- unit-sized: the pieces on their own (a second or two each) ---------------------------------------
PARENT = """
import signal, sys, threading, time
from gameday.runtime.procs import spawn
def start():
    p = spawn(["sleep", "60"], death_signal=signal.SIGKILL)
    print(p.pid, flush=True)
if sys.argv[1] == "thread":  # a short-lived thread forks: the child must outlive the thread
    t = threading.Thread(target=start); t.start(); t.join()
else:
    start()
time.sleep(60)
"""


@pytest.mark.skipif(not HAVE_PDEATHSIG, reason="needs PR_SET_PDEATHSIG (Linux)")
@pytest.mark.parametrize("where", ["main", "thread"])
def test_a_spawned_child_dies_with_its_parent_under_kill_9(tmp_path: Path, where: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, where], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(0.3)
        assert Path(f"/proc/{child}").exists(), "the child died with the thread that forked it"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(5)
        deadline = time.monotonic() + 5
        while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{child}").exists(), f"child {child} outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.skipif(not HAVE_PDEATHSIG, reason="needs PR_SET_PDEATHSIG (Linux)")
def test_a_child_whose_parent_already_died_does_not_start() -> None:
    # The race: the parent died between fork and prctl; the child sees another parent pid.
    wrong_parent = 1 if os.getpid() != 1 else 2
    done = subprocess.run(["sleep", "30"], preexec_fn=lambda: die_with_parent(signal.SIGKILL, wrong_parent),
                          timeout=10, check=False)
    assert done.returncode == 1


REGISTERS = """
import subprocess, sys, time
from pathlib import Path
from gameday.runtime.procs import ProcRegistry
reg = ProcRegistry(Path(sys.argv[1]))
# No death signal: what a platform without PR_SET_PDEATHSIG (or the race) leaves behind.
p = subprocess.Popen(["sleep", "60"], start_new_session=True)
reg.add(p.pid, "locust-master", Path(sys.argv[1]))
print(p.pid, flush=True)
time.sleep(60)
"""


def test_the_registry_finds_what_a_killed_runner_left(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    runner = subprocess.Popen([sys.executable, "-c", REGISTERS, str(procs)], stdout=subprocess.PIPE, text=True)
    assert runner.stdout is not None
    child = int(runner.stdout.readline())
    out = []

    class Out:
        def write(self, s: str) -> int:
            out.append(s)
            return len(s)

    try:
        assert stop_orphaned(procs, only_orphans=True, out=Out()) == 0  # its runner lives: left alone
        assert Path(f"/proc/{child}").exists()
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(5)
        assert stop_orphaned(procs, only_orphans=True, out=Out()) == 1
        assert not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"
        assert f"stopped locust-master (pid {child}" in "".join(out)
        assert list(procs.glob("*.json")) == []
    finally:
        for pid in (runner.pid, child):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_corrupt_registry_is_reported_and_moved_aside(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    procs.mkdir()
    (procs / "123-456.json").write_text('{"owner": ')
    lines: list[str] = []

    class Out:
        def write(self, s: str) -> int:
            lines.append(s)
            return len(s)

    assert stop_orphaned(procs, only_orphans=False, out=Out()) == 0
    assert "123-456.json is unreadable" in "".join(lines)
    assert (procs / "123-456.json.corrupt").exists()
    ProcRegistry(procs).discard(1)  # a registry that never held anything writes nothing
    assert not list(procs.glob("*.json"))


SHIELDED = """
import signal, sys, time
from gameday.runtime.interrupts import INTERRUPTS
INTERRUPTS.install()
INTERRUPTS.describe = lambda: "the thing"
try:
    print("ready", flush=True)
    with INTERRUPTS.shielded("reverting the thing"):
        time.sleep(1.5)
        print("revert complete", flush=True)
    print("not reached", flush=True)
except KeyboardInterrupt as exc:
    print("interrupted:", exc, flush=True)
    time.sleep(1.0)   # cleanup: further signals only report
    print("cleanup complete", flush=True)
"""


def test_signals_never_interrupt_a_shielded_revert_and_later_ones_report() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SHIELDED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.5)  # now in the cleanup
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert out.splitlines() == ["revert complete", "interrupted: SIGTERM", "cleanup complete"], (out, err)
    assert "SIGTERM: finishing reverting the thing first" in err, err
    assert err.count("still reverting: the thing") == 2, err


def test_a_stop_written_by_the_wrapper_refuses_the_injection_before_the_signal_arrives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stop, ack = tmp_path / "stop", tmp_path / "signals.log"
    monkeypatch.setenv(STOP_ENV, str(stop))
    irq = Interrupts()
    irq.ack_path = ack
    irq.refuse_injection("gateway_down b")  # no stop yet: it passes
    irq.checkpoint("steady state")
    write_stop(stop, signal.SIGTERM, time.monotonic())
    write_stop(stop, signal.SIGINT, time.monotonic())  # the first stop stays
    assert read_stop() is not None and read_stop()[0] == signal.SIGTERM  # type: ignore[index]
    with pytest.raises(KeyboardInterrupt, match="not injecting gateway_down b: SIGTERM arrived at"):
        irq.refuse_injection("gateway_down b")
    assert irq.first == signal.SIGTERM
    assert ack.read_text().split()[0] == str(int(signal.SIGTERM))  # acknowledged: the wrapper need not forward it
    monkeypatch.delenv(STOP_ENV)
    assert read_stop() is None


PLANS = """
import sys
from pathlib import Path
from gameday.targets.local.plan import plan_federation
from gameday.model.topology import load_topology
topo = load_topology()
sys.stdin.readline()  # start together
ports = []
for _ in range(10):
    s = plan_federation(topo, Path("."))
    ports += [s.nats_port, s.control_plane.port, s.gslb_dns.port, s.gslb_http.port, s.gateway_port]
    for r in s.regions:
        ports += [r.proxy.port, r.agent.port, *(i.endpoint.port for i in r.instances)]
print(" ".join(map(str, ports)), flush=True)
sys.stdin.readline()
"""


def test_concurrent_planners_never_pick_the_same_port() -> None:
    procs = [subprocess.Popen([sys.executable, "-c", PLANS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    try:
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        picks = []
        for p in procs:
            assert p.stdout is not None
            picks.append([int(x) for x in p.stdout.readline().split()])
        a, b = picks
        assert len(a) == len(b) > 100
        assert not set(a) & set(b), f"both planned {sorted(set(a) & set(b))}"
    finally:
        for p in procs:
            p.kill()
            p.wait()


# -- real drills under gameday drill --------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("how", ["int-group", "term-group", "term-wrapper"])
def test_a_signal_at_startup_stops_everything(hang: Path, how: str) -> None:
    d = Drill(hang)
    d.wait_for_federation()
    d.send(how)
    rc = d.finish()
    _check_clean(d, rc, reverted=False)
    assert "pytest exited with code" in d.text()


@pytest.mark.slow
def test_ctrl_c_while_locust_starts_stops_it_too(hang: Path) -> None:
    d = Drill(hang)
    deadline = time.monotonic() + 60
    while not any(" -m locust " in f" {cmd} " for _, cmd in find_processes(d.tag)):
        assert d.proc.poll() is None and time.monotonic() < deadline, d.text()
        time.sleep(0.005)
    d.send("int-group")
    rc = d.finish()
    _check_clean(d, rc, reverted=False)
    assert list((hang / "reports" / ".gameday" / "procs").glob("*.json")) == []  # the registry emptied


@pytest.mark.slow
def test_ctrl_c_in_the_baseline_injects_nothing(hang: Path) -> None:
    d = Drill(hang, env={"HANG_BASELINE": "30"})
    d.wait_for("baseline")
    time.sleep(0.5)
    d.send("int-group")
    rc = d.finish()
    _check_clean(d, rc, reverted=False)
    assert not (hang / "injected").exists()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["int-group", "term-group", "hup-group", "term-wrapper", "kill-wrapper"])
def test_a_signal_while_the_fault_is_in_effect_reverts_and_stops_everything(hang: Path, how: str) -> None:
    d = Drill(hang)
    d.wait_for("injected")
    assert len(_pending(hang / "reports")) == 1
    time.sleep(0.5)
    if how == "kill-wrapper":  # the wrapper dies at once; pytest gets SIGTERM and still reverts
        pytest_pid = d.pytest_pid()
        d.send(how)
        d.finish()
        deadline = time.monotonic() + 90
        while Path(f"/proc/{pytest_pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _pending(hang / "reports") == [], d.text()
        assert leftovers(d.tag) == [], d.text()
        assert "reverted: gateway_down b" in d.text()
        return
    d.send(how)
    rc = d.finish()
    _check_clean(d, rc, reverted=True)
    out = d.text()
    assert "still reverting" not in out, "one signal was delivered twice"
    assert "pytest exited with code 2 after" in out


@pytest.mark.slow
def test_a_second_ctrl_c_during_the_revert_says_what_is_reverted_and_waits(hang: Path) -> None:
    d = Drill(hang, env={"HANG_REVERT": "1"})
    d.wait_for("reverting", poll=0.005)
    d.send("int-group")   # lands in the revert: it is finished first
    time.sleep(0.3)
    d.send("int-group")
    rc = d.finish()
    _check_clean(d, rc, reverted=True)
    out = d.text()
    assert "finishing reverting gateway_down b" in out or \
        "finishing gateway_down b reverted, waiting for the federation's steady state" in out, out
    assert "still reverting:" in out, out
    figures = list((hang / "reports" / "runs").glob("*/drills/*/figures-0.json"))
    assert len(figures) == 1, out  # the drill completed and recorded its result


def _component_pid(path: Path, name: str) -> int:
    (state,) = (path / "reports" / ".gameday" / "federations").glob("*/state.json")
    pid: int = json.loads(state.read_text())["components"][name]["pid"]
    return pid


class _DeathWatch(threading.Thread):
    """When each of *pids* (name -> pid) stopped (exited or became a zombie), polled every 2 ms
    from outside."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.gone: dict[str, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set() and len(self.gone) < len(self.pids):
            for name, pid in self.pids.items():
                if name not in self.gone and not pid_alive(pid):
                    self.gone[name] = time.monotonic()
            time.sleep(0.002)

    def stopped_alone(self, name: str, margin: float = 0.2) -> float | None:
        """When *name* stopped while the others still ran (a fault's doing, not the federation's
        teardown, which stops them all), or None."""
        t = self.gone.get(name)
        others = [u for n, u in self.gone.items() if n != name]
        if t is None or (others and min(others) < t + margin):
            return None
        return t


@pytest.mark.slow
@pytest.mark.parametrize(("how", "offset"), [("term-wrapper", 1.9), ("int-wrapper", 2.3), ("hup-wrapper", 2.45),
                                             ("term-wrapper", 2.7)])
def test_a_signal_to_the_wrapper_alone_around_the_injection_injects_nothing_after_it(
        hang: Path, how: str, offset: float) -> None:
    # A signal to `gameday drill` alone (`kill PID`, `timeout`, a CI runner cancelling its job)
    # reaches pytest only when forwarded, up to a second later; in that gap pytest used to go on
    # and inject (issue 32: 7 of 12 trials, gateway stopped up to 0.77 s after the signal). The
    # drill's fault is injected about 2.4 s after the baseline marker on an idle machine (later
    # on a busy one): the signals land around it.
    # Judged from outside: when gateway-b's process stopped, against when the signal was sent.
    d = Drill(hang)
    d.wait_for("baseline", poll=0.002)
    t_base = time.monotonic()
    watch = _DeathWatch({g: _component_pid(hang, g) for g in ("gateway-a", "gateway-b", "gateway-c")})
    watch.start()
    time.sleep(max(0.0, t_base + offset - time.monotonic()))
    t_sent = time.monotonic()
    d.send(how)
    rc = d.finish()
    watch.done.set()
    watch.join(5)
    out = d.text()
    sig = {"term": signal.SIGTERM, "int": signal.SIGINT, "hup": signal.SIGHUP}[how.split("-", maxsplit=1)[0]]
    name = "Ctrl-C (SIGINT)" if sig == signal.SIGINT else sig.name
    assert rc == 128 + sig, out
    assert "Traceback" not in out, out
    assert _pending(hang / "reports") == [], out
    assert leftovers(d.tag) == [], out
    assert f"gameday: no fault was injected after the {name}" in out, out
    stopped = watch.stopped_alone("gateway-b")
    down = hang / "down_called"
    if stopped is not None and down.exists() and stopped >= float(down.read_text()):
        stopped = None  # it went in the teardown, only first
    if stopped is None:  # the stop came first: nothing was injected at all (the teardown stopped every gateway)
        assert not (hang / "injected").exists(), out
        assert "gameday: not injecting gateway_down b" in out or "no fault was in effect" in out, out
    else:  # injected before the signal, then reverted: the inject call started before it (its
        # gateway's exit, when stopped alone, can come up to a second later on a busy machine)
        called = hang / "inject_called"
        assert called.exists(), f"gateway-b stopped alone {stopped - t_sent:+.3f} s after the signal, no inject " \
                                f"call\n{out}"
        late = float(called.read_text()) - t_sent
        assert late < 0.2, f"the inject call started {late:+.3f} s after the signal\n{out}"
        assert "reverted: gateway_down b" in out, out


DRILL_LOCUST_KILL = """
import pytest

@pytest.mark.gameday
def test_hang(drill, load):
    pass
"""


@pytest.mark.slow
def test_kill_9_as_locust_starts_then_restore_leaves_no_process(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_hang=DRILL_LOCUST_KILL)
    tag = f"gd-test-{uuid.uuid4().hex}"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-s"], cwd=pytester.path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, TAG_ENV: tag})
    try:
        deadline = time.monotonic() + 90
        while not any(" -m locust " in f" {cmd} " for _, cmd in find_processes(tag)):
            assert proc.poll() is None and time.monotonic() < deadline, "locust never started"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)  # locust is still importing itself: ~1-2 s before it runs
        proc.wait(10)
        assert leftovers(tag) == []
        restored = subprocess.run([sys.executable, "-m", "gameday.cli", "restore", "--reports", "reports"],
                                  cwd=pytester.path, capture_output=True, text=True, timeout=120, check=False)
        assert restored.returncode == 0, restored.stdout + restored.stderr
        assert "Traceback" not in restored.stderr
        assert leftovers(tag, timeout=0) == []
    finally:
        if proc.poll() is None:
            proc.kill()


CONCURRENT = """
import pytest

@pytest.mark.gameday
def test_hang(drill, load):
    region = drill.pick_region()
    with drill.fault("gateway_down", region) as fault:
        result = drill.observe_switchover(fault, timeout=30)
    result.assert_switchover_under(10)
"""


@pytest.mark.slow
def test_two_drills_started_together_from_one_checkout_both_pass(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_hang=CONCURRENT)
    drills = [Drill(pytester.path, "--seed", str(seed), "--gameday-recovery-window=3") for seed in (1, 2)]
    rcs = [d.finish(300) for d in drills]
    for d, rc in zip(drills, rcs, strict=True):
        assert rc == 0, d.text()
        assert leftovers(d.tag) == []
    run_dirs = [Path(line.split(": ", 1)[1]) for d in drills for line in d.text().splitlines()
                if line.startswith("run directory: ")]
    assert len(set(run_dirs)) == 2
    for run_dir in run_dirs:
        assert (run_dir / "junit.xml").read_text().count("<testcase") == 1
        assert list((run_dir / "allure-results").glob("*-result.json"))
        assert list(run_dir.glob("drills/*/figures-0.json"))
    feds = list((pytester.path / "reports" / ".gameday" / "federations").glob("*/state.json"))
    assert len(feds) == 2
    assert _pending(pytester.path / "reports") == []


def test_helpers_find_a_process_by_its_environment(tmp_path: Path) -> None:
    tag = f"gd-test-{uuid.uuid4().hex}"
    p = subprocess.Popen(["sleep", "30"], env={**os.environ, TAG_ENV: tag})
    try:
        assert [pid for pid, _ in find_processes(tag)] == [p.pid]
    finally:
        p.kill()
        p.wait()
    assert find_processes(tag) == []



# -- a signal is never lost: swallowed by a finalizer, it still stops the run ---------------------------
SWALLOWING = """
import os, signal, sys, time, weakref
from gameday.runtime.interrupts import INTERRUPTS

SIG = getattr(signal, sys.argv[1])

def signal_and_spin():
    os.kill(os.getpid(), SIG)
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:  # the handler runs here, inside the finalizer
        pass

class Finalizer:
    def __del__(self):
        signal_and_spin()

class Referent:
    pass

INTERRUPTS.install()
INTERRUPTS.describe = lambda: ""
try:
    if sys.argv[2] == "del":
        Finalizer()  # dropped at once: its __del__ runs now
    else:  # a weakref callback: no __del__ on the stack, Python discards the exception all the same
        r = Referent()
        weakref.finalize(r, signal_and_spin)
        del r
    print("went on", flush=True)
    time.sleep(3)
    print("not raised", flush=True)
except KeyboardInterrupt as exc:
    print("raised after the finalizer:", exc, flush=True)
print("swallowed", INTERRUPTS.swallowed, flush=True)
try:
    INTERRUPTS.refuse_injection("gateway_down b")
    print("injected", flush=True)
except KeyboardInterrupt as exc:
    print("refused:", exc, flush=True)
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("where", ["del", "weakref"])
def test_a_signal_inside_a_finalizer_is_raised_right_after_it_and_refuses_every_injection(
        sig: str, where: str) -> None:
    done = subprocess.run([sys.executable, "-c", SWALLOWING, sig, where], capture_output=True, text=True,
                          timeout=30, check=False)
    out, err = done.stdout, done.stderr
    name = "Ctrl-C (SIGINT)" if sig == "SIGINT" else sig
    # Not inside the finalizer (where it would be lost) but right after it, in the 3 s sleep at the latest.
    assert f"raised after the finalizer: {name}\n" in out, (out, err)
    assert "not raised" not in out, (out, err)
    assert "injected" not in out, (out, err)
    assert f"refused: gameday: not injecting gateway_down b: {name} arrived at t+" in out, (out, err)
    if where == "del":  # seen in the handler: never raised inside the finalizer
        assert f"gameday: the {name} arrived inside Finalizer.__del__, a finalizer" in err, err
        assert "swallowed 0" in out, (out, err)
    else:  # raised inside the callback, discarded by Python, seen by the unraisable hook
        assert f"gameday: the {name} was swallowed by " in err, err
        assert "swallowed 1" in out, (out, err)
    assert "Traceback" not in err, err  # said in one line, no finalizer traceback


NOTHING_TO_REVERT = """
import signal, time
from gameday.runtime.interrupts import INTERRUPTS
INTERRUPTS.install()
INTERRUPTS.describe = lambda: ""   # the session's: nothing pending, nothing shielded
try:
    print("ready", flush=True)
    time.sleep(5)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    time.sleep(1.0)   # the teardown: a second signal arrives here
    print("done", flush=True)
"""


def test_a_second_signal_with_nothing_to_revert_does_not_claim_a_revert() -> None:
    proc = subprocess.Popen([sys.executable, "-c", NOTHING_TO_REVERT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGINT)
    assert proc.stdout.readline() == "interrupted\n"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert out == "done\n", (out, err)
    assert "still reverting" not in err, err
    assert "Ctrl-C (SIGINT) again: nothing is being reverted and no fault of this run is in effect" in err, err


# A drill that swallows a signal at one phase boundary (SWALLOW_AT): the exception is raised
# inside a finalizer, which Python ignores ("Exception ignored in ..."), and the test goes on.
SWALLOW_DRILL = """
import os, signal, time
from pathlib import Path
import pytest

WHERE = os.environ["SWALLOW_AT"]
SIG = getattr(signal, os.environ["SWALLOW_SIG"])

class Finalizer:
    def __del__(self):
        os.kill(os.getpid(), SIG)
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:  # the handler runs here, inside __del__
            pass

def swallow(where):
    if WHERE == where:
        Path("swallowed-at").write_text(where)
        Finalizer()  # dropped at once: __del__ runs now

@pytest.fixture(scope="session")
def federation(federation):
    swallow("federation-up")
    return federation

@pytest.fixture
def load(load):
    swallow("load-started")
    return load

@pytest.mark.gameday
def test_hang(drill, load, monkeypatch):
    from gameday.drill import waits
    real = waits.steady_state
    def steady_then_swallow(*args, **kwargs):
        real(*args, **kwargs)
        swallow("steady-state")
    monkeypatch.setattr(waits, "steady_state", steady_then_swallow)
    swallow("before-fault")
    with drill.fault("gateway_down", "b", baseline=1):
        Path("injected").write_text("yes")
    Path("passed").write_text("yes")
"""


@pytest.mark.slow
@pytest.mark.parametrize(("where", "sig"), [("federation-up", "SIGINT"), ("load-started", "SIGINT"),
                                            ("steady-state", "SIGINT"), ("before-fault", "SIGINT"),
                                            ("steady-state", "SIGTERM")])
def test_a_signal_swallowed_at_a_phase_boundary_injects_nothing_and_fails_the_run(
        pytester: pytest.Pytester, where: str, sig: str) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_hang=SWALLOW_DRILL)
    d = Drill(pytester.path, env={"SWALLOW_AT": where, "SWALLOW_SIG": sig})
    rc = d.finish(180)
    out = d.text()
    swallowed = pytester.path / "swallowed-at"
    assert swallowed.exists() and swallowed.read_text() == where, f"the drill never got to {where}:\n{out}"
    assert not (pytester.path / "injected").exists(), out
    assert not (pytester.path / "passed").exists(), out
    signum = getattr(signal, sig)
    assert rc == 128 + signum, out
    name = "Ctrl-C (SIGINT)" if sig == "SIGINT" else sig
    assert f"gameday: the {name} arrived inside Finalizer.__del__, a finalizer" in out, out
    assert f"pytest exited with code 2 after {name}" in out, out
    assert "exited with code 0" not in out, out
    _check_clean(d, rc, reverted=False)


# -- the wrapper tells the truth about how pytest ended -------------------------------------------------
def _printed_paths(out: str) -> list[Path]:
    """Every path `gameday drill` names as an output of the run."""
    paths = []
    for line in out.splitlines():
        for prefix in ("JUnit: ", "Allure results: ", "figures, timelines and run.json: "):
            if line.startswith(prefix):
                paths.append(Path(line[len(prefix):].split("  ")[0]))
    return paths


@pytest.mark.slow
@pytest.mark.parametrize("when", ["injected", "started"])
def test_kill_9_of_pytest_names_what_it_left_and_the_restore_command(hang: Path, when: str) -> None:
    d = Drill(hang)
    d.wait_for(when)
    os.kill(d.pytest_pid(), signal.SIGKILL)
    rc = d.finish()
    out = d.text()
    assert rc == 128 + signal.SIGKILL, out
    assert "was killed (SIGKILL); it could not revert anything" in out, out
    assert "Traceback" not in out, out
    assert all(p.exists() for p in _printed_paths(out)), out
    assert "JUnit: " not in out, out  # pytest never wrote it
    reports = (hang / "reports").resolve()
    if when == "started":
        assert "gameday: nothing was pending in the ledger from it" in out, out
        assert _pending(hang / "reports") == []
        return
    assert len(_pending(hang / "reports")) == 1, out
    command = f"gameday restore --reports {reports}"
    assert f"gameday: still in the ledger: gateway_down b: run `{command}`" in out, out
    # The command it printed, as printed, puts the federation back.
    restored = subprocess.run([sys.executable, "-m", "gameday.cli", *command.split()[1:]], cwd=hang,
                              capture_output=True, text=True, timeout=180, check=False)
    assert restored.returncode == 0, out + restored.stdout + restored.stderr
    assert _pending(hang / "reports") == [], out + restored.stdout
    assert leftovers(d.tag) == [], out + restored.stdout


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])


@pytest.mark.slow
def test_kill_9_of_an_xdist_run_names_what_its_worker_left(hang: Path) -> None:
    """`gameday drill -n 1`: the fault is in the worker's ledger entry (its runner pid is the
    worker's); the whole run killed with -9 (worker, then controller), the wrapper still names
    it, because the entry also records the run's main process (session_pid)."""
    d = Drill(hang, "-n", "1")
    d.wait_for("injected")
    controller = d.pytest_pid()
    (worker,) = [p for p, _ in find_processes(d.tag) if _ppid(p) == controller]
    (entry,) = _pending(hang / "reports")
    assert entry["runner_pid"] == worker and entry["session_pid"] == controller, entry
    os.kill(worker, signal.SIGKILL)
    os.kill(controller, signal.SIGKILL)
    rc = d.finish()
    out = d.text()
    assert rc == 128 + signal.SIGKILL, out
    reports = (hang / "reports").resolve()
    assert f"gameday: still in the ledger: gateway_down b: run `gameday restore --reports {reports}`" in out, out
    restored = subprocess.run([sys.executable, "-m", "gameday.cli", "restore", "--reports", str(reports)], cwd=hang,
                              capture_output=True, text=True, timeout=180, check=False)
    assert restored.returncode == 0, out + restored.stdout + restored.stderr
    assert _pending(hang / "reports") == [], out + restored.stdout
    assert leftovers(d.tag) == [], out + restored.stdout


@pytest.mark.slow
@pytest.mark.parametrize("how", ["int-group", "term-group"])
def test_a_signal_while_pytest_imports_its_plugins_prints_one_line(hang: Path, how: str) -> None:
    d = Drill(hang)
    deadline = time.monotonic() + 30
    while not any(" -m pytest " in f" {cmd} " for _, cmd in find_processes(d.tag)):
        assert d.proc.poll() is None and time.monotonic() < deadline, d.text()
        time.sleep(0.005)
    time.sleep(0.2)  # pytest is importing itself and its plugins (about 1.5 s)
    assert not list((hang / "reports" / "runs").glob("*/signals.log")), "too late: pytest is ready already"
    d.send(how)
    rc = d.finish(60)
    out = d.text()
    sig = signal.SIGINT if how == "int-group" else signal.SIGTERM
    assert rc == 128 + sig, out
    name = "Ctrl-C (SIGINT)" if sig == signal.SIGINT else "SIGTERM"
    assert f"gameday: {name} before the run started; nothing was injected" in out, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert len(out.splitlines()) <= 4, out  # running:, run directory:, the line, removed
    assert leftovers(d.tag) == []
    assert not list((hang / "reports" / "runs").iterdir()), out  # nothing was written: no empty directory
    assert all(p.exists() for p in _printed_paths(out)), out


def test_a_usage_error_leaves_no_run_directory_and_names_no_file(hang: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gameday.cli", "drill", "--test", "test_hang.py",
                           "--gameday-rounds=zero"], cwd=hang, capture_output=True, text=True, timeout=120,
                          check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 4, out
    assert "--gameday-rounds" in out, out
    assert "JUnit: " not in out and "Allure results: " not in out, out
    assert "run directory: nothing was written; removed" in out, out
    assert list((hang / "reports" / "runs").iterdir()) == [], out
