"""Which targets share their federation, and the key their drills take turns on (offline).

kind and kube cannot run here: what is tested is what a drill on them does before it touches a
cluster. Their keys come from the contexts and the namespace, a profile's from the service its
clients resolve; the session's shielded view of a target keeps the capability; and a real
:class:`~gameday.drill.Drill` on a real kube target (no API client: any call would fail the
test) waits for a real holder process of that key, then fails before its health check.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from gameday.drill import Drill
from gameday.errors import DrillLockTimeout
from gameday.faults import Ledger
from gameday.interfaces import SharedFederation
from gameday.model.topology import Topology, load_topology
from gameday.runtime.drill_lock import lock_path
from gameday.runtime.settings import Settings
from gameday.targets.external import ExternalTarget
from gameday.targets.k8s import files as k8s_files
from gameday.targets.k8s.kind import KindTarget
from gameday.targets.k8s.kube import KubeTarget
from gameday.targets.k8s.profiled import ProfileKubeTarget
from gameday.targets.local import LocalTarget
from gameday.targets.profile import load_profile

from ..lock_holder import LockHolder
from .test_profile_kube import PROFILE

KIND_KEY = "k8s:kind-gd-a/gameday,kind-gd-b/gameday,kind-gd-c/gameday,kind-gd-global/gameday"
ADDRESSES = {"global": "10.0.0.1", "a": "10.0.1.1", "b": "10.0.2.1", "c": "10.0.3.1"}


def _no_client(context: str) -> Any:
    raise AssertionError(f"the test tried to open an API client for {context!r}")


@pytest.fixture
def topology() -> Topology:
    return load_topology(k8s_files.KIND_TOPOLOGY)


def test_kind_and_kube_on_the_same_contexts_share_one_key(topology: Topology, tmp_path: Path) -> None:
    kube = KubeTarget(topology, tmp_path, allow=["kind-gd-*"], client_factory=_no_client)
    kind = KindTarget(topology, tmp_path / "kind", dry_run=True, out=io.StringIO())
    for t in (kube, kind):  # what the drill sees: the target itself (no wrapper since 970d574)
        assert isinstance(t, SharedFederation), t
    assert kube.drill_lock_key() == kind.drill_lock_key() == KIND_KEY
    # Other contexts (the same topology on staging) are another federation.
    staging = topology.with_overrides(contexts={"global": "stg-g", "a": "stg-a", "b": "stg-b", "c": "stg-c"})
    other = KubeTarget(staging, tmp_path, allow=["stg-*"], client_factory=_no_client).drill_lock_key()
    assert other == "k8s:stg-a/gameday,stg-b/gameday,stg-c/gameday,stg-g/gameday"
    assert lock_path(other) != lock_path(KIND_KEY)


def test_a_profile_is_keyed_by_its_service_whichever_target_drills_it(tmp_path: Path) -> None:
    first = tmp_path / "shop.yaml"
    first.write_text(PROFILE)
    renamed = tmp_path / "copy" / "shop-copy.yaml"  # another file, another name: the same federation
    renamed.parent.mkdir()
    renamed.write_text(PROFILE.replace("name: shop", "name: shop-copy"))
    moved = tmp_path / "shop-5354.yaml"  # the same name, another DNS server: another federation
    moved.write_text(PROFILE.replace("port: 5353", "port: 5354"))
    key = "federation:shop.example.test.@127.0.0.1:5353"
    external = ExternalTarget(load_profile(first))
    assert external.drill_lock_key() == key
    assert ExternalTarget(load_profile(renamed)).drill_lock_key() == key
    assert ExternalTarget(load_profile(moved)).drill_lock_key() == "federation:shop.example.test.@127.0.0.1:5354"
    for name in ("kube", "kind"):
        profiled = ProfileKubeTarget(load_profile(first), tmp_path / name, allow=["staging-*"], name=name,
                                     client_factory=_no_client)
        assert isinstance(profiled, SharedFederation)
        assert profiled.drill_lock_key() == key
    v6 = tmp_path / "v6.yaml"
    v6.write_text(PROFILE.replace("server: 127.0.0.1", "server: '0:0::1'"))
    assert ExternalTarget(load_profile(v6)).drill_lock_key() == "federation:shop.example.test.@[::1]:5353"


def test_the_local_target_owns_its_federation(tmp_path: Path) -> None:
    local = LocalTarget(load_topology(), tmp_path)  # never started
    assert not isinstance(local, SharedFederation)


def test_a_kube_drill_waits_for_another_run_on_its_contexts_and_fails_before_touching_them(
        topology: Topology, tmp_path: Path) -> None:
    kube = KubeTarget(topology, tmp_path, allow=["kind-gd-*"], client_factory=_no_client, addresses=ADDRESSES)
    with LockHolder(KIND_KEY, tmp_path) as holder:
        progress: list[str] = []
        drill = Drill(kube, Settings(seed=1, drill_lock_timeout=0.6),
                      seed_key="t", ledger=Ledger(tmp_path / "ledger.json"), offered=60, margin=0.2,
                      progress=progress.append)
        with pytest.raises(DrillLockTimeout, match=rf"refusing gateway_down b: the drill lock on {KIND_KEY} is still "
                                                   rf"held by pid {holder.pid} \(worker \w+, test other-run\) since .*"
                                                   "nothing was injected"), drill.fault("gateway_down", "b"):
            raise AssertionError("the block must not run")
        assert progress and "waiting for drill lock held by" in progress[0]
        assert kube.recorded == []  # not one Kubernetes operation, not even the health check's reads
        assert not (tmp_path / "ledger.json").exists()
