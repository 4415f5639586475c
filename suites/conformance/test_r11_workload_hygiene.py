"""R11: workload hygiene of the kind/kube manifests, checked offline.

Every manifest under ``clusters/manifests/`` is validated strictly against the real
Kubernetes schemas (``kubernetes-validate``; an unknown or misspelt field fails), at the
Kubernetes version the kind clusters run (from ``clusters/kind/*.yaml`` node images) or
else the newest schema shipped. Then the workloads are checked: separate ``/livez`` and
``/readyz`` probes, readiness ``failureThreshold`` 3, resource requests, a
PodDisruptionBudget and topology spread for every Deployment and StatefulSet, and one
pinned version of each image in every region (see :mod:`gameday.conformance.manifests`).

The manifests are the target's (:class:`gameday.interfaces.HasManifests`): the reference
app's shipped ones on local, kind and kube; a profile's ``manifests`` directory on external.
A target that names none skips, saying so; a named directory without manifests is a failure,
not a skip: the rule cannot hold for manifests that do not exist.

The running app is checked too: an app instance that is not ready still answers
``/livez`` (readiness failing must not get it restarted).
"""

from __future__ import annotations

import re

import pytest

from gameday.conformance import manifests
from gameday.conformance.capabilities import require
from gameday.interfaces import HasManifests
from gameday.runtime.resources import clusters_dir

CLUSTERS = clusters_dir()
KIND_CONFIGS = CLUSTERS / "kind"
NODE_IMAGE = re.compile(r"kindest/node:v(\d+\.\d+)(?:\.\d+)?")


def _kubernetes_validate():
    # 108 MB of schemas: an optional extra, so the check says how to get it rather than fail.
    return pytest.importorskip("kubernetes_validate", reason="needs the Kubernetes schemas: "
                               "pip install 'gameday[kube]' (kubernetes-validate)")


def _kubernetes_version():
    """The Kubernetes minor version of the kind node images, else the newest schema."""
    kubernetes_validate = _kubernetes_validate()
    found = sorted({m.group(1) for p in KIND_CONFIGS.glob("*.yaml") for m in NODE_IMAGE.finditer(p.read_text())})
    if len(found) > 1:
        pytest.fail(f"kind configs in {KIND_CONFIGS} run different Kubernetes versions {found}; one is expected")
    return f"{found[0]}.0" if found else kubernetes_validate.latest_version()


def _manifests(federation):
    """(the target's manifests directory, the directory names in messages are relative to)."""
    where = require(federation, HasManifests, "R11 checks the manifests a federation is deployed from").manifests_dir()
    if where is None:
        pytest.skip(f"target {federation.name} names no Kubernetes manifests: R11's offline checks judge the "
                    "manifests a federation is deployed from (a profile names them with `manifests: DIR`)")
    return where, where.parent.parent if where.parent.name == "clusters" else where.parent


@pytest.mark.conformance("R11", "manifests validate offline against the Kubernetes schemas (strict)")
def test_r11_manifests_validate_strictly(federation):
    _kubernetes_validate()
    where, base = _manifests(federation)
    docs = manifests.load(where)
    version = _kubernetes_version()
    problems, _skipped = manifests.schema_problems(docs, version, base)
    assert not problems, (f"expected every object under {where.relative_to(base)} to validate strictly "
                          f"against Kubernetes {version}; {len(problems)} of {len(docs)} did not:\n"
                          + "\n".join(problems[:20]))


@pytest.mark.conformance("R11", "probes, failureThreshold 3, PDB, topology spread, requests, one image version")
def test_r11_workload_hygiene(federation):
    where, base = _manifests(federation)
    docs = manifests.load(where)
    problems = manifests.hygiene_problems(docs, base)
    assert not problems, (f"expected the workloads under {where.relative_to(base)} to follow R11; "
                          f"{len(problems)} problem(s):\n" + "\n".join(problems[:30]))


@pytest.mark.conformance("R11", "a running app instance that is not ready is still live (/livez apart from /readyz)")
def test_r11_unready_instance_stays_live(drill, view, settled):
    region = drill.pick_region()
    urls = view.instances(region)
    with drill.fault("instances_unready", region):
        ready = {u: view.request(view.ep.sibling(u, "/readyz")).status for u in urls}
        live = {u: view.request(view.ep.sibling(u, "/livez")).status for u in urls}
    assert all(s == 503 for s in ready.values()), (
        f"expected /readyz of {region}'s instances to fail while they are made unready; statuses {ready}")
    assert all(s == 200 for s in live.values()), (
        f"expected /livez of {region}'s unready instances to stay 200 (not ready is no reason to restart); "
        f"statuses {live}")
