"""The ``kind`` target: one kind cluster per region plus one for the global tier (CI runners).

``up`` creates the clusters that do not exist yet (``kind create cluster --name gd-<c>
--config clusters/kind/<c>.yaml``), ``deploy`` loads the app image into each
(``kind load docker-image``) and applies the manifests; ``down`` deletes the clusters it
created. Everything else, faults included, is delegated to a
:class:`~gameday.targets.k8s.kube.KubeTarget` on the contexts kind writes (``kind-gd-<c>``),
whose allow-list is exactly those contexts.

Faults are the kube target's (DESIGN §6: scale the gateway to 0; NetworkPolicies for a
hung gateway and a blackholed region). ``docker network disconnect kind <node>`` was
considered for the blackhole and not used: reconnecting cannot pin the node's old IPv4
address (kind's network has no user-configured IPv4 subnet, which ``--ip`` requires), and
a node whose address changes is not the cluster it was, so the fault would have no exact
inverse.

The argv lists are built by pure functions (tested); :class:`CommandRunner` runs them and
turns a missing tool or a failed command into a :class:`~gameday.errors.TargetError`.
"""

from __future__ import annotations

import json
import logging
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self, TextIO

from gameday.errors import TargetError
from gameday.observers.sources import Sources
from gameday.settings import Settings
from gameday.targets.base import Endpoints, RegionInfo
from gameday.targets.k8s import files as f
from gameday.targets.k8s import manifests as m
from gameday.targets.k8s import objects as o
from gameday.targets.k8s.kube import KubeTarget
from gameday.topology import Topology

log = logging.getLogger(__name__)

MISSING = {
    "kind": "kind not found: the kind target needs kind and a container engine (CI runners); "
    "install kind (https://kind.sigs.k8s.io/docs/user/quick-start/) or use --gameday-target=local",
    "docker": "docker not found: the kind target needs a container engine and kind (CI runners); "
    "use --gameday-target=local on machines without one",
}
CREATE_WAIT = "180s"
"""``kind create cluster --wait``: how long kind waits for the control plane to be Ready."""


# -- argv (pure) -------------------------------------------------------------------------------------
def create_argv(cluster: str, kind_dir: Path = f.KIND_DIR) -> list[str]:
    return [
        "kind",
        "create",
        "cluster",
        "--name",
        f.kind_cluster_name(cluster),
        "--config",
        str(kind_dir / f"{cluster}.yaml"),
        "--wait",
        CREATE_WAIT,
    ]


def load_image_argv(image: str, cluster: str) -> list[str]:
    return ["kind", "load", "docker-image", image, "--name", f.kind_cluster_name(cluster)]


def delete_argv(cluster: str) -> list[str]:
    return ["kind", "delete", "cluster", "--name", f.kind_cluster_name(cluster)]


def get_clusters_argv() -> list[str]:
    return ["kind", "get", "clusters"]


def docker_info_argv() -> list[str]:
    return ["docker", "info", "--format", "{{.ServerVersion}}"]


def image_inspect_argv(image: str) -> list[str]:
    return ["docker", "image", "inspect", "--format", "{{.Id}}", image]


def plan_up(topology: Topology, existing: list[str], kind_dir: Path = f.KIND_DIR) -> list[list[str]]:
    """``kind create cluster`` for every cluster of *topology* not in *existing* (kind names)."""
    return [create_argv(c, kind_dir) for c in m.clusters(topology) if f.kind_cluster_name(c) not in existing]


def plan_load(topology: Topology, image: str = o.APP_IMAGE) -> list[list[str]]:
    return [load_image_argv(image, c) for c in m.clusters(topology)]


def plan_down(created: list[str]) -> list[list[str]]:
    return [delete_argv(c) for c in reversed(created)]


def kind_topology(topology: Topology) -> Topology:
    """*topology* with ``contexts`` set to kind's context names (``kind-gd-<cluster>``)."""
    return topology.with_overrides(contexts={c: f.kind_context(c) for c in m.clusters(topology)})


# -- running -------------------------------------------------------------------------------------------
class CommandRunner:
    """Runs kind/docker argv lists; in dry-run prints and records them instead."""

    def __init__(self, *, dry_run: bool = False, out: TextIO | None = None, timeout: float = 900.0) -> None:
        self.dry_run = dry_run
        self.out = out
        self.timeout = timeout
        self.recorded: list[list[str]] = []

    def which(self, tool: str) -> str:
        """The tool's path. Raises TargetError (:data:`MISSING`) when it is not on PATH."""
        found = shutil.which(tool)
        if found is None:
            raise TargetError(MISSING.get(tool, f"{tool} not found on PATH"))
        return found

    def preflight(self, image: str | None = None) -> None:
        """kind and docker on PATH, the docker daemon reachable, and *image* built locally.

        Raises:
            TargetError: what is missing and what to do about it; nothing was created.
        """
        if self.dry_run:  # a dry run only prints the commands: it needs neither tool
            return
        self.which("kind")
        self.which("docker")
        try:
            self.run(docker_info_argv())
        except TargetError as exc:
            raise TargetError(
                f"docker is installed but its daemon is not reachable ({exc}); the kind target "
                "needs a running container engine (CI runners)"
            ) from exc
        if image is not None:
            try:
                self.run(image_inspect_argv(image))
            except TargetError as exc:
                raise TargetError(
                    f"image {image} is not in the local docker: build it first "
                    f"(docker build -t {image} -f clusters/kind/Dockerfile .)"
                ) from exc

    def run(self, argv: list[str]) -> str:
        """Run *argv*; return its stdout. Raises TargetError on a missing tool or non-zero exit."""
        self.recorded.append(list(argv))
        if self.dry_run:
            line = f"gameday dry-run: {shlex.join(argv)}"
            log.info("%s", line)
            (self.out or sys.stderr).write(line + "\n")
            return ""
        exe = self.which(argv[0])
        log.info("running %s", shlex.join(argv))
        try:
            proc = subprocess.run(
                [exe, *argv[1:]], capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TargetError(f"`{shlex.join(argv)}` could not run: {exc}") from exc
        if proc.returncode != 0:
            tail = "\n  ".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
            raise TargetError(f"`{shlex.join(argv)}` failed with exit code {proc.returncode}:\n  {tail}")
        return proc.stdout


class KindTarget:
    """A :class:`~gameday.targets.base.Target` on kind clusters ``gd-<region>`` and ``gd-global``.

    Raises (at construction, before anything is created):
        TargetError: kind or docker missing, the docker daemon down; a region named ``global``.
    """

    name = "kind"

    def __init__(
        self,
        topology: Topology,
        workdir: Path,
        *,
        dry_run: bool = False,
        runner: CommandRunner | None = None,
        out: TextIO | None = None,
        image: str = o.APP_IMAGE,
        kind_dir: Path | None = None,
        created: list[str] | None = None,
        preflight: bool = True,
    ) -> None:
        self.topology = kind_topology(topology)
        self.workdir = workdir
        self.image = image
        self.kind_dir = kind_dir or workdir / "kind"
        self.runner = runner or CommandRunner(dry_run=dry_run, out=out)
        if preflight:
            self.runner.preflight(image)
        self.created: list[str] = list(created or [])
        """Clusters this target created (and :meth:`down` deletes)."""
        assert self.topology.contexts is not None
        self.kube = KubeTarget(
            self.topology,
            workdir,
            allow=sorted(self.topology.contexts.values()),
            dry_run=self.runner.dry_run,
            out=out,
        )

    @classmethod
    def from_settings(cls, topology: Topology, settings: Settings, workdir: Path) -> Self:
        """The registry's factory: tools are checked here, before anything is created."""
        return cls(topology, workdir, dry_run=settings.dry_run)

    @classmethod
    def attach(cls, ref: dict[str, Any]) -> Self:
        """Re-attach from a ledger reference (``gameday restore``): no tool checks, no creation."""
        kube = KubeTarget.attach(ref["kube"])
        t = cls(
            kube.topology, kube.workdir, dry_run=kube.dry_run, created=ref.get("created"), preflight=False
        )
        t.kube = kube
        return t

    def ref(self) -> dict[str, Any]:
        return {"kube": self.kube.ref(), "created": list(self.created)}

    # -- lifecycle ---------------------------------------------------------------------------------------
    def up(self) -> None:
        """Create the missing clusters (configs rendered from the topology), then connect."""
        self.write_configs()
        existing = self.runner.run(get_clusters_argv()).split()
        for argv in plan_up(self.topology, existing, self.kind_dir):
            self.runner.run(argv)
            self.created.append(argv[argv.index("--name") + 1].removeprefix("gd-"))
            self._save_state()
        self.kube.up()

    def write_configs(self) -> None:
        """Render each cluster's kind config into ``kind_dir`` (the reviewed copies under
        clusters/kind/ come from the same function)."""
        self.kind_dir.mkdir(parents=True, exist_ok=True)
        for c in m.clusters(self.topology):
            (self.kind_dir / f"{c}.yaml").write_text(
                f.dump_yaml([f.kind_config(self.topology, c)]), encoding="utf-8"
            )

    def deploy(self) -> None:
        for argv in plan_load(self.topology, self.image):
            self.runner.run(argv)
        self.kube.deploy()

    def down(self) -> None:
        """Delete the clusters this target created; in reused ones, only the federation's namespace."""
        reused = [c for c in m.clusters(self.topology) if c not in self.created]
        if reused:
            self.kube.delete_namespaces(reused)
        for argv in plan_down(self.created):
            self.runner.run(argv)
        self.created = []
        self._save_state()

    def _save_state(self) -> None:
        if self.runner.dry_run:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "kind.json").write_text(json.dumps({"created": self.created}), encoding="utf-8")

    # -- delegated to the kube target ---------------------------------------------------------------------
    def regions(self) -> list[RegionInfo]:
        return self.kube.regions()

    def endpoints(self) -> Endpoints:
        return self.kube.endpoints()

    def sources(self) -> Sources:
        return self.kube.sources()

    def check_health(self, timeout: float) -> None:
        self.kube.check_health(timeout)

    def inject(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        self.kube.inject(kind, region, params)

    def revert(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        self.kube.revert(kind, region, params)

    def alarm_lines(self) -> Iterator[tuple[str, str]]:
        return self.kube.alarm_lines()

    def reconcile(self) -> dict[str, Any]:
        return self.kube.reconcile()

    def release_plan(self) -> list[str]:
        return self.kube.release_plan()

    def rollout_region(self, region: str) -> None:
        self.kube.rollout_region(region)
