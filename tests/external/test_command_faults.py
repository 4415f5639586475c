"""Command faults with real commands: marker files, timeouts, failing injections and reverts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gameday.errors import ConfigError, FaultError, RestoreIncomplete
from gameday.faults.command import CommandFault, CommandSpec, run_command
from gameday.targets.external import ExternalTarget


def sh(script: str, timeout: float = 5) -> dict[str, Any]:
    """A profile command running *script* with ``sh -c`` as argv (no shell: true needed)."""
    return {"argv": ["sh", "-c", script], "timeout": timeout}


def make_target(tmp_path: Path, faults: dict[str, Any]) -> ExternalTarget:
    """An external target whose region a has *faults*; its commands run in *tmp_path*.

    Nothing here needs the federation to be reachable: only inject and revert are used.
    """
    profile = {
        "name": "markers",
        "service": {"fqdn": "app.example.test", "dns": {"server": "127.0.0.1", "port": 9},
                    "load": {"port": 9}},
        "regions": [{"name": "a", "gateway": "127.0.1.1", "weight": 1, "faults": faults},
                    {"name": "b", "gateway": "127.0.2.1", "weight": 1}],
    }
    f = tmp_path / "profile.yaml"
    f.write_text(yaml.safe_dump(profile))
    return ExternalTarget.from_file(f, tmp_path / "work")


def test_inject_and_revert_run_in_the_profiles_directory_without_a_shell(tmp_path: Path) -> None:
    target = make_target(tmp_path, {"gateway_down": {
        "inject": {"argv": ["touch", "injected with spaces"]},  # no shell: the space is not split
        "revert": sh("rm 'injected with spaces' && echo reverted > reverted")}})
    params: dict[str, Any] = {}
    target.inject("gateway_down", "a", params)
    assert (tmp_path / "injected with spaces").exists()
    assert params["revert"]["argv"][0] == "sh"  # the exact revert is recorded for the ledger
    target.revert("gateway_down", "a", params)
    target.revert("gateway_down", "a", params)  # at most once per injection
    assert (tmp_path / "reverted").read_text() == "reverted\n"
    assert [(r["phase"], r["returncode"]) for r in target.runs] == [("inject", 0), ("revert", 0)]
    log = (tmp_path / "work" / "commands.jsonl").read_text().splitlines()
    assert len(log) == 2 and '"command": "touch \'injected with spaces\'"' in log[0]


def test_shell_true_runs_a_command_line(tmp_path: Path) -> None:
    target = make_target(tmp_path, {"gateway_down": {
        "inject": {"shell": True, "command": "echo $((1 + 2)) > sum | true"},
        "revert": {"shell": True, "command": "rm -f sum"}}})
    target.inject("gateway_down", "a", {})
    assert (tmp_path / "sum").read_text() == "3\n"


def test_a_failed_inject_runs_the_revert_anyway_and_says_both(tmp_path: Path) -> None:
    target = make_target(tmp_path, {"gateway_down": {
        "inject": sh("touch half-done; echo 'nginx: cannot stop' >&2; exit 3"),
        "revert": sh("rm half-done; echo undone")}})
    params: dict[str, Any] = {}
    with pytest.raises(FaultError) as info:
        target.inject("gateway_down", "a", params)
    msg = str(info.value)
    assert "injecting gateway_down a failed" in msg and "exit 3" in msg and "nginx: cannot stop" in msg
    assert "the revert then ran and succeeded" in msg
    assert not (tmp_path / "half-done").exists()
    assert params["reverted"] is True  # `gameday restore` will not run it again
    target.revert("gateway_down", "a", params)
    assert [r["phase"] for r in target.runs] == ["inject", "revert"]


def test_a_failed_inject_whose_revert_fails_too_says_the_federation_may_be_broken(tmp_path: Path) -> None:
    target = make_target(tmp_path, {"gateway_down": {"inject": sh("exit 1"), "revert": sh("echo stuck; exit 2")}})
    params: dict[str, Any] = {}
    with pytest.raises(FaultError, match=r"then failed too: exit 2 .*stdout: stuck; the federation may be left"):
        target.inject("gateway_down", "a", params)
    assert "reverted" not in params  # `gameday restore` must still try


def test_an_inject_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    target = make_target(tmp_path, {"gateway_down": {
        "inject": sh("sleep 30 & echo $! > child; wait", timeout=0.5), "revert": sh("true")}})
    t0 = time.monotonic()
    with pytest.raises(FaultError, match=r"timed out after 0.5 s \(killed\)"):
        target.inject("gateway_down", "a", {})
    assert time.monotonic() - t0 < 5
    child = int((tmp_path / "child").read_text())
    time.sleep(0.2)
    status = Path(f"/proc/{child}/stat")
    assert not status.exists() or status.read_text().split(")")[1].split()[0] == "Z", "the child must be killed too"


def test_a_failed_revert_is_restore_incomplete_with_the_command_and_its_output(tmp_path: Path) -> None:
    target = make_target(tmp_path, {"gateway_down": {
        "inject": sh("true"), "revert": sh("echo 'still listening on :8080' >&2; exit 7")}})
    params: dict[str, Any] = {}
    target.inject("gateway_down", "a", params)
    with pytest.raises(RestoreIncomplete) as info:
        target.revert("gateway_down", "a", params)
    msg = str(info.value)
    assert "reverting gateway_down a failed" in msg and "exit 7" in msg and "still listening on :8080" in msg
    assert "sh -c" in msg
    assert "reverted" not in params


def test_the_recorded_revert_is_run_even_when_the_profile_changed(tmp_path: Path) -> None:
    target = make_target(tmp_path, {"gateway_down": {"inject": sh("true"), "revert": sh("touch recorded")}})
    params: dict[str, Any] = {}
    target.inject("gateway_down", "a", params)
    changed = make_target(tmp_path, {"gateway_down": {"inject": sh("true"), "revert": sh("touch changed")}})
    changed.revert("gateway_down", "a", params)
    assert (tmp_path / "recorded").exists() and not (tmp_path / "changed").exists()


def test_attach_warns_and_uses_the_recorded_profile_when_the_file_changed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    target = make_target(tmp_path, {"gateway_down": {"inject": sh("true"), "revert": sh("touch recorded")}})
    ref = target.ref()
    make_target(tmp_path, {"gateway_down": {"inject": sh("true"), "revert": sh("touch changed")}})
    again = ExternalTarget.attach(ref)
    assert "changed since the injection" in caplog.text
    again.revert("gateway_down", "a", {})
    assert (tmp_path / "recorded").exists()
    (tmp_path / "profile.yaml").unlink()
    assert ExternalTarget.attach(ref).profile.name == "markers"  # gone: the recorded one still reverts


def test_unknown_faults_and_parameters_are_refused_before_anything_runs(tmp_path: Path) -> None:
    target = make_target(tmp_path, {"gateway_down": {"inject": sh("touch ran"), "revert": sh("true")}})
    with pytest.raises(ConfigError, match=r"regions\[a\].faults has no fault 'gateway_hung' \(it has: gateway_down\)"):
        target.inject("gateway_hung", "a", {})
    with pytest.raises(ConfigError, match=r"regions\[b\].faults has no fault 'gateway_down' \(it has: none\)"):
        target.inject("gateway_down", "b", {})
    with pytest.raises(ConfigError, match=r"command faults take no parameters, got \['seconds'\]"):
        target.inject("gateway_down", "a", {"seconds": 3})
    assert not (tmp_path / "ran").exists()


def test_a_program_that_does_not_exist_is_a_clear_failure(tmp_path: Path) -> None:
    run = run_command(CommandSpec(argv=("no-such-program-xyz", "-s", "stop")))
    assert not run.ok and run.error == "cannot run: 'no-such-program-xyz' not found on PATH"
    fault = CommandFault("gateway_down a", CommandSpec(argv=("no-such-program-xyz",)), CommandSpec(argv=("true",)))
    with pytest.raises(FaultError, match="not found on PATH"):
        fault.inject()


def test_specs_survive_the_ledger_round_trip() -> None:
    spec = CommandSpec(command="kill -CONT $(cat gw.pid)", shell=True, timeout=7, env={"A": "1"}, cwd="/tmp")
    assert CommandSpec.from_json(spec.to_json()) == spec
    with pytest.raises(TypeError, match="argv: expected a list of strings"):
        CommandSpec.from_json({"argv": "kill -CONT 1"})


def test_a_fault_of_the_profiles_own_is_offered_to_drills(tmp_path: Path) -> None:
    target = make_target(tmp_path, {
        "nginx_reload": {"inject": sh("touch reloaded"), "revert": sh("true")},
        "drain": {"inject": sh("true"), "revert": sh("true"), "takes_region_out": True}})
    faults = target.faults()
    assert faults["nginx_reload"].needs_region and not faults["nginx_reload"].takes_region_out
    assert faults["drain"].takes_region_out  # switchover is measured for it
    target.inject("nginx_reload", "a", {})
    assert (tmp_path / "reloaded").exists()
