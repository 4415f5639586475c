"""Kubernetes manifests checked offline (R11): the real schemas, strictly, and workload hygiene.

:func:`load` reads every YAML/JSON document under a directory; :func:`schema_problems`
validates each against the Kubernetes OpenAPI schemas shipped by ``kubernetes-validate``
in strict mode (an unknown or misspelt field is an error, not silently ignored);
:func:`hygiene_problems` applies R11 to the workloads (Deployments, StatefulSets,
DaemonSets):

* every container has a readiness and a liveness probe, and they are different checks
  (``/readyz`` says "send me traffic", ``/livez`` "restart me"); containers of the
  project's own image use exactly ``/readyz`` and ``/livez``;
* readiness ``failureThreshold`` is 3 (R2; Kubernetes' default of 3 counts);
* every container and init container requests CPU and memory;
* every Deployment and StatefulSet has a PodDisruptionBudget selecting its pods and
  ``topologySpreadConstraints`` whose selector matches its pods (also single-replica
  ones: an app may run each instance as its own Deployment, and they must still be
  spread and protected together);
* every image is pinned (a tag other than ``latest``, or a digest), and each image
  repository is used at one version everywhere (one controlled source in every region).

Objects of API groups without Kubernetes schemas (kind's cluster config, kustomize) are
not validated by :func:`schema_problems`; they are reported as skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

NON_KUBERNETES_GROUPS = ("kind.x-k8s.io", "kustomize.config.k8s.io", "kustomize.toolkit.fluxcd.io")
"""apiVersion groups whose objects are configuration for tools, not cluster objects."""
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
PROJECT_IMAGE = "gameday"
"""Images whose repository name contains this run the project's components (/livez, /readyz)."""
READINESS_FAILURE_THRESHOLD = 3
DEFAULT_FAILURE_THRESHOLD = 3
"""Kubernetes' default ``failureThreshold`` when a probe does not set one."""


@dataclass(frozen=True)
class Doc:
    """One Kubernetes object from a manifest file."""

    path: Path
    index: int
    """Position of the document in its file (0-based)."""
    obj: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", "?"))

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name", "?"))

    @property
    def namespace(self) -> str:
        return str((self.obj.get("metadata") or {}).get("namespace", "default"))

    def where(self, root: Path | None = None) -> str:
        p = self.path.relative_to(root) if root is not None and self.path.is_relative_to(root) else self.path
        return f"{p}#{self.index} {self.kind}/{self.name}"

    @property
    def is_kubernetes(self) -> bool:
        group = str(self.obj.get("apiVersion", "")).split("/")[0]
        return group not in NON_KUBERNETES_GROUPS


class ManifestError(AssertionError):
    """Manifests are missing or cannot be parsed (a verdict: R11 cannot hold)."""


def load(root: Path) -> list[Doc]:
    """Every object in ``*.yaml``, ``*.yml`` and ``*.json`` files under *root* (recursive).

    ``List`` objects are flattened into their items; empty documents are skipped.

    Raises:
        ManifestError: *root* does not exist or holds no object, or a file is not valid
            YAML/JSON or holds something other than objects (names the file).
    """
    if not root.is_dir():
        raise ManifestError(f"no manifests: {root} does not exist (R11 checks the kind/kube manifests there)")
    files = sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml", ".json") and p.is_file())
    docs: list[Doc] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
            raw = [json.loads(text)] if path.suffix == ".json" else list(yaml.safe_load_all(text))
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise ManifestError(f"{path}: cannot be parsed as {path.suffix[1:].upper()}: {exc}") from exc
        for i, obj in enumerate(raw):
            if obj is None:
                continue
            if not isinstance(obj, dict):
                raise ManifestError(f"{path}#{i}: expected a Kubernetes object (a mapping), "
                                    f"got {type(obj).__name__}")
            if obj.get("kind") == "List" and isinstance(obj.get("items"), list):
                docs += [Doc(path, i, dict(item)) for item in obj["items"] if isinstance(item, dict)]
            else:
                docs.append(Doc(path, i, obj))
    if not docs:
        raise ManifestError(f"no manifests: {root} holds no Kubernetes object in *.yaml, *.yml or *.json "
                            f"({len(files)} file(s) found)")
    return docs


def schema_problems(docs: list[Doc], version: str, root: Path | None = None) -> tuple[list[str], list[str]]:
    """Validate every Kubernetes object strictly against the schemas of *version*.

    Returns:
        ``(problems, skipped)``: one line per invalid object (where, the field path, the
        schema's complaint) and one per object of a non-Kubernetes API group.
    """
    import kubernetes_validate  # noqa: PLC0415  (heavy: loaded only when manifests are checked)

    problems: list[str] = []
    skipped: list[str] = []
    for d in docs:
        if not d.is_kubernetes:
            skipped.append(f"{d.where(root)} ({d.obj.get('apiVersion')}: no Kubernetes schema)")
            continue
        if "apiVersion" not in d.obj or "kind" not in d.obj:
            problems.append(f"{d.where(root)}: apiVersion and kind are required")
            continue
        try:
            kubernetes_validate.validate(d.obj, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{d.where(root)}: no schema for {d.obj['apiVersion']} {d.kind} in Kubernetes "
                            f"{version} (misspelt kind or removed API version?)")
        except kubernetes_validate.ValidationError as exc:
            path = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
            problems.append(f"{d.where(root)}: {path}: {exc.message} (Kubernetes {version}, strict)")
    return problems, skipped


# -- hygiene ----------------------------------------------------------------------------------------
def _pod_spec(d: Doc) -> dict[str, Any]:
    spec: dict[str, Any] = ((d.obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec


def _pod_labels(d: Doc) -> dict[str, str]:
    labels: dict[str, str] = (((d.obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
        "labels") or {}
    return labels


def _selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """True if a LabelSelector's matchLabels and In/Exists expressions select *labels*."""
    if not selector:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) \
                or (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return bool(selector.get("matchLabels") or selector.get("matchExpressions"))


def _probe_key(probe: dict[str, Any]) -> str:
    if "httpGet" in probe:
        return f"httpGet {probe['httpGet'].get('path', '/')}:{probe['httpGet'].get('port')}"
    if "exec" in probe:
        return f"exec {probe['exec'].get('command')}"
    if "tcpSocket" in probe:
        return f"tcpSocket {probe['tcpSocket'].get('port')}"
    if "grpc" in probe:
        return f"grpc {probe['grpc']}"
    return "no handler"


def _image_parts(image: str) -> tuple[str, str | None]:
    """``repo:tag`` / ``repo@sha256:...`` -> (repository, tag or digest or None)."""
    if "@" in image:
        repo, digest = image.split("@", 1)
        return repo, digest
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = image.rsplit(":", 1)
        return repo, tag
    return image, None


def _container_problems(where: str, c: dict[str, Any], init: bool) -> list[str]:
    out: list[str] = []
    cname = f"{where} container {c.get('name', '?')}"
    req = (c.get("resources") or {}).get("requests") or {}
    missing = [r for r in ("cpu", "memory") if r not in req]
    if missing:
        out.append(f"{cname}: no resource requests for {', '.join(missing)} (R11: the scheduler and the N-1 "
                   "capacity arithmetic need them)")
    if init:
        return out
    ready, live = c.get("readinessProbe"), c.get("livenessProbe")
    if not ready:
        out.append(f"{cname}: no readinessProbe (R11: /readyz decides whether it receives traffic)")
    if not live:
        out.append(f"{cname}: no livenessProbe (R11: /livez decides whether it is restarted)")
    if ready and live and _probe_key(ready) == _probe_key(live):
        out.append(f"{cname}: readiness and liveness probe the same thing ({_probe_key(ready)}); R11 wants "
                   "them separate so a not-ready pod is not restarted")
    if PROJECT_IMAGE in _image_parts(str(c.get("image", "")))[0].rsplit("/", 1)[-1]:
        for probe, path, what in ((ready, "/readyz", "readinessProbe"), (live, "/livez", "livenessProbe")):
            got = ((probe or {}).get("httpGet") or {}).get("path")
            if probe and got != path:
                out.append(f"{cname}: {what} httpGet path {got!r}, expected {path!r}")
    if ready:
        ft = ready.get("failureThreshold", DEFAULT_FAILURE_THRESHOLD)
        if ft != READINESS_FAILURE_THRESHOLD:
            out.append(f"{cname}: readinessProbe failureThreshold {ft}, expected "
                       f"{READINESS_FAILURE_THRESHOLD} (R2: removal after 3 consecutive failures)")
    return out


def hygiene_problems(docs: list[Doc], root: Path | None = None) -> list[str]:
    """Everything in *docs* that breaks R11 (see the module docstring); empty if nothing does."""
    problems: list[str] = []
    workloads = [d for d in docs if d.kind in WORKLOAD_KINDS and d.is_kubernetes]
    pdbs = [d for d in docs if d.kind == "PodDisruptionBudget"]
    if not workloads:
        problems.append(f"no workload ({', '.join(WORKLOAD_KINDS)}) among {len(docs)} object(s): nothing "
                        "runs the federation")
    images: dict[str, dict[str, list[str]]] = {}
    for d in workloads:
        where = d.where(root)
        spec = _pod_spec(d)
        for init, key in ((False, "containers"), (True, "initContainers")):
            for c in spec.get(key) or []:
                problems += _container_problems(where, c, init)
                image = str(c.get("image", ""))
                repo, version = _image_parts(image)
                if version is None or version == "latest":
                    problems.append(f"{where} container {c.get('name', '?')}: image {image!r} is not pinned "
                                    "(a tag other than latest, or a digest)")
                images.setdefault(repo, {}).setdefault(version or "latest", []).append(where)
        if d.kind != "DaemonSet":  # one pod per node: its update strategy governs disruption
            labels = _pod_labels(d)
            if not any(p.namespace == d.namespace and _selects((p.obj.get("spec") or {}).get("selector"),
                                                                labels) for p in pdbs):
                problems.append(f"{where}: no PodDisruptionBudget in namespace {d.namespace} selects its pod "
                                f"labels {labels} (a node drain could take every replica at once)")
            spread = spec.get("topologySpreadConstraints") or []
            if not any(_selects(s.get("labelSelector"), labels) for s in spread):
                problems.append(f"{where}: no topologySpreadConstraints selecting its pods {labels} "
                                "(replicas could all land on one node or zone)")
    for repo, versions in sorted(images.items()):
        if len(versions) > 1:
            detail = "; ".join(f"{v} in {', '.join(ws[:3])}" for v, ws in sorted(versions.items()))
            problems.append(f"image {repo} is used at {len(versions)} versions (R11: one version from one "
                            f"controlled source in every region): {detail}")
    return problems
