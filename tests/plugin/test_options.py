"""The plugin's surface: options, ini twins, markers, header, errors, the locust plugin."""

from __future__ import annotations

import argparse
import fnmatch
import os
from pathlib import Path

import pytest

from gameday.errors import ConfigError
from gameday.runtime import settings

pytestmark = pytest.mark.usefixtures("no_locust_ini")


@pytest.fixture
def no_locust_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")


def test_help_shows_one_gameday_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines([
        "gameday: failover game days and conformance checks:",
        "*--gameday-target=TARGET*",
        "*--gameday-seed=SEED*",
        "*--gameday-switchover-limit=LIMIT*",
        "*--gameday-allow-context=GLOB*",
        "*--gameday-dry-run*",
    ])
    result.stdout.fnmatch_lines(["*gameday_switchover_limit*"])  # ini twins are listed too


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.gameday(*, rate=None, users=None):*destructive drill*",
                                 "@pytest.mark.conformance(rule, title=''):*"])


def test_header_prints_the_seed_so_a_run_can_be_reproduced(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--gameday-seed=1234")
    result.stdout.fnmatch_lines(["gameday: target=local * seed=1234 (given --gameday-seed=1234)*",
                                 # and what the topology's own timing predicts (DESIGN.md §8)
                                 "gameday: prediction for gateway_down, from topology 'local': detection 3 x 0.2 s "
                                 "checks, *: 0.40-0.60 s; switchover 0.40-0.70 s; dns convergence 0.40-0.60 s; "
                                 "client recovery 0.00-6.60 s"])
    result.assert_outcomes(passed=1)
    random_run = pytester.runpytest()
    random_run.stdout.fnmatch_lines(["gameday: * seed=* (random; reproduce with --gameday-seed=*)*"])


def test_cli_beats_ini_beats_environment(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\ngameday_seed = 11\n")
    pytester.makepyfile("def test_x(gameday_settings): print('SEED', gameday_settings.seed)")
    monkeypatch.setenv("GAMEDAY_SEED", "22")
    pytester.runpytest("-s").stdout.fnmatch_lines(["*SEED 11*"])
    pytester.runpytest("-s", "--gameday-seed=33").stdout.fnmatch_lines(["*SEED 33*"])
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")
    pytester.runpytest("-s").stdout.fnmatch_lines(["*SEED 22*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gameday-target=docker"],
         "--gameday-target (command line): got 'docker', expected one of external, kind, kube, local, or a target "
         "plugged in with the pytest_gameday_target_names and pytest_gameday_make_target hooks (gameday.plugin.hooks)"),
        (["--gameday-target=../x"],
         "--gameday-target (command line): got '../x', expected a target name (letters, digits, '_', '-', '.')"),
        (["--gameday-error-ratio=2"],
         "--gameday-error-ratio (command line): got '2', expected a finite number >= 0 and <= 1"),
        (["--gameday-rounds=0"], "--gameday-rounds (command line): got '0', expected an integer >= 1 and <= 1000"),
        (["--gameday-seed=abc"],
         "--gameday-seed (command line): got 'abc', expected an integer >= 0 and <= 2**63 - 1"),
        (["--gameday-seed="], "--gameday-seed (command line): empty value, expected an integer >= 0 and <= 2**63 - 1; "
                              "leave the option out to use the default"),
        (["--gameday-seed=1.5"], "--gameday-seed (command line): got '1.5', expected an integer >= 0*"),
        (["--gameday-rate=inf"],
         "--gameday-rate (command line): got 'inf', expected a finite number > 0 and <= 100000"),
        (["--gameday-rate=nan"],
         "--gameday-rate (command line): got 'nan', expected a finite number > 0 and <= 100000"),
        (["--gameday-rate=1e9"],
         "--gameday-rate (command line): got '1e9', expected a finite number > 0 and <= 100000"),
        (["--gameday-users=10001"],
         "--gameday-users (command line): got '10001', expected an integer >= 1 and <= 10000"),
        (["--gameday-switchover-limit=0"],
         "--gameday-switchover-limit (command line): got '0', expected a finite number > 0 and <= 3600"),
        (["--gameday-rounds=" + "9" * 5000],
         "--gameday-rounds (command line): got '999*...*999', expected an integer >= 1 and <= 1000"),
        (["--gameday-topology=missing.yaml"],
         "--gameday-topology (command line): got 'missing.yaml', expected an existing topology YAML file: "
         "missing.yaml does not exist"),
        (["--gameday-reports=/dev/null"],
         "--gameday-reports (command line): got '/dev/null', expected a directory gameday can write to (created if "
         "missing): /dev/null is not a directory"),
        (["--gameday-reports=/dev/null/sub"], "--gameday-reports (command line): got '/dev/null/sub', *: "
         "/dev/null/sub cannot be created: /dev/null is not a directory"),
        (["--gameday-allow-context=kind-*,"], "--gameday-allow-context (command line): got 'kind-*,', expected "
         "kubeconfig context globs, comma-separated, without empty ones"),
    ],
)
def test_bad_options_give_one_clear_error_and_touch_nothing(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    result = pytester.runpytest(*args)
    _one_usage_error(pytester, result, message)


def _one_usage_error(pytester: pytest.Pytester, result: pytest.RunResult, message: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.str()
    assert len(errors[0]) < 300, errors[0]
    result.stderr.fnmatch_lines([f"ERROR: gameday: {message.replace('[', '[[]')}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "reports").exists(), "a refused option must create nothing"


def test_a_file_as_reports_directory_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    (pytester.path / "reports").write_text("not a directory")
    result = pytester.runpytest("--gameday-reports=reports")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gameday: --gameday-reports (command line): got 'reports', *: reports is "
                                 "not a directory"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere: no unwritable directory to try")
def test_an_unwritable_reports_directory_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    locked = pytester.path / "locked"
    locked.mkdir(mode=0o500)
    result = pytester.runpytest(f"--gameday-reports={locked}/reports")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gameday: --gameday-reports (command line): *: {locked} is not writable"])


@pytest.mark.parametrize(("ini", "env", "message"), [
    ("gameday_seed =", {}, "--gameday-seed (ini gameday_seed): empty value, expected an integer >= 0*"),
    ("", {"GAMEDAY_RATE": ""}, "--gameday-rate (environment GAMEDAY_RATE): empty value, expected a finite number*"),
    ("", {"GAMEDAY_RATE": "inf"}, "--gameday-rate (environment GAMEDAY_RATE): got 'inf', expected a finite number*"),
    ("gameday_dry_run = maybe", {}, "--gameday-dry-run (ini gameday_dry_run): got 'maybe', expected true or false*"),
    ("gameday_rounds = 0", {}, "--gameday-rounds (ini gameday_rounds): got '0', expected an integer >= 1*"),
])
def test_ini_and_environment_follow_the_same_rules(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ini: str, env: dict[str, str], message: str
) -> None:
    pytester.makeini(f"[pytest]\naddopts = -p no:locust -p no:cacheprovider\n{ini}\n")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    pytester.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    _one_usage_error(pytester, pytester.runpytest(), message)


@pytest.mark.parametrize(("name", "raw", "message"), [
    ("rounds", "0", "got '0', expected an integer >= 1 and <= 1000"),
    ("seed", "", "empty value, expected an integer >= 0 and <= 2**63 - 1*"),
    ("seed", "abc", "got 'abc', expected an integer >= 0 and <= 2**63 - 1"),
    ("topology", ".", "got '.', expected an existing topology YAML file: . is a directory"),
    ("reports", "/dev/null", "got '/dev/null', expected a directory gameday can write to*"),
])
def test_the_cli_validators_are_the_option_validators(name: str, raw: str, message: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # `gameday drill --rounds 0` must be refused exactly like `--gameday-rounds=0`.
    parser = argparse.ArgumentParser(prog="gameday drill")
    parser.add_argument(f"--{name}", type=settings.cli_type(name))
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args([f"--{name}={raw}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert fnmatch.fnmatch(err, f"gameday drill: error: argument --{name}: {message}".replace("[", "[[]")), err


def test_the_cli_validators_return_the_parsed_value() -> None:
    assert settings.cli_type("rounds")("3") == 3
    assert settings.cli_type("seed")(" 7 ") == 7
    assert settings.cli_type("rate")("12.5") == 12.5


def test_dry_run_is_a_string_ini_parsed_by_our_rules(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\ngameday_dry_run = yes\n")
    pytester.makepyfile("def test_x(gameday_settings): assert gameday_settings.dry_run is True")
    pytester.runpytest().assert_outcomes(passed=1)


def test_bad_topology_names_file_and_field_and_starts_nothing(pytester: pytest.Pytester) -> None:
    bad = pytester.path / "bad.yaml"
    bad.write_text("regions:\n  - {name: a, weight: 50}\n  - {name: b, weight: -5, fallback: z}\n")
    pytester.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    result = pytester.runpytest(f"--gameday-topology={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gameday: {bad}: regions?1?.weight: got -5, expected a finite number > 0 "
                                 "and <= 1000"])
    assert not (pytester.path / "reports" / ".gameday" / "federations").exists()


def test_an_ini_value_error_names_the_ini_key(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:locust\ngameday_utilisation_limit = lots\n")
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["*--gameday-utilisation-limit (ini gameday_utilisation_limit): got 'lots', "
                                 "expected a finite number > 0 and <= 1"])


def test_locust_plugin_is_off_and_its_session_fixture_and_h_option_do_not_clash(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        "import pytest\n@pytest.fixture\ndef session():\n    return 'ours'\n"
    )
    pytester.makepyfile("def test_x(session, gameday_settings): assert session == 'ours'")
    pytester.runpytest().assert_outcomes(passed=1)
    # With the locust plugin off, its -H/--host option does not exist.
    result = pytester.runpytest("-H", "http://example.invalid")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_with_the_locust_plugin_loaded_our_options_still_work(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    pytester.makepyfile("def test_x(gameday_settings): assert gameday_settings.seed == 5")
    result = pytester.runpytest("--gameday-seed=5", "-H", "http://example.invalid")
    result.assert_outcomes(passed=1)


def test_an_unwritable_reports_directory_is_refused_by_its_validator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The subprocess test above needs a non-root user; the validator's own logic is checked
    # here with access(2) answering as it does for one (root passes every access check).
    monkeypatch.setattr(settings.os, "access", lambda path, mode: False)
    with pytest.raises(ConfigError, match=rf"got '{tmp_path}/new', .*: {tmp_path} is not writable$"):
        settings.OPTION["reports"].parse(f"{tmp_path}/new", "command line")


def test_ini_paths_are_relative_to_the_ini_file(pytester: pytest.Pytester) -> None:
    """`gameday_topology = drills/topology.yaml` (as `gameday init` writes it) means the same
    file whichever directory pytest runs in."""
    topo = pytester.path / "drills" / "topology.yaml"
    topo.parent.mkdir()
    topo.write_text((Path(settings.__file__).parents[2] / "clusters" / "local.yaml").read_text())
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\ngameday_topology = drills/topology.yaml\n")
    sub = pytester.path / "elsewhere"
    sub.mkdir()
    os.chdir(sub)
    result = pytester.runpytest_subprocess("-c", str(pytester.path / "tox.ini"), "--collect-only")
    result.stdout.fnmatch_lines([f"gameday: target=local topology={topo} *"])


@pytest.mark.parametrize(("marker", "message"), [
    ("users=0", "@pytest.mark.gameday(users=0): expected an integer >= 1 and <= 10000"),
    ("users=2.5", "@pytest.mark.gameday(users=2.5): expected an integer >= 1 and <= 10000"),
    ("users=True", "@pytest.mark.gameday(users=True): expected an integer >= 1 and <= 10000"),
    ("rate=-5", "@pytest.mark.gameday(rate=-5): expected a finite number > 0 and <= 100000"),
    ("rate=float('nan')", "@pytest.mark.gameday(rate=nan): expected a finite number > 0 and <= 100000"),
    ("rate='60'", "@pytest.mark.gameday(rate='60'): expected a finite number > 0 and <= 100000"),
    ("rps=60", "@pytest.mark.gameday: unknown argument(s) ['rps'] (valid: rate, users)"),
])
def test_a_bad_gameday_marker_is_a_usage_error_before_anything_starts(
        pytester: pytest.Pytester, marker: str, message: str) -> None:
    """The marker's load overrides obey the same bounds as ``--gameday-rate``/``--gameday-users``,
    and are checked at collection: no federation is started for a run that cannot go ahead."""
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.gameday({marker})
        def test_drill(drill, load):
            raise AssertionError("never reached")
    """)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert message in result.stderr.str(), result.stderr.str()
    assert not list(pytester.path.glob("reports/runs/*/federation*")), "a federation was started"
