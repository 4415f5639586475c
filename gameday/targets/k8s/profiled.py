"""The kube and kind targets on a team's own federation, described by a profile (``--gameday-profile``).

The federation is the team's: nothing is deployed or deleted. It is observed exactly as the
``external`` target observes it (the profile's sources, DNS server and gateways: this class
delegates all reading to an :class:`~gameday.targets.external.ExternalTarget`), and broken
only with the profile's ``kubernetes:`` faults, each a Kubernetes operation with an exact
inverse (:mod:`gameday.targets.k8s.profile_plan`), on the profile's kubeconfig contexts,
every one of which must be allowed with ``--gameday-allow-context``.

``--gameday-dry-run`` prints every operation and its inverse and makes no API call. The
revert plan is recorded in the fault's ledger entry before the injection's API call, so
``gameday restore`` (through the registry, :meth:`attach`) runs exactly that inverse.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Self, TextIO

from gameday.errors import ConfigError, FaultError, GamedayError, TargetError
from gameday.faults import FAULTS, Fault
from gameday.interfaces import Endpoints, RegionInfo
from gameday.observers.sources import Sources
from gameday.runtime.settings import Settings
from gameday.targets.external import ExternalTarget
from gameday.targets.k8s import plan, rbac
from gameday.targets.k8s import profile_plan as pp
from gameday.targets.k8s.client import (
    API_ERRORS,
    ClientFactory,
    Clusters,
    brief,
    default_client_factory,
    probe_api_server,
)
from gameday.targets.k8s.plan import Op
from gameday.targets.profile import IsolateNamespace, LoadedProfile, PatchSelector, ScaleToZero, load_profile
from gameday.verdicts.predict import StatedTiming

log = logging.getLogger(__name__)


class ProfileKubeTarget:
    """A :class:`~gameday.interfaces.Target` for a profile's federation on its own clusters.

    Args:
        loaded: the validated profile; it must have a ``kubernetes:`` section.
        workdir: where the dry-run record and the command log go.
        allow: kubeconfig context globs that may be broken; every profile context must match.
        name: ``kube`` or ``kind`` (the registry name :meth:`attach` is found by).

    Raises:
        ConfigError: the profile has no ``kubernetes:`` section.
        TargetError: a context is not allow-listed.
    """

    def __init__(self, loaded: LoadedProfile, workdir: Path, *, allow: Sequence[str], dry_run: bool = False,
                 name: str = "kube", client_factory: ClientFactory | None = None, out: TextIO | None = None) -> None:
        k = loaded.profile.kubernetes
        if k is None:
            raise ConfigError(f"{loaded.path}: has no `kubernetes:` section; --gameday-target={name} with a profile "
                              "needs its clusters (contexts) and its faults as Kubernetes operations there (see the "
                              "docs/howto/kubernetes.md); or use --gameday-target=external",
                              source=str(loaded.path), field="kubernetes")
        plan.check_allowed(k.contexts, allow)
        self.name = name
        self.loaded = loaded
        self.profile = loaded.profile
        self._allowed: set[rbac.Permission] = set()
        self.contexts = dict(k.contexts)
        self.workdir = workdir
        self.allow = tuple(allow)
        self.dry_run = dry_run
        self.recorded: list[Op] = []
        """Every operation executed (or, in dry-run, only printed), in order."""
        self.external = ExternalTarget(loaded, workdir)
        self.timing = self.external.timing
        self._factory = client_factory or default_client_factory
        self._clusters: Clusters | None = None
        self._out = out

    # -- the registry's entry points ---------------------------------------------------------------
    @classmethod
    def from_settings(cls, settings: Settings, workdir: Path, *, name: str) -> Self:
        assert settings.profile is not None
        return cls(load_profile(settings.profile), workdir, allow=settings.allow_context, dry_run=settings.dry_run,
                   name=name)

    @classmethod
    def check(cls, settings: Settings, *, name: str, client_factory: ClientFactory = default_client_factory) -> None:
        """Session start: the profile's contexts allowed and (unless a dry run) every API server answering."""
        assert settings.profile is not None
        t = cls.from_settings(settings, Path(), name=name)
        if not settings.dry_run:
            for cluster, ctx in t.contexts.items():
                probe_api_server(cluster, ctx, client_factory)

    def ref(self) -> dict[str, Any]:
        """The external reference (profile path, hash, the profile as validated) plus the allow-list."""
        return {**self.external.ref(), "allow": list(self.allow), "dry_run": self.dry_run,
                "workdir": str(self.workdir), "name": self.name}

    @classmethod
    def attach(cls, ref: dict[str, Any]) -> Self:
        """Re-attach for ``gameday restore``; the recorded allow-list is checked again."""
        ext = ExternalTarget.attach(ref)
        return cls(ext.loaded, Path(str(ref.get("workdir", "."))), allow=ref.get("allow", ()),
                   dry_run=bool(ref.get("dry_run", False)), name=str(ref.get("name", "kube")))

    def drill_lock_key(self) -> str:
        """The profile's federation, as the external target names it
        (:meth:`~gameday.targets.external.ExternalTarget.drill_lock_key`): drills of it take
        turns whichever of kube, kind and external runs them."""
        return self.external.drill_lock_key()

    # -- lifecycle: the federation is the team's ---------------------------------------------------------
    def up(self) -> None:
        """Reach the federation (DNS, gateways) as the external target does. Reads only, so a
        dry run does it too (it makes no Kubernetes API call, but says truly whether a drill
        could start)."""
        self.external.up()

    def deploy(self) -> None:
        """Nothing to deploy: the federation runs already."""

    def down(self) -> None:
        """Nothing to delete: gameday did not create it."""

    # -- reading: exactly as the external target --------------------------------------------------------
    def manifests_dir(self) -> Path | None:
        """The profile's ``manifests`` directory, as on the external target (R11)."""
        return self.external.manifests_dir()

    def regions(self) -> list[RegionInfo]:
        return self.external.regions()

    def endpoints(self) -> Endpoints:
        return self.external.endpoints()

    def sources(self) -> Sources:
        return self.external.sources()

    def stated_timing(self, *, prefer_observed_ttl: bool = False) -> StatedTiming:
        """As the external target: the profile's ``timing:`` and the TTL the DNS server answers with."""
        return self.external.stated_timing(prefer_observed_ttl=prefer_observed_ttl)

    def timing_contradiction(self) -> str | None:
        return self.external.timing_contradiction()

    def check_health(self, timeout: float) -> None:
        self.external.check_health(timeout)  # DNS and gateways only: no API call, also in a dry run

    def alarm_lines(self) -> Iterator[tuple[str, str]]:
        return iter(())

    # -- faults ------------------------------------------------------------------------------------------
    def faults(self) -> Mapping[str, Fault]:
        """The profile's Kubernetes faults (a known name keeps its meaning, takes no parameters)."""
        k = self.profile.kubernetes
        assert k is not None
        out: dict[str, Fault] = {}
        for region, table in [(None, k.faults), *k.regions.items()]:
            for fname, spec in table.items():
                known = FAULTS.get(fname)
                if fname in out:
                    continue
                if known is not None:
                    out[fname] = dataclasses.replace(known, params=())
                else:
                    out[fname] = Fault(name=fname, needs_region=region is not None,
                                       takes_region_out=bool(spec.takes_region_out),
                                       description=f"the profile's Kubernetes operation: {_what(spec.action)}")
        return out

    def _locate(self, kind: str, region: str | None, params: Mapping[str, Any]) -> pp.Located:
        extra = sorted(set(params) - {pp.REVERT_KEY})
        if extra:
            raise ConfigError(f"fault {kind}: a profile's Kubernetes faults take no parameters, got {extra}; "
                              "nothing was injected")
        return pp.locate(self.profile, kind, region, str(self.loaded.path))

    def plan_fault(self, kind: str, region: str | None, params: dict[str, Any]) -> tuple[str, str]:
        """The operations :meth:`inject` and :meth:`revert` would make, making no API call."""
        inject, revert = pp.plan_inject(self._locate(kind, region, params), pp.Observed())
        return self._say(inject), self._say(revert)

    def missing_permissions(self, kind: str, region: str | None, params: dict[str, Any]) -> list[str]:
        """What the credentials lack for the fault and its inverse (SelfSubjectAccessReview per
        permission, :mod:`gameday.targets.k8s.rbac`); each context's answer is asked once per run."""
        inject, revert = pp.plan_inject(self._locate(kind, region, params), pp.Observed())
        return rbac.missing_once(rbac.needed(inject, revert), self.clusters.access_review, self._allowed,
                                 self.contexts)

    def _say(self, ops: list[Op]) -> str:
        return "; ".join(f"{op.describe()} (context {self.contexts[op.cluster]})" for op in ops)

    def inject(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        """Read what the inverse needs, record the inverse in *params*, then inject.

        Raises:
            ConfigError: no such fault in the profile (nothing touched).
            FaultError: reading the state or the operation failed (the recorded inverse,
                idempotent, is what the drill then runs).
        """
        loc = self._locate(kind, region, params)
        observed = pp.Observed() if self.dry_run else self._observe(loc)
        inject, revert = pp.plan_inject(loc, observed)
        params[pp.REVERT_KEY] = pp.ops_to_json(revert)
        self._run(inject)

    def revert(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        """Run the inverse recorded at injection (or, when it was lost, what needs no record).

        Raises:
            FaultError: an operation failed, or the record needed for the exact inverse was lost.
        """
        if pp.REVERT_KEY in params:
            ops = pp.ops_from_json(params[pp.REVERT_KEY])
        else:
            ops = pp.plan_revert_unrecorded(pp.locate(self.profile, kind, region, str(self.loaded.path)))
        self._run(ops)

    def _observe(self, loc: pp.Located) -> pp.Observed:
        a = loc.fault.action
        try:
            if isinstance(a, ScaleToZero):
                return pp.Observed(replicas=self.clusters.read_replicas(loc.cluster, a.kind, a.name, a.namespace))
            if isinstance(a, PatchSelector):
                return pp.Observed(selector=self.clusters.read_service_selector(loc.cluster, a.namespace, a.service))
        except (*API_ERRORS, TargetError) as exc:
            raise FaultError(f"{loc.name} {loc.region or ''}: reading the current state in context "
                             f"{self.contexts[loc.cluster]!r} failed, nothing was injected: "
                             f"{brief(exc)}") from exc
        return pp.Observed()

    @property
    def clusters(self) -> Clusters:
        if self._clusters is None:
            self._clusters = Clusters(self.profile.as_topology(), self.contexts, self._factory)
        return self._clusters

    def _run(self, ops: list[Op]) -> None:
        for op in ops:
            self.recorded.append(op)
            if self.dry_run:
                line = f"gameday dry-run: {op.describe()} (context {self.contexts[op.cluster]})"
                log.info("%s", line)
                (self._out or sys.stderr).write(line + "\n")
                continue
            log.info("%s (context %s)", op.describe(), self.contexts[op.cluster])
            try:
                self.clusters.execute(op)
            except (*API_ERRORS, GamedayError) as exc:
                raise FaultError(f"{op.describe()} in context {self.contexts[op.cluster]!r} failed: "
                                 f"{brief(exc)}") from exc


def _what(a: ScaleToZero | IsolateNamespace | PatchSelector) -> str:
    if isinstance(a, ScaleToZero):
        return f"scale {a.kind} {a.namespace}/{a.name} to 0 and back"
    if isinstance(a, IsolateNamespace):
        return f"isolate namespace {a.namespace} with a NetworkPolicy, then delete it"
    return f"point Service {a.namespace}/{a.service} at {a.selector}, then back"
