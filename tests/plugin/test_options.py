"""The plugin's surface: options, ini twins, markers, header, errors, the locust plugin."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("no_locust_ini")


@pytest.fixture
def no_locust_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")


def test_help_shows_one_gameday_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines([
        "gameday: failover game days and conformance checks:",
        "*--gameday-target={local,kind,kube}*",
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
    result.stdout.fnmatch_lines(["gameday: target=local * seed=1234 (given --gameday-seed=1234)*"])
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
         "*--gameday-target (command line): got 'docker', expected one of local, kind, kube*"),
        (["--gameday-error-ratio=2"], "*--gameday-error-ratio (command line): got '2', must be between 0 and 1*"),
        (["--gameday-rounds=0"], "*--gameday-rounds (command line): got '0', must be >= 1*"),
        (["--gameday-seed=abc"], "*--gameday-seed (command line): got 'abc'*"),
        (["--gameday-topology=missing.yaml"], "*--gameday-topology: missing.yaml does not exist*"),
    ],
)
def test_bad_options_give_one_clear_error_and_inject_nothing(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gameday: {message.lstrip('*')}"])
    assert not (pytester.path / "reports" / ".gameday" / "ledger.json").exists()
    assert not (pytester.path / "reports" / ".gameday" / "federations").exists()


def test_bad_topology_names_file_and_field_and_starts_nothing(pytester: pytest.Pytester) -> None:
    bad = pytester.path / "bad.yaml"
    bad.write_text("regions:\n  - {name: a, weight: 50}\n  - {name: b, weight: -5, fallback: z}\n")
    pytester.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    result = pytester.runpytest(f"--gameday-topology={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gameday: {bad}: regions?1?.weight: got -5, expected greater than 0*"])
    assert not (pytester.path / "reports" / ".gameday" / "federations").exists()


def test_an_ini_value_error_names_the_ini_key(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:locust\ngameday_utilisation_limit = lots\n")
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["*--gameday-utilisation-limit (ini gameday_utilisation_limit): got 'lots'*"])


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
