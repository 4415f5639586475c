"""The headline drill, unchanged, as a kube dry run against a profile: the plan it prints.

The federation observed is real (the reference app on loopback, described by a profile as
its team would describe it, plus a ``kubernetes:`` section naming its faults as Kubernetes
operations); the Kubernetes side is a dry run, so no API call is made: the kubeconfig points
at a closed loopback port, and any call would fail the run. What must come out: the drill's
checks passed against the live federation, the fault's operation and its exact inverse, and
nothing recorded in the ledger.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gameday.model.topology import load_topology
from gameday.targets.local.federation import LocalFederation
from tests.external.conftest import reference_profile, write_profile

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def reference_federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFederation]:
    fed = LocalFederation.from_topology(load_topology(), tmp_path_factory.mktemp("reference"))
    fed.start()
    try:
        fed.wait_ready(30)
        yield fed
    finally:
        fed.stop()


COUNT_PARSES = """
from pathlib import Path
import gameday.targets.profile as profile

calls = []
real = profile.parse_profile

def counting(*args, **kwargs):
    calls.append(args[1] if len(args) > 1 else "")
    return real(*args, **kwargs)

profile.parse_profile = counting

def pytest_unconfigure(config):
    Path("parses").write_text(str(len(calls)))
"""
"""Counts the profile's validations (every load goes through ``parse_profile``)."""


@pytest.mark.slow
def test_the_headline_drill_as_a_kube_dry_run_prints_the_operation_and_its_inverse(
        reference_federation: LocalFederation, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    data = reference_profile(reference_federation)
    regions = [r["name"] for r in data["regions"]]
    data["kubernetes"] = {
        "contexts": {r: f"staging-{r}" for r in regions},
        "regions": {r: {"gateway_down": {"scale_to_zero": {"namespace": "edge", "name": f"gateway-{r}"}}}
                    for r in regions},
    }
    for r in data["regions"]:
        r["faults"] = {}  # the command faults are the external target's; kube uses the kubernetes section
    profile = write_profile(pytester.path / "team.yaml", data)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "staging-a",
           "clusters": [{"name": "x", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
           "users": [{"name": "u", "user": {"token": "t"}}],
           "contexts": [{"name": f"staging-{r}", "context": {"cluster": "x", "user": "u"}} for r in regions]}
    (pytester.path / "kubeconfig").write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv("KUBECONFIG", str(pytester.path / "kubeconfig"))
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")
    pytester.makeconftest(COUNT_PARSES)
    shutil.copy(REPO / "suites" / "gameday" / "test_gateway_outage.py", pytester.path)
    reports = pytester.path / "reports"
    result = pytester.runpytest_subprocess("test_gateway_outage.py", "--gameday-target=kube",
                                           f"--gameday-profile={profile}", "--gameday-allow-context=staging-*",
                                           "--gameday-dry-run", "--gameday-seed=7", f"--gameday-reports={reports}",
                                           "-rs")
    out = result.stdout.str()
    assert result.ret == 0, out + result.stderr.str()
    result.assert_outcomes(skipped=1)
    assert "passed: the federation is healthy" in out
    (inject,) = [line for line in result.stdout.lines if "3. inject gateway_down" in line]
    region = inject.split("3. inject gateway_down ", 1)[1].split(":", 1)[0]
    assert inject.endswith(f"scale Deployment edge/gateway-{region} to 0 [{region}] (context staging-{region})")
    (revert,) = [line for line in result.stdout.lines if "5. revert (the exact inverse)" in line]
    assert (f"scale Deployment edge/gateway-{region} to the replica count read at injection [{region}] "
            f"(context staging-{region})") in revert
    ledger = reports / ".gameday" / "ledger.json"
    assert not ledger.exists() or "gateway_down" not in ledger.read_text()
    # The session, the header's prediction, the kube target and the external target inside it
    # each load the profile: its text is validated once, into one object they share.
    assert (pytester.path / "parses").read_text() == "1"
