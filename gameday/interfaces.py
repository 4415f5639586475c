"""The target interface: where a federation runs and how the harness reaches and breaks it.

A target is anything that implements :class:`Target`: what *every* target must do (come
up, deploy, go down, say its regions and endpoints, check its health, inject and revert a
fault, and give the reference ``gameday restore`` re-attaches from). ``local`` (embedded
processes), ``kind`` (one kind cluster per region) and ``kube`` (existing kubeconfig
contexts) implement it, and a plugin adds more (:mod:`gameday.plugin.hooks`); the drill, the
observers and the load generator only ever see this interface, the :class:`Endpoints` it
returns (how a client reaches the federation) and its
:class:`~gameday.observers.sources.Sources` (how it is observed).

What only some targets can do is an optional capability, a small runtime-checkable
protocol tested with ``isinstance``: :class:`Liveness` (the drill's watcher names a
component that dies mid-drill; ``local`` has it, from its pids), :class:`Reconcilable`
(R3), :class:`Releasable` (R12), :class:`HasAlarmLines` (R6, and the drill's alarm
count), :class:`FaultPlanner` (dry runs in words), :class:`RecordsCalls` (dry runs as the calls
a target would make), :class:`StatesTiming` (the prediction's inputs), :class:`HasFaults` (faults of its
own, looked up before the built-in table), :class:`HasManifests` (R11),
:class:`HasSoftware` (the report's environment), :class:`SharedFederation` (other
processes drill the same federation: the drill serialises on its key). A suite test that
needs one skips, saying why, on a target without it (:func:`gameday.conformance.capabilities.require`).
A target that runs the reference app also gives its URLs
(:class:`~gameday.observers.reference.RunsReferenceApp`), which only the conformance suite reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from gameday.faults.model import Fault
    from gameday.observers.sources import Sources
    from gameday.verdicts.predict import StatedTiming

# The federation's plain data lives in gameday.model.parts (below the observers and the load that
# read it); re-exported here, the seam's home.
from gameday.model.parts import LOAD_ROLE, SUPERVISOR_ROLE, ClientRoute, ComponentState, Endpoints, RegionInfo

__all__ = [
    "CAPABILITIES",
    "LOAD_ROLE",
    "SUPERVISOR_ROLE",
    "ChecksPermissions",
    "ClientRoute",
    "ComponentState",
    "Endpoints",
    "FaultPlanner",
    "HasAlarmLines",
    "HasFaults",
    "HasManifests",
    "HasSoftware",
    "HasStatePrimary",
    "Liveness",
    "Reattachable",
    "Reconcilable",
    "RecordsCalls",
    "RegionInfo",
    "Releasable",
    "ReleaseMechanism",
    "SharedFederation",
    "StatesTiming",
    "Target",
    "liveness_of",
]


@runtime_checkable
class Liveness(Protocol):
    """An optional target capability: which components run, from the target's own truth
    (local: the pids it started; a cluster: pod and Deployment status).

    A target without it is still drilled; the drill then says liveness is not observed
    and a dead component shows only as what it breaks (an entry node that stops answering).
    """

    def liveness(self) -> list[ComponentState]:
        """Every component, alive or not, now. Cheap: the observer calls it at 10 Hz."""

    def stopped_by(self, kind: str, region: str | None) -> frozenset[str]:
        """Names of the components fault *kind* (on *region*) stops on purpose while it is in
        effect: they are expected dead, not casualties (local ``gateway_down b``: ``gateway-b``)."""


def liveness_of(target: object) -> Liveness | None:
    """*target*'s liveness capability, or None when it has none."""
    return target if isinstance(target, Liveness) else None


@runtime_checkable
class Target(Protocol):
    """A place a federation runs. Methods raise :class:`gameday.errors.TargetError` subclasses."""

    name: str

    def up(self) -> None:
        """Create or connect to the clusters (local: start the processes)."""

    def deploy(self) -> None:
        """Deploy the federated app and wait until it serves."""

    def down(self) -> None:
        """Tear down what :meth:`up` and :meth:`deploy` created. Idempotent."""

    def regions(self) -> list[RegionInfo]:
        """The regions, in topology order."""

    def endpoints(self) -> Endpoints:
        """How a client reaches the federation (the load generator's DNS server, name and route)."""

    def sources(self) -> Sources:
        """What the drill's observer reads, as :mod:`gameday.observers.sources` (entry nodes,
        DNS, the control plane's version and alarms where the federation exposes them).
        Called once per drill; alarm sources made here count alarms raised from then on."""

    def check_health(self, timeout: float) -> None:
        """Raise :class:`gameday.errors.TargetUnreachable` unless the federation is healthy."""

    def inject(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        """Inject fault *kind* of :data:`gameday.faults.FAULTS` (already checked by the drill);
        record in *params* what :meth:`revert` needs (the ledger keeps it)."""

    def revert(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        """Exactly undo :meth:`inject` with the same arguments. Idempotent."""

    def ref(self) -> dict[str, Any]:
        """How ``gameday restore`` re-attaches to this target (written to the ledger): the
        argument of the target's ``attach`` (see :mod:`gameday.targets.registry`)."""


# -- optional capabilities: what some targets can do, checked with isinstance -----------------
@runtime_checkable
class Reconcilable(Protocol):
    """A target that can run the control plane's slow full reconciliation pass on demand (R3)."""

    def reconcile(self) -> dict[str, Any]:
        """Run the control plane's slow full reconciliation pass now (R3), as its periodic
        timer would, and return its report (``{"full": True, "replied": [...], "missing":
        [...], "version": int, ...}``). Changes nothing by itself: it only folds the regions'
        current slow state (labels, quotas) into the global snapshot.
        Local: ``POST /admin/reconcile`` on the control plane."""


@runtime_checkable
class Releasable(Protocol):
    """A target that can release the app region by region (R12)."""

    def release_plan(self) -> list[str]:
        """The order in which a release updates the regions (R12): a standby region first,
        the primary last. Local: :func:`gameday.model.release.plan_release` over the topology;
        kind/kube: the order their rollout really uses."""

    def rollout_region(self, region: str) -> None:
        """Roll the app of *region* (one release step): replace its instances one at a
        time, each ready before the next, and return when all are ready again.
        Local: restart the app processes; kind/kube: a rollout restart of the region's app
        Deployment, waiting for ``rollout status``. Raises :class:`gameday.errors.TargetError`
        if an instance does not come back ready."""


@runtime_checkable
class ReleaseMechanism(Protocol):
    """A federation with a release mechanism of its own (R12): gameday asks it to release a
    version and judges only what it observes, each instance's served version over time."""

    def start_release(self, version: str) -> None:
        """Ask the federation's own release mechanism to roll out app *version*; returns as soon
        as it has accepted (the rollout goes on). Local: the control plane's release
        controller (``POST /admin/release``). Raises :class:`gameday.errors.TargetError` if it
        refused."""


@runtime_checkable
class ChecksPermissions(Protocol):
    """A target whose credentials may not allow every operation (kind/kube): asked before each
    injection, so that a fault whose exact inverse could not be carried out is never injected."""

    def missing_permissions(self, kind: str, region: str | None, params: dict[str, Any]) -> list[str]:
        """Each permission the fault *kind* on *region* or its inverse needs that the current
        credentials lack, in words (empty: it may inject and revert). Asks the target (an
        access review per permission), changes nothing."""


@runtime_checkable
class HasAlarmLines(Protocol):
    """A target that reads its entry nodes' logs (the stale-snapshot alarms, R6)."""

    def alarm_lines(self) -> Iterator[tuple[str, str]]:
        """New log lines of the entry nodes since the last call, as ``(node, line)``."""


@runtime_checkable
class FaultPlanner(Protocol):
    """A target that can say what a fault would do without doing it (``--gameday-dry-run``)."""

    def plan_fault(self, kind: str, region: str | None, params: dict[str, Any]) -> tuple[str, str]:
        """``(what inject does, what its exact inverse does)`` in words; nothing is touched."""


@runtime_checkable
class Reattachable(Protocol):
    """A target that ``gameday restore`` can re-attach to after a killed run, from the reference
    (:meth:`Target.ref`) the ledger keeps; the built-in targets are, and a plugin's target is
    when its class has this classmethod (the ledger then names its import path)."""

    @classmethod
    def attach(cls, ref: dict[str, Any]) -> Target:
        """The target *ref* describes, re-attached to its running federation (nothing is started)."""


@runtime_checkable
class RecordsCalls(Protocol):
    """A target that can run in a dry-run mode of its own, in which inject and revert record and
    print every call they would make and make none (kind and kube against the API server)."""

    @property
    def dry_run(self) -> bool:
        """True: this target makes no call; its inject and revert only record and print them."""


@runtime_checkable
class HasFaults(Protocol):
    """A target that brings faults of its own (e.g. the commands of a federation profile):
    the drill looks a fault up here first, then in :data:`gameday.faults.FAULTS`."""

    def faults(self) -> Mapping[str, Fault]:
        """Fault name -> its facts, for the faults this target adds (or redefines)."""


@runtime_checkable
class HasManifests(Protocol):
    """A target whose federation is deployed from Kubernetes manifests the harness can read (R11)."""

    def manifests_dir(self) -> Path | None:
        """The directory of the YAML manifests the federation is deployed from (every
        ``*.yaml`` under it), or None where the target knows of none. Local, kind and kube:
        the reference app's shipped manifests; external: the profile's ``manifests``."""


@runtime_checkable
class HasSoftware(Protocol):
    """A target that can name the third-party software its federation runs (the report's
    environment: a reviewer checks the run used what they think)."""

    def software(self) -> Mapping[str, str]:
        """Program -> version, e.g. ``{"nats-server": "v2.10.22"}``; a version that cannot be
        found is a reason in words (``"unknown (FileNotFoundError)"``), never an exception."""


@runtime_checkable
class HasStatePrimary(Protocol):
    """A target whose federation has a state layer (DESIGN.md section 9) and can say where its
    primary is: the region whose store node holds the data's leader (a Raft stream's leader,
    a primary database). The state drills (``store_down`` of the primary) read it."""

    def state_primary(self) -> str:
        """The region whose store node leads the data now.

        Raises:
            TargetError: no state layer, or the store does not say.
        """


@runtime_checkable
class SharedFederation(Protocol):
    """A target whose federation other processes may drill at the same time: the xdist
    workers of a kind run (one pool of clusters), engineers' runs on one staging context, the
    runs of a profile (one real federation).

    The drill holds the drill lock (:mod:`gameday.runtime.drill_lock`) on :meth:`drill_lock_key`
    from the steady state before its outermost fault until that fault is restored, so no
    drill measures another's fault and no restore undoes another's fault mid-drill. A target
    each process owns alone (``local``: every xdist worker starts its own) does not have it;
    nor need a plugin's target, unless its federation is shared: implementing the method is
    the whole opt-in.

    The lock serialises the processes of one machine (a file lock); see
    :mod:`gameday.runtime.drill_lock` for runs on several machines.
    """

    def drill_lock_key(self) -> str:
        """The federation's identity: the same string in every process that drills this
        federation, a different one for a different federation (not empty). kind and kube:
        ``k8s:<context>/<namespace>,...``; a profile: ``federation:<fqdn>@<dns server>``.
        Cheap and offline (called before anything is reached)."""


@runtime_checkable
class RunsOnThisMachine(Protocol):
    """A target whose federation runs on the harness's own machine (``local``): its processes
    and the observer share the CPUs. Drills of such targets take turns in a few machine-wide
    slots (:mod:`gameday.runtime.drill_slots`, ``--gameday-local-drill-slots``) from the steady
    state before the outermost fault until it is restored, so that parallel drills (``pytest -n``,
    two terminals) do not starve each other's federations and observers."""

    def runs_on_this_machine(self) -> bool:
        """True where the federation's processes run here (cheap, offline)."""


@runtime_checkable
class StatesTiming(Protocol):
    """A target that can say how fast its federation is configured to fail over: the inputs
    of the drill's prediction (:mod:`gameday.verdicts.predict`, DESIGN.md §8)."""

    def stated_timing(self, *, prefer_observed_ttl: bool = False) -> StatedTiming:
        """Probe interval, timeout, fall, DNS TTL and propagation as the federation's
        description states them (None where it does not). A target that reads the TTL from the
        DNS server's answers (external) returns the one seen by its last :meth:`Target.check_health`
        where the profile states none, or where *prefer_observed_ttl* and the two differ."""

    def timing_contradiction(self) -> str | None:
        """A stated timing the federation visibly contradicts (the TTL in its answers), named
        with the file and field; None: none seen. Asked after :meth:`Target.check_health`."""


CAPABILITIES: dict[type, str] = {
    Reconcilable: "reconcile",
    Releasable: "release region by region",
    ReleaseMechanism: "release through a release mechanism of its own",
    ChecksPermissions: "check its credentials' permissions before a fault",
    HasAlarmLines: "read its entry nodes' alarm lines",
    Liveness: "tell which components run",
    FaultPlanner: "plan a fault without injecting it",
    RecordsCalls: "record its calls without making them (its own dry-run mode)",
    Reattachable: "be re-attached to by `gameday restore` after a killed run",
    HasFaults: "bring faults of its own",
    HasManifests: "name the Kubernetes manifests it deploys",
    HasSoftware: "name the software its federation runs",
    StatesTiming: "state its failover timing (the prediction's inputs)",
    HasStatePrimary: "say which region's store node leads the data (a state layer)",
}
"""Each optional capability and what a target without it cannot do (for skip reasons)."""
