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

import dataclasses
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self, TextIO

from filelock import FileLock

from gameday.errors import ConfigError, TargetError
from gameday.interfaces import Endpoints, RegionInfo
from gameday.model.topology import Topology
from gameday.observers.reference import ReferenceEndpoints
from gameday.observers.sources import Sources
from gameday.runtime.settings import Settings
from gameday.targets.fedapp_spec import ReferenceTiming
from gameday.targets.k8s import files as f
from gameday.targets.k8s import manifests as m
from gameday.targets.k8s import objects as o
from gameday.targets.k8s.kube import KubeTarget
from gameday.targets.k8s.profiled import ProfileKubeTarget
from gameday.targets.profile import load_profile

log = logging.getLogger(__name__)

KIND_VERSION = "v0.29.0"
"""The kind release the nightly workflow installs (its node images match :data:`~.objects.KUBERNETES_VERSION`)."""
INSTALL = {
    "kind": f"kind {KIND_VERSION} (https://kind.sigs.k8s.io/docs/user/quick-start/#installation, "
    f"or `go install sigs.k8s.io/kind@{KIND_VERSION}`)",
    "docker": "docker, a container engine kind runs its nodes in (https://docs.docker.com/engine/install/)",
}
"""What to install, per tool the kind target needs."""


def missing_tools_message(missing: list[str], daemon: str | None = None) -> str:
    """One line: which of kind and docker are not on PATH (and the daemon's error, if any)."""
    found = f"not found: {'; '.join(INSTALL.get(t, t) for t in missing)}" if missing else ""
    down = (f"docker is installed but its daemon is not reachable ({daemon}): start it "
            "(`sudo systemctl start docker`)") if daemon else ""
    return (f"the kind target needs kind and a running container engine; {'; '.join(x for x in (found, down) if x)}"
            ". Or use --gameday-target=local (no container engine needed)")


CREATE_WAIT = "180s"
"""``kind create cluster --wait``: how long kind waits for the control plane to be Ready."""


# -- argv (pure) -------------------------------------------------------------------------------------
def create_argv(cluster: str, kind_dir: Path = f.KIND_DIR, name: str | None = None) -> list[str]:
    return [
        "kind",
        "create",
        "cluster",
        "--name",
        name or f.kind_cluster_name(cluster),
        "--config",
        str(kind_dir / f"{cluster}.yaml"),
        "--wait",
        CREATE_WAIT,
    ]


def load_image_argv(image: str, cluster: str, name: str | None = None) -> list[str]:
    return ["kind", "load", "docker-image", image, "--name", name or f.kind_cluster_name(cluster)]


def delete_argv(cluster: str, name: str | None = None) -> list[str]:
    return ["kind", "delete", "cluster", "--name", name or f.kind_cluster_name(cluster)]


def get_clusters_argv() -> list[str]:
    return ["kind", "get", "clusters"]


def docker_info_argv() -> list[str]:
    return ["docker", "info", "--format", "{{.ServerVersion}}"]


def image_inspect_argv(image: str) -> list[str]:
    return ["docker", "image", "inspect", "--format", "{{.Id}}", image]


def cluster_names(topology: Topology) -> dict[str, str]:
    """Cluster key -> kind cluster name: from the topology's kind contexts (``kind-<name>``),
    else ``gd-<cluster>``."""
    ctx = topology.contexts or {}
    return {c: ctx[c].removeprefix("kind-") if c in ctx else f.kind_cluster_name(c) for c in m.clusters(topology)}


def plan_up(topology: Topology, existing: list[str], kind_dir: Path = f.KIND_DIR) -> list[list[str]]:
    """``kind create cluster`` for every cluster of *topology* not in *existing* (kind names):
    clusters that exist already are reused by name."""
    return [create_argv(c, kind_dir, n) for c, n in cluster_names(topology).items() if n not in existing]


def plan_load(topology: Topology, image: str = o.APP_IMAGE) -> list[list[str]]:
    return [load_image_argv(image, c, n) for c, n in cluster_names(topology).items()]


def plan_down(created: list[str], names: dict[str, str] | None = None) -> list[list[str]]:
    return [delete_argv(c, (names or {}).get(c)) for c in reversed(created)]


def kind_topology(topology: Topology) -> Topology:
    """*topology* with kind's context names: those it maps (they must be ``kind-<name>``, kind's
    own naming, so the clusters can be found by name), else ``kind-gd-<cluster>``.

    Raises:
        TargetError: a context that is not a kind context.
    """
    if topology.contexts is None:
        if topology.state is not None:
            # The manifests deploy no store yet (the local target runs one): the default topology's
            # state section stays behind, and the state verdicts say "no state layer".
            log.warning("the kind target deploys no state layer yet: the topology's state section is left out")
        return topology.with_overrides(contexts={c: f.kind_context(c) for c in m.clusters(topology)}, state=None)
    wrong = {c: ctx for c, ctx in topology.contexts.items() if not ctx.startswith("kind-") or ctx == "kind-"}
    if wrong:
        raise TargetError(f"the kind target finds clusters by name, from contexts `kind-<cluster name>`; the topology "
                          f"maps {wrong}: use --gameday-target=kube for other contexts")
    return topology


def _kind_profile_settings(settings: Settings) -> Settings:
    """*settings* with the profile's kind contexts allowed (each must be ``kind-<name>``).

    Raises:
        ConfigError/TargetError: the profile is invalid, has no ``kubernetes:`` section, or maps
            a context that is not kind's.
    """
    assert settings.profile is not None
    k = load_profile(settings.profile).profile.kubernetes
    if k is None:
        raise ConfigError(f"{settings.profile}: has no `kubernetes:` section; --gameday-target=kind with a profile "
                          "needs its kind contexts and its faults as Kubernetes operations there",
                          source=str(settings.profile), field="kubernetes")
    wrong = sorted(c for c in k.contexts.values() if not c.startswith("kind-") or c == "kind-")
    if wrong:
        raise TargetError(f"{settings.profile}: kubernetes.contexts {wrong} are not kind contexts (kind-<cluster "
                          "name>); use --gameday-target=kube for them")
    return dataclasses.replace(settings, allow_context=tuple(sorted(set(k.contexts.values()))))


class ClusterPool:
    """The kind clusters shared by every pytest process (xdist workers) using one reports
    directory, as pytest-xdist's docs do it for a session fixture: a JSON file under a file
    lock says which clusters gameday created, whether the federation is deployed, and who
    uses them. The first user creates what is missing (reusing clusters by name) and deploys;
    the last one out deletes what was created (or nothing with ``keep``). A user whose
    process is gone (killed) no longer counts.

    Args:
        path: the pool file (its lock is ``path + ".lock"``).
        user: this process's id in the pool (``<pid>-<anything>``).
    """

    LOCK_TIMEOUT = 1800.0
    """Seconds to wait for the pool: another worker may be creating four clusters (~3 min each)."""

    def __init__(self, path: Path, user: str) -> None:
        self.path = path
        self.user = user
        self._lock = FileLock(str(path) + ".lock", timeout=self.LOCK_TIMEOUT)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"created": [], "users": [], "deployed": False}
        return data if isinstance(data, dict) else {"created": [], "users": [], "deployed": False}

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(self.path)

    @staticmethod
    def _alive(user: str) -> bool:
        pid = user.split("-", 1)[0]
        if not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def join(self, create: Callable[[], list[str]], deploy: Callable[[], None]) -> list[str]:
        """Join the pool: under the lock, *create* the missing clusters (it returns the keys
        it created) and *deploy* unless done already. Returns every key the pool created."""
        with self._lock:
            data = self._read()
            data["users"] = [u for u in data.get("users", []) if self._alive(u)]
            if not data["users"]:  # nobody left from an earlier run: its deploy is not ours
                data["deployed"] = False
            data["created"] = [*data.get("created", []), *create()]
            data["users"].append(self.user)
            self._write(data)  # before deploying: a failed deploy still leaves the created clusters known
            if not data["deployed"]:
                deploy()
                data["deployed"] = True
                self._write(data)
            return list(data["created"])

    def leave(self, teardown: Callable[[list[str]], None]) -> bool:
        """Leave the pool; the last user out runs *teardown(created)*. Returns whether it did."""
        with self._lock:
            data = self._read()
            users = [u for u in data.get("users", []) if u != self.user and self._alive(u)]
            if users:
                data["users"] = users
                self._write(data)
                return False
            teardown(list(data.get("created", [])))
            self.path.unlink(missing_ok=True)
            return True


# -- running -------------------------------------------------------------------------------------------
def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else text)[:300]


class CommandRunner:
    """Runs kind/docker argv lists; in dry-run prints and records them instead."""

    def __init__(self, *, dry_run: bool = False, out: TextIO | None = None, timeout: float = 900.0) -> None:
        self.dry_run = dry_run
        self.out = out
        self.timeout = timeout
        self.recorded: list[list[str]] = []

    def which(self, tool: str) -> str:
        """The tool's path. Raises TargetError (what to install) when it is not on PATH."""
        found = shutil.which(tool)
        if found is None:
            raise TargetError(missing_tools_message([tool]))
        return found

    def preflight(self, image: str | None = None) -> None:
        """kind and docker on PATH, the docker daemon reachable, and *image* built locally.

        Raises:
            TargetError: what is missing and what to do about it; nothing was created.
        """
        if self.dry_run:  # a dry run only prints the commands: it needs neither tool
            return
        missing = [t for t in ("kind", "docker") if shutil.which(t) is None]
        daemon = None
        if "docker" not in missing:
            try:
                self.run(docker_info_argv())
            except TargetError as exc:
                daemon = f"`docker info`: {_last_line(str(exc))}"
        if missing or daemon:
            raise TargetError(missing_tools_message(missing, daemon))
        if image is not None:
            try:
                self.run(image_inspect_argv(image))
            except TargetError as exc:
                raise TargetError(
                    f"image {image} is not in the local docker: build it first "
                    f"(`docker build -t {image} -f clusters/kind/Dockerfile .`)"
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


class KindTarget(ReferenceTiming):
    """A :class:`~gameday.interfaces.Target` on kind clusters ``gd-<region>`` and ``gd-global``.

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
        keep: bool = False,
    ) -> None:
        self.topology = kind_topology(topology)
        self.workdir = workdir
        self.image = image
        self.kind_dir = kind_dir or workdir / "kind"
        self.runner = runner or CommandRunner(dry_run=dry_run, out=out)
        if preflight:
            self.runner.preflight(image)
        self.keep = keep
        self._connected = False
        """``--gameday-keep-clusters``: :meth:`down` deletes nothing."""
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
    def from_settings(cls, topology: Topology, settings: Settings, workdir: Path) -> KindTarget | ProfileKubeTarget:
        """The registry's factory: tools are checked here, before anything is created. With
        ``--gameday-profile``: the team's own federation on its existing kind clusters (its
        ``kind-*`` contexts are the runner's own, so they are allowed as kind's always are)."""
        if settings.profile is not None:
            return ProfileKubeTarget.from_settings(_kind_profile_settings(settings), workdir, name="kind")
        return cls(topology, workdir, dry_run=settings.dry_run, keep=settings.keep_clusters)

    @classmethod
    def check(cls, topology: Topology, settings: Settings) -> None:
        """The session-start check (:mod:`gameday.targets.registry`): kind and docker on PATH,
        the docker daemon answering, the app image built; nothing is created. A dry run needs
        none of them.

        Raises:
            TargetError: one line naming every missing tool and what to install.
        """
        if settings.profile is not None:  # the team's clusters and image: only the tools and the clusters
            runner = CommandRunner(dry_run=settings.dry_run)
            runner.preflight(None)
            profiled = _kind_profile_settings(settings)
            ProfileKubeTarget.check(profiled, name="kind")
            if not settings.dry_run:
                have = runner.run(get_clusters_argv()).split()
                missing = sorted({c.removeprefix("kind-") for c in profiled.allow_context} - set(have))
                if missing:
                    raise TargetError(f"the profile's kind clusters {', '.join(missing)} do not exist (kind get "
                                      f"clusters: {', '.join(have) or 'none'}); with a profile the kind target drills "
                                      "clusters that exist, it creates none")
            return
        m.clusters(topology)  # a region called "global" is refused here
        CommandRunner(dry_run=settings.dry_run).preflight(o.APP_IMAGE)

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
        """Join the clusters' pool (shared with the other xdist workers): the first process
        creates the missing clusters (configs rendered from the topology; existing ones are
        reused by name), loads the image and deploys the federation, under the pool's lock;
        every process then connects to them."""
        self.write_configs()
        if self.runner.dry_run:
            self._create_missing()
            self.kube.up()
            return
        self.created = self.pool.join(self._create_missing, self._first_deploy)
        self._save_state()
        if not self._connected:
            self.kube.up()
            self._connected = True

    def _first_deploy(self) -> None:
        self.kube.up()
        self._connected = True
        self._deploy()

    def write_configs(self) -> None:
        """Render each cluster's kind config into ``kind_dir`` (the reviewed copies under
        clusters/kind/ come from the same function)."""
        self.kind_dir.mkdir(parents=True, exist_ok=True)
        for c in m.clusters(self.topology):
            (self.kind_dir / f"{c}.yaml").write_text(
                f.dump_yaml([f.kind_config(self.topology, c)]), encoding="utf-8"
            )

    def _create_missing(self) -> list[str]:
        existing = self.runner.run(get_clusters_argv()).split()
        made: list[str] = []
        for argv in plan_up(self.topology, existing, self.kind_dir):
            self.runner.run(argv)
            key = argv[argv.index("--config") + 1].rsplit("/", 1)[-1].removesuffix(".yaml")
            made.append(key)
            self.created.append(key)
            self._save_state()
        return made

    def _deploy(self) -> None:
        for argv in plan_load(self.topology, self.image):
            self.runner.run(argv)
        self.kube.deploy()

    def deploy(self) -> None:
        """Deployed in :meth:`up`, once per pool; a dry run prints the load and apply calls here."""
        if self.runner.dry_run:
            self._deploy()

    def down(self) -> None:
        """Leave the pool; the last one out deletes the clusters the pool created and, in reused
        ones, only the federation's namespace (nothing with ``--gameday-keep-clusters``)."""
        if self.runner.dry_run:
            self._teardown(self.created)
        else:
            self.pool.leave(self._teardown)
        self.created = []
        self._save_state()

    def _teardown(self, created: list[str]) -> None:
        if self.keep:
            log.info("--gameday-keep-clusters: leaving the kind clusters %s and the federation in them",
                     ", ".join(cluster_names(self.topology).values()))
            return
        reused = [c for c in m.clusters(self.topology) if c not in created]
        if reused:
            self.kube.delete_namespaces(reused)
        for argv in plan_down(created, cluster_names(self.topology)):
            self.runner.run(argv)

    @property
    def pool(self) -> ClusterPool:
        return ClusterPool(self.workdir.parent / "kind-pool.json", f"{os.getpid()}-{self.workdir.name}")

    def _save_state(self) -> None:
        if self.runner.dry_run:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "kind.json").write_text(json.dumps({"created": self.created}), encoding="utf-8")

    # -- delegated to the kube target ---------------------------------------------------------------------
    def drill_lock_key(self) -> str:
        """The kube target's key over the clusters' ``kind-gd-*`` contexts: every xdist worker
        of the pool (and any other run on those clusters, kind or kube) drills them in turn."""
        return self.kube.drill_lock_key()

    def manifests_dir(self) -> Path:
        """The reviewed copies of the manifests this target deploys (``clusters/manifests``; R11)."""
        return f.MANIFESTS_DIR

    def regions(self) -> list[RegionInfo]:
        return self.kube.regions()

    def endpoints(self) -> Endpoints:
        return self.kube.endpoints()

    def reference_endpoints(self) -> ReferenceEndpoints:
        """The reference app's URLs (:class:`~gameday.observers.reference.RunsReferenceApp`)."""
        return self.kube.reference_endpoints()

    def sources(self) -> Sources:
        return self.kube.sources()

    # -- the prediction's inputs (StatesTiming) ---------------------------------------------
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
