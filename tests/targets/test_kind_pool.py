"""kind clusters reused by name, shared between processes (xdist workers), kept on request.

The pool is exercised with real processes and the real file lock; what they would run
(``kind create``, the deploy) is a callback that appends to a log file, since kind cannot
run here. The reuse and keep rules are checked on the kind argv lists a dry run prints.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest

from gameday.errors import TargetError
from gameday.model.topology import Topology
from gameday.targets.k8s import kind
from gameday.targets.k8s.kind import ClusterPool, KindTarget


def _worker(pool_file: str, log: str, hold: float, queue: multiprocessing.Queue,  # type: ignore[type-arg]
            both_in: Any) -> None:
    def note(what: str) -> None:
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()} {what}\n")

    def create() -> list[str]:
        done = Path(log).read_text().count("create")
        note("create")
        time.sleep(0.3)  # creating takes a while: the other process must wait, not create too
        return [] if done else ["global", "a"]

    pool = ClusterPool(Path(pool_file), f"{os.getpid()}-w")
    created = pool.join(create, lambda: note("deploy"))
    both_in.wait(120)  # both processes are in the pool before either leaves (however slow they start)
    time.sleep(hold)
    tore = pool.leave(lambda c: note(f"teardown {','.join(c)}"))
    queue.put((created, tore))


def test_two_workers_share_one_creation_one_deploy_and_one_teardown(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("")
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    both_in = ctx.Barrier(2)
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "pool.json"), str(log), hold, q, both_in))
             for hold in (0.2, 1.5)]
    for p in procs:
        p.start()
    try:
        results = [q.get(timeout=180) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join()
    lines = [line.split(" ", 1)[1] for line in log.read_text().splitlines()]
    assert lines.count("deploy") == 1, lines
    assert lines[-1] == "teardown global,a", lines
    assert sum(1 for line in lines if line.startswith("teardown")) == 1
    assert sorted(tore for _, tore in results) == [False, True]
    assert all(created == ["global", "a"] for created, _ in results)
    assert not (tmp_path / "pool.json").exists()


def test_a_dead_user_does_not_keep_the_clusters_alive(tmp_path: Path) -> None:
    path = tmp_path / "pool.json"
    path.write_text(json.dumps({"created": ["a"], "users": ["999999999-gone"], "deployed": True}))
    pool = ClusterPool(path, f"{os.getpid()}-me")
    torn: list[list[str]] = []
    deployed: list[bool] = []
    assert pool.join(list, lambda: deployed.append(True)) == ["a"]
    assert deployed == [True], "a pool whose users are all gone was not deployed by anyone alive"
    assert pool.leave(torn.append) is True
    assert torn == [["a"]]


def test_clusters_mapped_in_the_topology_are_reused_by_name(topology: Topology, tmp_path: Path) -> None:
    mapped = topology.with_overrides(contexts={"global": "kind-team-g", "a": "kind-team-a", "b": "kind-team-b",
                                               "c": "kind-team-c"})
    assert kind.cluster_names(mapped) == {"global": "team-g", "a": "team-a", "b": "team-b", "c": "team-c"}
    argvs = kind.plan_up(mapped, existing=["team-g", "team-a"], kind_dir=tmp_path)
    assert [a[4] for a in argvs] == ["team-b", "team-c"]
    assert kind.plan_up(mapped, existing=["team-g", "team-a", "team-b", "team-c"], kind_dir=tmp_path) == []
    out = io.StringIO()
    t = KindTarget(mapped, tmp_path / "w", dry_run=True, out=out)
    assert t.kube.contexts["a"] == "kind-team-a"


def test_contexts_that_are_not_kind_contexts_are_refused(topology: Topology, tmp_path: Path) -> None:
    staging = topology.with_overrides(contexts={"global": "staging-g", "a": "kind-a", "b": "kind-b", "c": "kind-c"})
    with pytest.raises(TargetError, match=r"from contexts `kind-<cluster name>`.*staging-g.*--gameday-target=kube"):
        KindTarget(staging, tmp_path, dry_run=True, out=io.StringIO())


@pytest.mark.parametrize("keep", [False, True])
def test_down_deletes_only_what_was_created_unless_kept(topology: Topology, tmp_path: Path, keep: bool) -> None:
    out = io.StringIO()
    t = KindTarget(topology, tmp_path / "w", dry_run=True, out=out, keep=keep, created=["b"])
    t.kube.up()  # addresses (placeholders in a dry run), without creating anything
    t.down()
    deleted = [a[4] for a in t.runner.recorded if a[:3] == ["kind", "delete", "cluster"]]
    namespaces = [op.cluster for op in t.kube.recorded if op.verb == "delete"]
    if keep:
        assert deleted == [] and namespaces == []
    else:
        assert deleted == ["gd-b"]  # created by gameday: the cluster goes
        assert sorted(namespaces) == ["a", "c", "global"]  # reused: only the federation's namespace goes
