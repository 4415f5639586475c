"""The conformance suite on a federation gameday did not build (nginx + PowerDNS, described
by a profile): every rule is judged where its input exists, and skips saying what is missing
where it does not. None may error, and none may pass on inputs the target does not have.

This federation is a fair stand-in for a team's own: it has no control plane, no entry-node
status and no app instances gameday can read, and its GSLB (PowerDNS ``ifportup``) answers
with every healthy gateway at once rather than one region by weight. So R8 must *fail*
(a real finding about this federation), R9's arithmetic must pass on the profile's declared
capacities, and R11's manifest checks must run once the profile names manifests.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from gameday.runtime.resources import clusters_dir, suites_dir
from tests.foreign.conftest import FOREIGN_GROUP
from tests.foreign.federation import ForeignFederation

pytestmark = [pytest.mark.slow, FOREIGN_GROUP]

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"
#: What a missing input is reported as, in a skip's reason: the target lacks an endpoint, a
#: fault, a capability or manifests (or, for R14, the topology is too small for the rule).
MISSING = ("target external exposes no ", "target external cannot ", "target external names no ",
           "topology has 3 regions")


def _outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """Test name -> (passed | failed | error | skipped, message)."""
    out: dict[str, tuple[str, str]] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        name = case.get("name") or ""
        kind, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                kind, message = ("failed" if child.tag == "failure" else child.tag), child.get("message") or ""
        out[name] = (kind, message)
    return out


def _run(pytester: pytest.Pytester, profile: Path, tag: str, *args: str) -> dict[str, tuple[str, str]]:
    junit = pytester.path / f"junit-{tag}.xml"
    pytester.runpytest_subprocess("conformance", "--gameday-target=external", f"--gameday-profile={profile}",
                                  "--gameday-seed=3", f"--junitxml={junit}", *args, timeout=300)
    return _outcomes(junit)


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project holding the shipped conformance suite, as a team would copy or select it."""
    pytester.makeini(INI)
    shutil.copytree(suites_dir() / "conformance", pytester.path / "conformance",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return pytester


def test_conformance_on_a_foreign_federation_judges_what_it_can_and_says_what_is_missing(
        foreign: ForeignFederation, suite: pytest.Pytester, tmp_path: Path) -> None:
    profile = foreign.write_profile(tmp_path / "foreign.yaml", capacity_rps=500.0)
    results = _run(suite, profile, "plain")
    assert len(results) >= 20, results
    errors = {n: m for n, (k, m) in results.items() if k == "error"}
    assert not errors, f"no check may error on a target without its inputs: {json.dumps(errors, indent=1)}"

    # R8 is judged on the foreign GSLB's own answers, and fails: it answers every gateway at once.
    r8 = {n: v for n, v in results.items() if n.startswith("test_r8_")}
    assert len(r8) == 2 and all(k == "failed" for k, _ in r8.values()), r8
    for _, message in r8.values():
        assert "one A record" in message, message
    # R9's arithmetic runs on the profile's declared capacities.
    assert results["test_r9_static_n_minus_1_capacity"][0] == "passed", results["test_r9_static_n_minus_1_capacity"]

    # Everything else: skipped, saying what this target lacks. Nothing passes on absent input.
    rest = {n: v for n, v in results.items() if n not in r8 and n != "test_r9_static_n_minus_1_capacity"}
    unexplained = {n: v for n, v in rest.items() if v[0] != "skipped" or not any(s in v[1] for s in MISSING)}
    assert not unexplained, json.dumps(unexplained, indent=1)
    reasons = " | ".join(m for _, m in rest.values())
    for needed in ("control-plane /status URL", "no fault 'control_plane_down'", "cannot reconcile",
                   "names no Kubernetes manifests", "no app instances for region"):
        assert needed in reasons, f"no skip says {needed!r}: {reasons}"
    # The R8 drill's gateway_down was reverted: nothing is pending, every gateway serves.
    ledger = suite.path / "reports" / ".gameday" / "ledger.json"
    pending: list[dict[str, Any]] = json.loads(ledger.read_text()).get("pending", []) if ledger.exists() else []
    assert pending == []
    foreign.wait_steady(10)


def test_a_profile_naming_manifests_gets_r11s_offline_checks(
        foreign: ForeignFederation, suite: pytest.Pytester, tmp_path: Path) -> None:
    """The seam: a profile's ``manifests`` directory is what R11 judges. Given the reference
    app's manifests it passes; given a copy with a probe threshold broken it fails on it."""
    pytest.importorskip("kubernetes_validate", reason="R11's strict check needs gameday[kube]")
    good, bad = tmp_path / "good", tmp_path / "bad"
    shutil.copytree(clusters_dir() / "manifests", good)
    shutil.copytree(clusters_dir() / "manifests", bad)
    target = bad / "a.yaml"
    docs = list(yaml.safe_load_all(target.read_text()))
    changed = 0
    for doc in docs:
        for c in ((doc or {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])):
            if "readinessProbe" in c:
                c["readinessProbe"]["failureThreshold"] = 1
                changed += 1
    assert changed, "the reference manifests of region a have no readiness probe to break"
    target.write_text(yaml.safe_dump_all(docs, sort_keys=False))

    for tag, where, expect in (("good", good, "passed"), ("bad", bad, "failed")):
        text = foreign.profile(capacity_rps=500.0)
        text["manifests"] = str(where)
        profile = tmp_path / f"{tag}.yaml"
        profile.write_text(yaml.safe_dump(text, sort_keys=False))
        results = _run(suite, profile, tag, "-k", "r11_manifests or r11_workload")
        r11 = {n: v for n, v in results.items() if n in ("test_r11_manifests_validate_strictly",
                                                          "test_r11_workload_hygiene")}
        assert len(r11) == 2, results
        assert r11["test_r11_manifests_validate_strictly"][0] == "passed", r11
        assert r11["test_r11_workload_hygiene"][0] == expect, r11
        if expect == "failed":
            assert "failureThreshold" in r11["test_r11_workload_hygiene"][1], r11
