"""Targets and faults a third party adds without touching gameday.

- a target from a conftest through the ``pytest_gameday_make_target`` hook, chosen with
  ``--gameday-target``: the headline drill passes on it, the header and run.json name it,
  and the ledger records where its ``attach`` lives;
- a fault from a conftest (a :class:`~gameday.faults.Fault` plus its local action) used by
  a drill with the same string API as the built-ins;
- a target without the optional capabilities: the conformance checks that need them skip
  with their reason;
- ``gameday restore`` re-attaches a third-party target from the ledger's attach path;
- the registry: unknown names, and the lazy import of a target not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gameday.drill import Drill
from gameday.errors import ConfigError, TargetError
from gameday.faults import FAULTS, Fault, Ledger, Param
from gameday.model.topology import load_topology
from gameday.restore import attach_target
from gameday.runtime.settings import Settings
from gameday.targets import registry
from gameday.targets.k8s.plan import K8S_ACTIONS
from gameday.targets.local import LocalTarget
from gameday.targets.local.faults import LOCAL_ACTIONS

REPO = Path(__file__).resolve().parents[2]
INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"

# An importable module (not the conftest): `gameday restore` must be able to import it.
MYTARGETS = '''
from gameday.targets.local import LocalTarget


class MineTarget(LocalTarget):
    """A third party's target: the local federation under another name."""

    name = "mine"
'''

CONFTEST_MINE = '''
from mytargets import MineTarget

from gameday.faults import FAULTS, Fault
from gameday.targets.local.faults import LOCAL_ACTIONS


class SayUnready:
    """A fault action of this conftest's own: inject, its exact inverse, and both in words."""

    def inject(self, fed, call):
        fed.set_readyz_fault(f"gateway-{call.region}", {"readyz": "fail"})

    def revert(self, fed, call):
        fed.set_readyz_fault(f"gateway-{call.region}", {"readyz": "ok"})

    def plan(self, fed, call):
        return f"make gateway-{call.region} say it is unready", f"make gateway-{call.region} ready"


FAULTS.add(Fault(name="gateway_says_unready", needs_region=True, takes_region_out=True,
                 description="the region's gateway answers /readyz with 503 (a conftest's fault)"))
LOCAL_ACTIONS.register("gateway_says_unready", SayUnready())


def pytest_gameday_target_names(config):
    return ["mine"]


def pytest_gameday_make_target(config, name, topology, settings, workdir):
    return MineTarget(topology, workdir) if name == "mine" else None
'''

TEST_CONFTEST_FAULT = '''
import pytest


@pytest.mark.gameday
def test_a_conftest_fault(drill, federation):
    assert federation.name == "mine"
    region = drill.pick_region()
    with drill.fault("gateway_says_unready", region) as fault:
        (entry,) = drill.ledger.pending()
        assert entry.attach == "mytargets:MineTarget.attach", entry
        assert entry.target == "mine"
        result = drill.observe_switchover(fault)
    result.assert_switchover_under(10)
    result.assert_dns_converged(10)
'''


@pytest.mark.slow
def test_a_conftest_target_runs_the_headline_drill_and_a_conftest_fault(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(mytargets=MYTARGETS, conftest=CONFTEST_MINE, test_zz_conftest_fault=TEST_CONFTEST_FAULT)
    shutil.copy(REPO / "suites" / "gameday" / "test_gateway_outage.py", pytester.path)
    result = pytester.runpytest_subprocess("--gameday-target", "mine", "--gameday-seed=3",
                                           "--gameday-recovery-window=3", timeout=400)
    result.stdout.fnmatch_lines(["gameday: target=mine topology=* seed=3 *"])
    result.assert_outcomes(passed=2)
    (run,) = (pytester.path / "reports" / "runs").glob("*/run.json")
    data = json.loads(run.read_text())
    assert data["target"] == "mine"
    assert {d["fault"] for d in data["drills"]} == {"gateway_down", "gateway_says_unready"}, data["drills"]
    assert json.loads((pytester.path / "reports" / ".gameday" / "ledger.json").read_text()) == {"pending": []}


CONFTEST_BARE = '''
from gameday.targets.local import LocalTarget


class BareTarget:
    """Only what every target must do: a wrapper of the local target without its extras."""

    name = "bare"

    def __init__(self, topology, workdir):
        self._inner = LocalTarget(topology, workdir)
        self.topology = topology

    def __getattr__(self, attr):
        if attr in ("up", "deploy", "down", "regions", "endpoints", "sources", "check_health", "inject", "revert",
                    "ref"):
            return getattr(self._inner, attr)
        raise AttributeError(attr)


def pytest_gameday_target_names(config):
    return ["bare"]


def pytest_gameday_make_target(config, name, topology, settings, workdir):
    return BareTarget(topology, workdir) if name == "bare" else None
'''


@pytest.mark.slow
def test_checks_needing_a_capability_skip_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(conftest=CONFTEST_BARE)
    for name in ("test_r03_slow_state.py", "test_r12_release.py"):
        shutil.copy(REPO / "suites" / "conformance" / name, pytester.path)
    result = pytester.runpytest_subprocess("--gameday-target=bare", "-rs", "-k", "r3 or r12",
                                           timeout=300)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines_random([
        "SKIPPED *target bare cannot reconcile: R3 needs a full reconciliation pass on demand",
        "SKIPPED *target bare cannot release through a release mechanism of its own: R12 judges the federation's "
        "own release",
    ])


def test_an_unknown_target_is_a_usage_error_listing_the_hooks_names_too(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makeconftest("def pytest_gameday_target_names(config):\n    return ['mine']\n")
    pytester.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    result = pytester.runpytest("--gameday-target=minee")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gameday: --gameday-target (command line): got 'minee', expected one of "
                                 "external, kind, kube, local, mine, or a target plugged in with the *"])
    assert not (pytester.path / "reports").exists()


def test_a_named_target_no_hook_builds_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makeconftest("def pytest_gameday_target_names(config):\n    return ['ghost']\n")
    pytester.makepyfile("def test_x(federation): raise AssertionError('must not run')")
    result = pytester.runpytest("--gameday-target=ghost")
    result.stdout.fnmatch_lines(["*UsageError: gameday: --gameday-target=ghost: unknown target; expected one of "
                                 "external, ghost, kind, kube, local, *"])
    result.assert_outcomes(errors=1)


def test_a_hook_answer_that_is_not_a_target_says_what_it_lacks(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makeconftest(textwrap.dedent('''
        class Half:
            name = "half"
            def up(self): pass

        def pytest_gameday_target_names(config):
            return ["half"]

        def pytest_gameday_make_target(config, name, topology, settings, workdir):
            return Half() if name == "half" else None
    '''))
    pytester.makepyfile("def test_x(federation): raise AssertionError('must not run')")
    result = pytester.runpytest("--gameday-target=half")
    result.stdout.fnmatch_lines(["*UsageError: gameday: --gameday-target=half: the pytest_gameday_make_target hook "
                                 "returned Half, which is not a gameday Target (missing: deploy, down, regions, "
                                 "endpoints, sources, check_health, inject, revert, ref; *"])


# -- the registry, without pytest -------------------------------------------------------------------
def test_the_registry_builds_and_reattaches_the_builtins(tmp_path: Path) -> None:
    topology = load_topology()
    t = registry.make("local", topology, Settings(), tmp_path / "fed")
    assert isinstance(t, LocalTarget)
    assert registry.attach_path(t) is None  # a built-in: the ledger's target name finds it again
    with pytest.raises(ConfigError, match=r"unknown target 'nope'; expected one of external, kind, kube, local"):
        registry.make("nope", topology, Settings(), tmp_path)


def test_a_target_registered_lazily_says_what_cannot_be_imported(tmp_path: Path) -> None:
    """``external`` is registered by import path; until its module exists (or when a
    package is missing) the error names the path and the import problem."""
    registry.register("absent", "gameday.targets.no_such_module:NoTarget.from_settings",
                      "gameday.targets.no_such_module:NoTarget.attach")
    try:
        with pytest.raises(TargetError, match=r"target 'absent' \(factory\): cannot import gameday\.targets\."
                                              r"no_such_module:NoTarget\.from_settings \(No module named "
                                              r"'gameday\.targets\.no_such_module'\); is the package"):
            registry.make("absent", load_topology(), Settings(), tmp_path)
        with pytest.raises(TargetError, match=r"target 'absent' \(attach\): cannot import"):
            registry.attach("absent", {})
    finally:
        registry.REGISTRY.unregister("absent")
    with pytest.raises(TargetError, match=r"LocalTarget\.nope not found"):
        registry.load("gameday.targets.local:LocalTarget.nope", what="x")
    with pytest.raises(ConfigError, match="is not an import path"):
        registry.load("gameday.targets.local", what="x")


def test_restore_without_a_registered_name_or_attach_path_says_so() -> None:
    with pytest.raises(TargetError, match=r"cannot restore target 'mine': no target of that name is registered "
                                          r"\(external, kind, kube, local\) and the ledger entry records no attach"):
        attach_target("mine", {"workdir": "/nowhere"})


def test_gameday_restore_reattaches_a_third_party_target_from_the_ledger(tmp_path: Path) -> None:
    """A ``mine`` target's run was killed mid-fault: restore imports the recorded attach
    path, reverts the fault on the live federation and checks it is healthy."""
    (tmp_path / "mytargets.py").write_text(MYTARGETS)
    reports = tmp_path / "reports"
    fed_dir = reports / ".gameday" / "federations" / "mine-1"
    sys.path.insert(0, str(tmp_path))
    try:
        import mytargets  # written above

        target = mytargets.MineTarget(load_topology(), fed_dir)
        path = registry.attach_path(target)
        assert path == "mytargets:MineTarget.attach"
        target.up()
        try:
            target.deploy()
            ledger = Ledger(reports / ".gameday" / "ledger.json")
            params: dict[str, Any] = {}
            entry = ledger.record("gateway_down", "b", params, target.name, target.ref(), attach=path)
            target.inject("gateway_down", "b", params)
            assert not target.fed.is_running("gateway-b")
            data = json.loads(ledger.path.read_text())
            dead = subprocess.Popen([sys.executable, "-c", "pass"])
            dead.wait()
            data["pending"][0]["runner_pid"] = dead.pid  # as if the runner had been killed
            ledger.path.write_text(json.dumps(data))
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
            r = subprocess.run([sys.executable, "-m", "gameday.cli", "restore", "--reports", str(reports), "--keep"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
            assert r.returncode == 0, r.stdout + r.stderr
            assert f"OK    gateway_down b [{entry.id}]: reverted; every component healthy (mine " in r.stdout
            assert LocalTarget.attach(target.ref()).fed.is_running("gateway-b")  # restarted by restore
            assert ledger.pending() == []
        finally:
            LocalTarget.attach(target.ref()).down()  # from the state file: it knows restore's new pid
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("mytargets", None)


# -- faults as objects ---------------------------------------------------------------------------------
def test_every_builtin_fault_has_a_local_and_a_kube_action() -> None:
    assert set(FAULTS) == set(LOCAL_ACTIONS) == set(K8S_ACTIONS)


def test_stopped_by_is_the_faults_own_fact(tmp_path: Path) -> None:
    target = LocalTarget(load_topology(), tmp_path / "fed")
    assert target.stopped_by("gateway_down", "b") == {"gateway-b"}
    assert target.stopped_by("bus_down", None) == {"nats"}
    assert target.stopped_by("gateway_hung", "b") == frozenset()


def test_a_registered_fault_is_checked_like_a_builtin(tmp_path: Path) -> None:
    fault = Fault(name="test_only_fault", needs_region=True, params=(Param("seconds"), Param("depth", 2)),
                  description="for this test")
    FAULTS.add(fault)
    try:
        with pytest.raises(ConfigError, match="already registered"):
            FAULTS.add(fault)
        with pytest.raises(ConfigError, match=r"fault 'test_only_fault' needs the parameter\(s\) \['seconds'\]"):
            FAULTS.check("test_only_fault", "a", {}, ["a", "b"])
        assert FAULTS.check("test_only_fault", "a", {"seconds": 1}, ["a"]) is fault
        assert fault.describe() == "test_only_fault REGION seconds=... [depth=2]: for this test"
        target = LocalTarget(load_topology(), tmp_path / "fed")
        with pytest.raises(ConfigError, match=r"fault 'test_only_fault' has no local action; register one with "
                                              r"gameday\.targets\.local\.faults\.LOCAL_ACTIONS\.register"):
            target.plan_fault("test_only_fault", "a", {"seconds": 1})
    finally:
        FAULTS.unregister("test_only_fault")


def test_a_target_may_bring_faults_of_its_own(tmp_path: Path) -> None:
    """:class:`HasFaults`: a profile's command faults, say; the built-in table is untouched."""
    own = Fault(name="nginx_reload", needs_region=True, takes_region_out=True, description="reload nginx")

    class WithFaults(LocalTarget):
        def faults(self) -> dict[str, Fault]:
            return {own.name: own}

    target = WithFaults(load_topology(), tmp_path / "fed")
    drill = Drill(target, Settings(), seed_key="t", ledger=Ledger(tmp_path / "ledger.json"), offered=60, margin=0.2)
    assert drill.faults.check("nginx_reload", "a", {}, ["a"]) is own
    assert drill.faults.check("gateway_down", "a", {}, ["a"]) is FAULTS["gateway_down"]
    assert "nginx_reload" not in FAULTS


MYFAULTS = '''
from gameday.faults import FAULTS, Fault
from gameday.targets.local.faults import LOCAL_ACTIONS, Freeze, region_proxy

FAULTS.add(Fault(name="proxy_frozen", needs_region=True, description="the region's proxy is frozen"))
LOCAL_ACTIONS.register("proxy_frozen", Freeze(region_proxy))
'''


def test_gameday_restore_reverts_a_plugin_fault_once_told_where_it_is(tmp_path: Path) -> None:
    """A fault a plugin module registers exists in `gameday restore` only with ``-p MODULE``;
    without it restore fails saying so, and keeps the entry."""
    (tmp_path / "myfaults.py").write_text(MYFAULTS)
    reports = tmp_path / "reports"
    target = LocalTarget(load_topology(), reports / ".gameday" / "federations" / "main-1")
    sys.path.insert(0, str(tmp_path))
    try:
        import myfaults  # noqa: F401  (registers proxy_frozen in this process)

        target.up()
        try:
            target.deploy()
            ledger = Ledger(reports / ".gameday" / "ledger.json")
            entry = ledger.record("proxy_frozen", "c", {}, target.name, target.ref())
            target.inject("proxy_frozen", "c", {})
            assert target.fed.components["proxy-c"].paused
            data = json.loads(ledger.path.read_text())
            dead = subprocess.Popen([sys.executable, "-c", "pass"])
            dead.wait()
            data["pending"][0]["runner_pid"] = dead.pid
            ledger.path.write_text(json.dumps(data))
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}

            def restore(*extra: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run([sys.executable, "-m", "gameday.cli", "restore", "--reports", str(reports),
                                       "--keep", *extra], cwd=tmp_path, env=env, capture_output=True, text=True,
                                      timeout=120, check=False)

            r = restore()
            assert r.returncode == 1
            assert "local target: unknown fault 'proxy_frozen'" in r.stdout and "gameday restore -p MODULE" in r.stdout
            r = restore("-p", "myfaults")
            assert r.returncode == 0, r.stdout + r.stderr
            assert f"OK    proxy_frozen c [{entry.id}]: reverted" in r.stdout
            assert not LocalTarget.attach(target.ref()).fed.components["proxy-c"].paused
            assert restore("-p", "no_such_plugin").returncode == 2
        finally:
            LocalTarget.attach(target.ref()).down()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("myfaults", None)
        FAULTS.unregister("proxy_frozen")
        LOCAL_ACTIONS.unregister("proxy_frozen")
