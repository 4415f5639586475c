"""``--gameday-target=external`` and ``--gameday-profile``: usage errors, the header, reachability."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from gameday.errors import TargetUnreachable
from gameday.observers.reference import reference_endpoints_of
from gameday.targets.external import ExternalTarget
from tests.external.test_profile import GOOD


def _usage_error(result: pytest.RunResult, pytester: pytest.Pytester, message: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.str()
    result.stderr.fnmatch_lines([f"ERROR: gameday: {message.replace('[', '[[]')}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "reports").exists(), "a refused option must create nothing"


@pytest.mark.parametrize(("args", "message"), [
    (["--gameday-target=external"], "--gameday-target=external needs a federation profile: --gameday-profile FILE "
     "(ini gameday_profile, env GAMEDAY_PROFILE)*"),
    (["--gameday-target=external", "--gameday-profile=missing.yaml"], "--gameday-profile (command line): got "
     "'missing.yaml', expected an existing federation profile YAML file: missing.yaml does not exist"),
    (["--gameday-target=external", "--gameday-profile=good.yaml", "--gameday-topology=good.yaml"],
     "--gameday-target=external takes its regions from --gameday-profile; leave --gameday-topology out"),
    (["--gameday-target=external", "--gameday-profile=good.yaml", "-n", "2"],
     "--gameday-target=external drills the one federation its profile describes; -n 2 would run drills in several "
     "pytest-xdist workers against it at once: run without -n"),
    (["--gameday-target=external", "--gameday-profile=bad.yaml"],
     "bad.yaml: regions[0].weight: got 0, expected a finite number > 0 and <= 1000"),
])
def test_external_usage_errors(pytester_ini: pytest.Pytester, args: list[str], message: str) -> None:
    (pytester_ini.path / "good.yaml").write_text(yaml.safe_dump(GOOD))
    bad = {**GOOD, "regions": [{**GOOD["regions"][0], "weight": 0}, GOOD["regions"][1]]}
    (pytester_ini.path / "bad.yaml").write_text(yaml.safe_dump(bad))
    pytester_ini.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    _usage_error(pytester_ini.runpytest(*args), pytester_ini, message)


def test_the_profile_comes_from_the_environment_too_and_the_header_names_it(
        pytester_ini: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    (pytester_ini.path / "good.yaml").write_text(yaml.safe_dump(GOOD))
    monkeypatch.setenv("GAMEDAY_PROFILE", "good.yaml")
    pytester_ini.makepyfile("""
        def test_x(topology, gameday_settings):
            assert [r.name for r in topology.regions] == ["a", "b"]
            assert gameday_settings.profile.name == "good.yaml"
    """)
    result = pytester_ini.runpytest("--gameday-target=external", "--gameday-seed=1")
    result.stdout.fnmatch_lines(["gameday: target=external profile=good.yaml seed=1 *",
                                 "gameday: prediction for gateway_down, from profile good.yaml (TTL checked against "
                                 "the DNS server's answers before each drill): *"])
    result.assert_outcomes(passed=1)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_up_names_everything_that_is_unreachable_before_any_fault(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from gameday.targets import external

    monkeypatch.setattr(external, "UP_TIMEOUT", 0.5)  # it retries for 10 s: a blip is not an outage
    port = _closed_port()
    data = {**GOOD, "service": {**GOOD["service"], "dns": {"server": "127.0.0.1", "port": port},
                                "load": {"port": port}}}
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(data))
    target = ExternalTarget.from_file(f)
    with pytest.raises(TargetUnreachable) as info:
        target.up()
    msg = str(info.value)
    assert f"DNS server 127.0.0.1:{port} does not answer app.example.test." in msg
    assert f"gateway of region a (127.0.1.1:{port}) is unreachable" in msg
    assert f"gateway of region b (127.0.2.1:{port}) is unreachable" in msg
    assert msg.endswith("nothing was injected")
    assert target.runs == [], "no command ran"


def test_the_external_target_has_only_the_capabilities_a_profile_gives(tmp_path: Path) -> None:
    from gameday.interfaces import FaultPlanner, HasAlarmLines, HasFaults, Liveness, Reconcilable, Releasable

    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(GOOD))
    target = ExternalTarget.from_file(f)
    # a suite test needing one of these skips with its reason on this target
    for capability in (Reconcilable, Releasable, HasAlarmLines, Liveness):
        assert not isinstance(target, capability), capability
    assert isinstance(target, FaultPlanner) and isinstance(target, HasFaults)
    gateway_down = target.faults()["gateway_down"]
    assert gateway_down.takes_region_out and gateway_down.params == ()  # a command takes no parameters
    assert [r.capacity for r in target.regions()] == [100, None]  # unknown stays unknown
    ep = target.endpoints()
    assert ep.client.host_header == "app.example.test" and ep.client.path == "/"
    # the reference app's URLs are not a profile's: the conformance view of it has none
    assert reference_endpoints_of(target) is None
    assert {n.name: n.region for n in target.sources().entry_nodes}["gateway-a"] == "a"


def test_preflight_neither_refuses_nor_passes_on_an_unknown_capacity() -> None:
    from gameday.interfaces import RegionInfo
    from gameday.model.preflight import check_capacity

    regions = [RegionInfo("a", 1, 100, "127.0.1.1"), RegionInfo("b", 1, None, "127.0.2.1"),
               RegionInfo("c", 1, 20, "127.0.3.1")]
    said = check_capacity(regions, ["a"], offered=60, margin=0.2)
    assert said == ("capacity with a out: not checked, capacity of b unknown (b, c would have unknown + 20 = 20+ "
                    "req/s for 60 req/s x (1 + 0.2) = 72 req/s); the headroom verdict is not applicable")
    # what is known suffices: that is a pass, whatever the unknown region has
    assert check_capacity(regions, ["b"], offered=60, margin=0.2).startswith("capacity with b out: a, c would have")
