"""R11 judges the manifests a target deploys: each built-in target says which (HasManifests)."""

from __future__ import annotations

from pathlib import Path

from gameday.interfaces import HasManifests
from gameday.runtime.resources import clusters_dir
from gameday.targets.external import ExternalTarget
from gameday.targets.k8s.kind import KindTarget
from gameday.targets.k8s.kube import KubeTarget
from gameday.targets.k8s.profiled import ProfileKubeTarget
from gameday.targets.local import LocalTarget


def test_every_builtin_target_names_its_manifests() -> None:
    for cls in (LocalTarget, KindTarget, KubeTarget, ExternalTarget, ProfileKubeTarget):
        assert issubclass(cls, HasManifests), cls


def test_the_reference_targets_name_the_shipped_manifests_and_they_exist() -> None:
    shipped = clusters_dir() / "manifests"
    assert sorted(p.name for p in shipped.glob("*.yaml")) == ["a.yaml", "b.yaml", "c.yaml", "global.yaml"]
    for cls in (KindTarget, KubeTarget, LocalTarget):
        # manifests_dir reads no instance state: call it unbound on a bare instance.
        target = cls.__new__(cls)
        assert Path(target.manifests_dir()) == shipped, cls
