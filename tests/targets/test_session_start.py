"""kind/kube refusals at session start: one ``UsageError`` line before collection, nothing created.

Real, not simulated: this machine has a docker client but no docker daemon and no kind,
so ``--gameday-target=kind`` meets exactly what a new user without them meets; an
unreachable API server is a kubeconfig whose server is a loopback port nobody listens
on, reached by the real ``kubernetes`` client. Each run is a fresh pytest process
(``runpytest_subprocess``) whose only test would leave a file behind if it ran.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
import yaml

from gameday.model.topology import load_topology
from gameday.targets.k8s import files as k8s_files

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"
PROBE = """
def test_probe(tmp_path_factory):
    open(r"{marker}", "w").write("collected and ran")
"""


def _project(pytester: pytest.Pytester) -> Path:
    pytester.makefile(".ini", pytest=INI)
    marker = pytester.path / "ran.txt"
    pytester.makepyfile(test_probe=PROBE.format(marker=marker))
    return marker


def _refused(result: pytest.RunResult, marker: Path, reports: Path) -> str:
    """The one error line; asserts nothing was collected, run or created."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, f"expected one line, got {errors}"
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "collected" not in result.stdout.str()
    assert not marker.exists(), "the test ran: the refusal came after collection"
    assert not (reports / ".gameday" / "federations").exists(), "a federation work directory was created"
    return errors[0]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when the with-block ends: nobody listens there


def _kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig with every context of the reference kind topology, all on *server*."""
    contexts = sorted(set((load_topology(k8s_files.KIND_TOPOLOGY).contexts or {}).values()))
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": contexts[0],
        "clusters": [{"name": c, "cluster": {"server": server, "insecure-skip-tls-verify": True}} for c in contexts],
        "users": [{"name": "u", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": c, "context": {"cluster": c, "user": "u"}} for c in contexts],
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.skipif(shutil.which("kind") is not None, reason="kind is installed here; this checks its absence")
def test_kind_without_kind_or_a_docker_daemon_is_one_line_before_collection(pytester: pytest.Pytester) -> None:
    marker = _project(pytester)
    reports = pytester.path / "reports"
    result = pytester.runpytest_subprocess("--gameday-target=kind", f"--gameday-reports={reports}")
    line = _refused(result, marker, reports)
    assert line.startswith("ERROR: gameday: --gameday-target=kind: the kind target needs kind and a running "
                           "container engine; not found: kind v"), line
    assert "Or use --gameday-target=local" in line
    if shutil.which("docker") is None:
        assert "docker, a container engine kind runs its nodes in" in line
    else:  # the docker client is here, its daemon is not: said as such
        assert "docker is installed but its daemon is not reachable (`docker info`: " in line


def test_kind_dry_run_needs_no_tools_and_collects(pytester: pytest.Pytester) -> None:
    """The control: the same run as a dry run passes session start (it plans and prints only)."""
    marker = _project(pytester)
    result = pytester.runpytest_subprocess("--gameday-target=kind", "--gameday-dry-run",
                                           f"--gameday-reports={pytester.path / 'reports'}")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert marker.exists()


def test_kube_with_an_unreachable_api_server_is_one_line_before_collection(pytester: pytest.Pytester,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    marker = _project(pytester)
    port = _closed_port()
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(pytester.path / "kubeconfig", f"https://127.0.0.1:{port}")))
    reports = pytester.path / "reports"
    result = pytester.runpytest_subprocess("--gameday-target=kube", f"--gameday-topology={k8s_files.KIND_TOPOLOGY}",
                                           "--gameday-allow-context=kind-gd-*", f"--gameday-reports={reports}")
    line = _refused(result, marker, reports)
    assert line.startswith("ERROR: gameday: --gameday-target=kube: kube context 'kind-gd-global' (cluster "
                           f"'global'): its API server https://127.0.0.1:{port} is unreachable ("), line
    assert "refused" in line.lower(), line
    assert "kubectl --context kind-gd-global version" in line


def test_kube_with_a_context_missing_from_the_kubeconfig_is_one_line(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    marker = _project(pytester)
    cfg = pytester.path / "kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(cfg))
    cfg.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [],
                                   "contexts": [{"name": "other", "context": {"cluster": "x", "user": "y"}}],
                                   "current-context": "other"}))
    reports = pytester.path / "reports"
    result = pytester.runpytest_subprocess("--gameday-target=kube", f"--gameday-topology={k8s_files.KIND_TOPOLOGY}",
                                           "--gameday-allow-context=kind-gd-*", f"--gameday-reports={reports}")
    line = _refused(result, marker, reports)
    assert "kubeconfig context 'kind-gd-global'" in line and "kubectl config get-contexts" in line, line


def test_kube_context_outside_the_allow_list_is_one_line_before_collection(pytester: pytest.Pytester,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    marker = _project(pytester)
    # a reachable-or-not server does not matter: the allow-list is checked first, no call is made
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(pytester.path / "kubeconfig", "https://127.0.0.1:1")))
    reports = pytester.path / "reports"
    result = pytester.runpytest_subprocess("--gameday-target=kube", f"--gameday-topology={k8s_files.KIND_TOPOLOGY}",
                                           "--gameday-allow-context=staging-*", f"--gameday-reports={reports}")
    line = _refused(result, marker, reports)
    assert line.startswith("ERROR: gameday: --gameday-target=kube: kube context 'kind-gd-global' (cluster 'global') "
                           "is not allow-listed (allowed: 'staging-*')"), line
    assert "pass --gameday-allow-context=kind-gd-global" in line and "Nothing was changed." in line


def test_kube_dry_run_makes_no_api_call_at_session_start(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: an unreachable server does not stop a dry run (it makes no API call)."""
    marker = _project(pytester)
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(pytester.path / "kubeconfig",
                                                     f"https://127.0.0.1:{_closed_port()}")))
    result = pytester.runpytest_subprocess("--gameday-target=kube", f"--gameday-topology={k8s_files.KIND_TOPOLOGY}",
                                           "--gameday-allow-context=kind-gd-*", "--gameday-dry-run",
                                           f"--gameday-reports={pytester.path / 'reports'}")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert marker.exists()


@pytest.mark.skipif(shutil.which("kind") is not None, reason="kind is installed here; this checks its absence")
def test_kind_with_a_profile_without_kind_is_one_line_before_collection(pytester: pytest.Pytester) -> None:
    from tests.targets.test_profile_kube import PROFILE

    marker = _project(pytester)
    data = yaml.safe_load(PROFILE)
    data["kubernetes"]["contexts"] = {"a": "kind-shop-a", "b": "kind-shop-b", "global": "kind-shop-g"}
    profile = pytester.path / "shop.yaml"
    profile.write_text(yaml.safe_dump(data))
    reports = pytester.path / "reports"
    result = pytester.runpytest_subprocess("--gameday-target=kind", f"--gameday-profile={profile}",
                                           f"--gameday-reports={reports}")
    line = _refused(result, marker, reports)
    assert "the kind target needs kind and a running container engine; not found: kind v" in line, line
