"""The headline game day against the foreign federation, through the ``external`` target.

``suites/gameday/test_gateway_outage.py`` runs unchanged, as a user would run it, with
``--gameday-target external --gameday-profile <the foreign federation's profile>``:

- it passes; its DNS convergence agrees, within the figure's resolution, with PowerDNS's
  configured check timing (a refused gateway is left out at the next check round: 0 to one
  ``lua-health-checks-interval`` after the fault);
- the verdicts that have no input (route versions: nginx has none, no control plane; no
  alarm source) are "not applicable" with their reasons, never a pass;
- ``kill -9`` of the runner after the injection, then ``gameday restore``, runs the
  profile's revert command and leaves the federation as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from tests.foreign.conftest import FOREIGN_GROUP
from tests.foreign.federation import ForeignFederation
from tests.foreign.processes import kill_tree, wait_until

pytestmark = [pytest.mark.slow, FOREIGN_GROUP]

HEADLINE = Path(__file__).parents[2] / "suites" / "gameday" / "test_gateway_outage.py"
INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"
#: No capacities: nothing here reports utilisation, and a capacity without a utilisation
#: source makes the dynamic headroom check fail ("no utilisation observed") rather than n/a.
CAPACITY_RPS = None
SEED = 5


def _args(profile: Path) -> list[str]:
    return ["--gameday-target=external", f"--gameday-profile={profile}", f"--gameday-seed={SEED}"]


def _figures(path: Path) -> dict[str, Any]:
    (figures,) = (path / "reports" / "runs").glob("*/drills/*/figures-0.json")
    data: dict[str, Any] = json.loads(figures.read_text())
    return data


def _pending(reports: Path) -> list[dict[str, Any]]:
    ledger = reports / ".gameday" / "ledger.json"
    if not ledger.exists():
        return []
    pending: list[dict[str, Any]] = json.loads(ledger.read_text()).get("pending", [])
    return pending


def _session_members(sid: int) -> list[int]:
    """Live processes of session *sid* (the runner's load generators, if any outlived it)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@pytest.fixture
def headline(pytester: pytest.Pytester) -> Path:
    """A pytest project holding the headline drill, byte for byte."""
    pytester.makeini(INI)
    shutil.copyfile(HEADLINE, pytester.path / HEADLINE.name)
    return pytester.path


def test_the_headline_drill_passes_and_dns_convergence_matches_powerdns(
        foreign: ForeignFederation, pytester: pytest.Pytester, headline: Path, tmp_path: Path,
        record_property: pytest.RecordProperty) -> None:
    profile = foreign.write_profile(tmp_path / "foreign.yaml", capacity_rps=CAPACITY_RPS)
    result = pytester.runpytest_subprocess(*_args(profile), "--junitxml=junit.xml", timeout=300)
    figures = _figures(headline)
    print(json.dumps(figures, indent=2))
    result.assert_outcomes(passed=1)

    dns = figures["dns_convergence"]
    value, resolution = dns["value_s"], dns["resolution_s"]
    t = foreign.timing
    low, high = 0.0, t.detection_bound_s
    record_property("foreign_drill_dns_convergence_s", value)
    record_property("foreign_drill_dns_resolution_s", resolution)
    print(f"DNS convergence {value:.3f} s +/- {resolution:.3f} s; PowerDNS: check every {t.interval_s} s, "
          f"{t.failures_to_down} failure to leave out => expected {low:.1f}..{high:.1f} s")
    assert low - resolution <= value <= high + resolution, (
        f"DNS convergence {value:.3f} s +/- {resolution:.3f} s disagrees with PowerDNS's configured checks "
        f"({t.interval_s} s interval, {t.failures_to_down} failure): expected {low:.1f}..{high:.1f} s")

    # Switchover from DNS answers, and it says so.
    assert figures["switchover"]["definition"] == "dns answers", figures["switchover"]
    # No input, no verdict: not applicable with the reason, in the figures, the verdict
    # table and JUnit; never a pass.
    assert figures["not_applicable"] == {
        "versions": "no control-plane version source",
        "stale_alarms": "no alarm source",
        "headroom": "no declared capacities",
    }, figures["not_applicable"]
    assert figures["versions"]["passed"] is None
    result.stdout.fnmatch_lines(["*gameday drill verdicts*",
                                 "test_random_gateway_outage*gateway_down*(dns answers)*"
                                 "n/a: no control-plane version source*n/a: no alarm source*"])
    (drill_property,) = [p.get("value") for p in ElementTree.parse(headline / "junit.xml").iter("property")
                         if p.get("name") == "gameday_drill"]
    junit_verdicts = {v["name"]: (v["outcome"], v["detail"]) for v in json.loads(drill_property)["verdicts"]}
    assert junit_verdicts["versions"] == ("n/a", "no control-plane version source"), junit_verdicts
    assert junit_verdicts["stale_alarms"] == ("n/a", "no alarm source"), junit_verdicts
    assert junit_verdicts["dns_convergence"][0] == "pass", junit_verdicts
    assert _pending(headline / "reports") == []
    foreign.wait_steady(10)  # the revert put the region back


def test_kill_9_mid_drill_then_gameday_restore_leaves_the_federation_as_it_was(
        foreign: ForeignFederation, pytester: pytest.Pytester, headline: Path, tmp_path: Path) -> None:
    profile = foreign.write_profile(tmp_path / "foreign.yaml", capacity_rps=CAPACITY_RPS)
    reports = headline / "reports"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *_args(profile)], cwd=headline,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # The ledger entry is written before the injection; the gateway's master gone means
        # the injection has taken effect. Then the runner dies without a chance to revert.
        assert wait_until(lambda: bool(_pending(reports)) or proc.poll() is not None, 120, interval=0.02), \
            "no ledger entry within 120 s"
        assert proc.poll() is None, f"the runner exited ({proc.returncode}) before it was killed"
        (entry,) = _pending(reports)
        region = foreign.region(entry["region"])
        assert wait_until(lambda: region.gateway.master_pid() is None, 15, interval=0.02), \
            f"{region.gateway.name} still runs 15 s after the ledger entry"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert region.gateway.master_pid() is None, "the fault did not outlive its runner"
        assert wait_until(lambda: region.gateway_host not in (foreign.dns_answer() or ()), 5), \
            "DNS still answers the stopped gateway"

        restored = subprocess.run([sys.executable, "-m", "gameday.cli", "restore"], cwd=headline,
                                  capture_output=True, text=True, timeout=120, check=False)
        assert restored.returncode == 0, restored.stdout + restored.stderr
        assert f"OK    gateway_down {region.name} [{entry['id']}]: reverted" in restored.stdout, restored.stdout
        assert "1 reverted, 0 cleared, 0 failed" in restored.stdout, restored.stdout
        assert _pending(reports) == [], restored.stdout
        # As it was: every gateway serves its region and DNS answers all three again.
        foreign.wait_steady(10)
        assert foreign.dns_answer() == tuple(sorted(foreign.gateway_hosts()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in _session_members(proc.pid):  # a load generator left by the killed runner
            kill_tree(pid)
