"""The run's admin token never leaves the federation: after a real drill whose fault is
injected and reverted through admin calls, no file the run wrote (reports, the ledger,
state files, component and harness logs, Allure results, JUnit XML) and none of its output
holds the token.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

# Records each token the run issues, outside the run's directories, through the real
# generator (the drill runs in a subprocess: this is the only way the test can know it).
RECORD_TOKENS = """
import gameday.targets.admin_token as admin_token

_issue = admin_token.new_admin_token


def _recorded() -> str:
    token = _issue()
    with open({path!r}, "a", encoding="utf-8") as out:
        out.write(token + "\\n")
    return token


admin_token.new_admin_token = _recorded
"""


def test_a_drill_leaves_the_admin_token_in_no_report_log_or_output(pytester: pytest.Pytester,
                                                                   tmp_path: Path) -> None:
    tokens_file = tmp_path / "tokens.txt"
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")
    pytester.makeconftest(RECORD_TOKENS.format(path=str(tokens_file)))
    pytester.makepyfile(test_drill="""
        import pytest

        @pytest.mark.gameday
        def test_unready_gateway(drill, load):
            with drill.fault("gateway_unready", "b") as fault:  # inject and revert are admin calls
                result = drill.observe_switchover(fault)
            result.assert_switchover_under(10)
    """)
    result = pytester.runpytest_subprocess("--gameday-seed=5", "--gameday-recovery-window=3",
                                           "--junitxml=junit.xml", "--alluredir=allure-results", timeout=240)
    result.assert_outcomes(passed=1)
    tokens = tokens_file.read_text(encoding="utf-8").split()
    assert len(tokens) == 1 and len(tokens[0]) == 43, tokens

    files = [p for p in pytester.path.rglob("*") if p.is_file()]
    logs = [p for p in files if p.suffix == ".log"]
    [gateway_b] = [p for p in logs if p.name == "gateway-b.log"]  # the federation's logs are in the scan
    faults = gateway_b.read_text(encoding="utf-8").count('"event":"fault"')
    assert faults == 2, f"expected the inject and the revert as signed admin calls, saw {faults}"
    assert (pytester.path / "allure-results").is_dir() and (pytester.path / "reports" / "runs").is_dir()
    output = "\n".join(result.outlines + result.errlines)
    for token in tokens:
        assert token not in output
        leaked = [p for p in files if token.encode() in p.read_bytes()]
        assert leaked == [], f"the admin token is in {leaked}"
    assert not list(pytester.path.rglob("admin-token")), "a token file outlived its federation"
