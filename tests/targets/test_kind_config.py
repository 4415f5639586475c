"""kind cluster configs validate strictly against a schema of kind's documented v1alpha4 fields.

kind publishes no JSON schema, so ``clusters/kind/schema-v1alpha4.json`` was written from
kind's configuration docs for exactly the fields gameday uses, with
``additionalProperties: false`` everywhere: a field outside that subset fails here.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from gameday.model.topology import GLOBAL_CLUSTER, Topology
from gameday.targets.k8s import files as k8s_files
from gameday.targets.k8s import manifests
from gameday.targets.k8s import objects as o

SCHEMA = json.loads((k8s_files.KIND_DIR / "schema-v1alpha4.json").read_text(encoding="utf-8"))


def _validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def _committed() -> dict[str, Any]:
    out = {}
    for p in sorted(k8s_files.KIND_DIR.glob("*.yaml")):
        if p.name == "topology.yaml":
            continue
        (doc,) = list(yaml.safe_load_all(p.read_text(encoding="utf-8")))
        out[p.stem] = doc
    return out


def test_one_committed_config_per_cluster(topology: Topology) -> None:
    assert sorted(_committed()) == sorted(manifests.clusters(topology))


@pytest.mark.parametrize("cluster", [GLOBAL_CLUSTER, "a", "b", "c"])
def test_committed_config_validates_strictly(cluster: str) -> None:
    errors = sorted(_validator().iter_errors(_committed()[cluster]), key=str)
    assert not errors, [e.message for e in errors]


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda c: c.update(networkin={}), "unknown top-level field"),
        (lambda c: c["nodes"][0].update(extraPortMapping=[]), "misspelt node field"),
        (lambda c: c["nodes"][1].update(role="master"), "role kind no longer accepts"),
        (lambda c: c.update(apiVersion="kind.x-k8s.io/v1alpha3"), "old API version"),
        (lambda c: c.update(nodes=[{"role": "worker"}]), "no control-plane node"),
        (lambda c: c["nodes"][0].update(image="kindest/node:latest"), "unpinned node image"),
    ],
)
def test_schema_is_strict(topology: Topology, mutate: Any, why: str) -> None:
    cfg = k8s_files.kind_config(topology, "a")
    mutate(cfg)
    assert list(_validator().iter_errors(cfg)), why


def test_region_clusters_have_two_zones_of_workers(topology: Topology) -> None:
    for r in topology.regions:
        cfg = k8s_files.kind_config(topology, r.name)
        assert cfg["name"] == f"gd-{r.name}"
        workers = [n for n in cfg["nodes"] if n["role"] == "worker"]
        assert len({n["labels"][o.ZONE_KEY] for n in workers}) == 2
        assert {n["image"] for n in cfg["nodes"]} == {o.KIND_NODE_IMAGE}


def test_node_version_matches_the_schema_version_manifests_are_checked_against() -> None:
    major_minor = ".".join(o.KUBERNETES_VERSION.split(".")[:2])
    assert o.SCHEMA_VERSION.startswith(major_minor + ".")
    assert o.KIND_NODE_IMAGE.endswith(":v" + o.KUBERNETES_VERSION)


def test_kind_contexts(topology: Topology) -> None:
    assert k8s_files.kind_context("a") == "kind-gd-a"
    assert topology.contexts == {c: k8s_files.kind_context(c) for c in manifests.clusters(topology)}


def test_schema_and_renderer_agree_on_the_api_version() -> None:
    assert SCHEMA["properties"]["apiVersion"]["const"] == k8s_files.KIND_API_VERSION
