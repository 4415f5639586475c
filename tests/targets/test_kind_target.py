"""KindTarget offline: the kind/docker command lines, the missing-tool errors, a dry run,
and how make_target builds the kind and kube targets (errors before anything runs)."""

from __future__ import annotations

import dataclasses
import io
import json
import stat
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from gameday.errors import TargetError
from gameday.interfaces import Target
from gameday.model.topology import Topology, load_topology
from gameday.plugin.session import SessionState, make_target
from gameday.runtime.settings import Settings
from gameday.targets.k8s import files as k8s_files
from gameday.targets.k8s import kind
from gameday.targets.k8s import objects as o
from gameday.targets.k8s.kind import CommandRunner, KindTarget
from gameday.targets.k8s.kube import KubeTarget


def test_create_argv(tmp_path: Path) -> None:
    assert kind.create_argv("a", tmp_path) == [
        "kind",
        "create",
        "cluster",
        "--name",
        "gd-a",
        "--config",
        str(tmp_path / "a.yaml"),
        "--wait",
        "180s",
    ]


def test_load_delete_and_get_argv() -> None:
    assert kind.load_image_argv(o.APP_IMAGE, "global") == [
        "kind",
        "load",
        "docker-image",
        o.APP_IMAGE,
        "--name",
        "gd-global",
    ]
    assert kind.delete_argv("b") == ["kind", "delete", "cluster", "--name", "gd-b"]
    assert kind.get_clusters_argv() == ["kind", "get", "clusters"]


def test_up_creates_only_missing_clusters_and_down_deletes_only_created(topology: Topology, tmp_path: Path) -> None:
    argvs = kind.plan_up(topology, existing=["gd-a", "someone-else"], kind_dir=tmp_path)
    assert [a[4] for a in argvs] == ["gd-global", "gd-b", "gd-c"]
    assert kind.plan_down(["global", "b"]) == [kind.delete_argv("b"), kind.delete_argv("global")]
    assert [a[3] for a in kind.plan_load(topology)] == [o.APP_IMAGE] * 4


def _empty_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *tools: str) -> None:
    """PATH with only the named tools, as scripts that would fail if run."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in tools:
        exe = bindir / tool
        exe.write_text("#!/bin/sh\necho should not run >&2\nexit 3\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bindir))


def test_missing_kind_gives_the_clear_error(
    topology: Topology, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _empty_path(monkeypatch, tmp_path, "docker")
    with pytest.raises(
        TargetError,
        match=r"^the kind target needs kind and a running container engine; not found: kind v[0-9.]+ "
        r"\(https://kind\.sigs\.k8s\.io/.*\); docker is installed but its daemon is not reachable "
        r"\(`docker info`: should not run\).*\. Or use --gameday-target=local",
    ):
        KindTarget(topology, tmp_path / "w")
    assert not (tmp_path / "w").exists()  # nothing was created


def test_missing_docker_gives_the_clear_error(
    topology: Topology, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _empty_path(monkeypatch, tmp_path, "kind")
    with pytest.raises(TargetError, match=r"not found: docker, a container engine kind runs its nodes in"):
        KindTarget(topology, tmp_path / "w")


def test_docker_without_a_daemon_gives_the_clear_error(
    topology: Topology, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _empty_path(monkeypatch, tmp_path, "kind", "docker")  # `docker info` exits 3
    with pytest.raises(TargetError, match=r"daemon is not reachable \(`docker info`: should not run\)") as err:
        KindTarget(topology, tmp_path / "w")
    assert "not found" not in str(err.value)


def test_a_failed_command_names_itself_and_its_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _empty_path(monkeypatch, tmp_path, "kind")
    with pytest.raises(TargetError, match=r"`kind get clusters` failed with exit code 3:\n  should not run"):
        CommandRunner().run(kind.get_clusters_argv())


def test_dry_run_needs_no_tools_and_records_everything(
    topology: Topology, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _empty_path(monkeypatch, tmp_path)
    out = io.StringIO()
    t = KindTarget(topology.with_overrides(contexts=None), tmp_path / "w", dry_run=True, out=out)
    assert isinstance(t, Target)
    assert t.kube.allow == tuple(sorted(f"kind-gd-{c}" for c in ("a", "b", "c", "global")))
    t.up()
    t.deploy()
    params: dict[str, object] = {}
    t.inject("gateway_down", "b", params)
    t.revert("gateway_down", "b", params)
    t.down()
    cmds = [" ".join(a) for a in t.runner.recorded]
    assert cmds[0] == "kind get clusters"
    assert [c for c in cmds if c.startswith("kind create")] == [
        f"kind create cluster --name gd-{c} --config {tmp_path / 'w' / 'kind' / (c + '.yaml')} --wait 180s"
        for c in ("global", "a", "b", "c")
    ]
    assert sum(c.startswith("kind load docker-image") for c in cmds) == 4
    assert [op.describe() for op in t.kube.recorded if op.verb == "scale"] == [
        "scale Deployment gameday/gateway to 0 [b]",
        "scale Deployment gameday/gateway to 2 [b]",
    ]
    assert "gameday dry-run: kind create cluster --name gd-a" in out.getvalue()


def test_configs_written_by_the_target_validate(topology: Topology, tmp_path: Path) -> None:
    t = KindTarget(topology, tmp_path, dry_run=True, out=io.StringIO())
    t.write_configs()
    schema = json.loads((k8s_files.KIND_DIR / "schema-v1alpha4.json").read_text())
    for c in ("global", "a", "b", "c"):
        (doc,) = list(yaml.safe_load_all((tmp_path / "kind" / f"{c}.yaml").read_text()))
        jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)


# -- make_target -------------------------------------------------------------------------------------
def _state(target: str, topology: Topology, **kw: object) -> SessionState:
    return SessionState(settings=dataclasses.replace(Settings(), target=target, **kw), topology=topology)  # type: ignore[arg-type]


def test_make_target_kube_without_contexts_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(pytest.UsageError, match=r"--gameday-target=kube: the kube target needs `contexts:`"):
        make_target(_state("kube", load_topology()), tmp_path)


def test_make_target_kube_not_allow_listed_is_a_usage_error(topology: Topology, tmp_path: Path) -> None:
    with pytest.raises(pytest.UsageError, match=r"'kind-gd-global'.*--gameday-allow-context=kind-gd-global"):
        make_target(_state("kube", topology, allow_context=("staging-*",)), tmp_path)


def test_make_target_kube(topology: Topology, tmp_path: Path) -> None:
    t = make_target(_state("kube", topology, allow_context=("kind-gd-*",), dry_run=True), tmp_path)
    assert isinstance(t, KubeTarget)
    assert t.dry_run


def test_make_target_kind_without_kind_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _empty_path(monkeypatch, tmp_path, "docker")
    with pytest.raises(pytest.UsageError, match=r"the kind target needs kind .*; not found: kind v"):
        make_target(_state("kind", load_topology()), tmp_path)


def test_make_target_kind_dry_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _empty_path(monkeypatch, tmp_path)
    t = make_target(_state("kind", load_topology(), dry_run=True), tmp_path)
    assert isinstance(t, KindTarget)
