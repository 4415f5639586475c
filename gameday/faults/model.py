"""What a fault is: a small object of facts, and the table a drill looks faults up in.

A :class:`Fault` says what a fault *means*, whatever the target: whether it needs a
region, which parameters it takes (and their defaults), whether it takes its region out of
service (switchover is then measured), whether it cuts the region off entirely (its proxy
is stale for real), and which components it stops on purpose (the watcher must not call
them casualties). *How* a target does it is the target's own table, keyed by the same
name: one action per fault with its exact inverse (:class:`Action`; the local target's in
:mod:`gameday.targets.local.faults`, the kind/kube plans in :mod:`gameday.targets.k8s.plan`).

A conftest or plugin adds a fault without touching gameday::

    from gameday.faults import FAULTS, Fault
    from gameday.targets.local.faults import LOCAL_ACTIONS, Readyz, region_agent

    FAULTS.add(Fault(name="agent_unready", needs_region=True,
                     description="the region agent's /readyz fails until reverted"))
    LOCAL_ACTIONS.register("agent_unready", Readyz(region_agent))

and a suite then says ``drill.fault("agent_unready", region)`` as for a built-in one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from gameday.errors import ConfigError
from gameday.model.tables import Table
from gameday.runtime.userinput import shown

REQUIRED: Any = object()
"""The default of a :class:`Param` the caller must give."""


@dataclass(frozen=True)
class Param:
    """One parameter a fault takes: ``Param("seconds", 0.0)`` or ``Param("labels")`` (required)."""

    name: str
    default: Any = REQUIRED

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True, kw_only=True)
class Fault:
    """The facts of one fault, the same on every target.

    Component names use the harness's names (``gateway-{region}``, ``controlplane``,
    ``nats``), ``{region}`` filled in by :meth:`stopped`.
    """

    name: str
    description: str
    """One line for ``--help``-like listings and error messages."""
    needs_region: bool
    params: tuple[Param, ...] = ()
    takes_region_out: bool = False
    """Removes its region from service: switchover is measured, N-1 capacity is checked."""
    cuts_off_region: bool = False
    """Isolates every process of its region (its proxy goes stale for real, R6)."""
    stops: tuple[str, ...] = ()
    """Components the fault stops on purpose while in effect (expected dead, not casualties)."""
    hits_instances: bool = False
    """Acts on the region's app instances (an instance outage): in the regional control-plane
    layout (R14) the version verdict reads the region's own control plane."""
    gateway_check_fails: Literal["at once", "at the timeout"] | None = None
    """How a health check of the region's gateway fails while the fault is in effect: ``at once``
    (a refused connection, a 503) or ``at the timeout`` (a hung gateway). The prediction of
    :mod:`gameday.verdicts.predict` needs it; None: the fault is not detected by the gateway's
    health checks alone, and its vs-prediction verdicts are n/a."""

    store_node: Literal["stopped", "frozen"] | None = None
    """What the fault does to a store node of the state layer (DESIGN.md section 9): ``stopped``
    (killed: its clients' connections break at once) or ``frozen`` (alive, answering nothing: its
    clients find out from their pings). Its region's node, or for a fault with no region one
    that does not lead the data. None: it leaves every store node. The write-recovery prediction
    needs it."""

    def stopped(self, region: str | None) -> frozenset[str]:
        """:attr:`stops` with ``{region}`` filled in."""
        return frozenset(s.format(region=region) for s in self.stops)

    def describe(self) -> str:
        """``gateway_down REGION: the region's gateway process is stopped ...``."""
        args = " REGION" if self.needs_region else ""
        args += "".join(f" {p.name}=..." if p.required else f" [{p.name}={p.default!r}]" for p in self.params)
        return f"{self.name}{args}: {self.description}"

    def value(self, params: Mapping[str, Any], name: str) -> Any:
        """Parameter *name* as given, or its default.

        Raises:
            ConfigError: a required parameter is missing.
        """
        spec = next((p for p in self.params if p.name == name), None)
        if spec is None:
            raise ConfigError(f"fault {shown(self.name)} has no parameter {shown(name)}")
        if name in params:
            return params[name]
        if spec.required:
            raise ConfigError(f"fault {shown(self.name)} needs the parameter {shown(name)}")
        return spec.default


@dataclass(frozen=True)
class FaultCall:
    """One use of a fault: which, where, with what. *params* is the drill's dict: an action
    records in it what its revert needs (``previous``, ``replicas``), and the ledger keeps it."""

    fault: Fault
    region: str | None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.fault.name

    def value(self, name: str) -> Any:
        return self.fault.value(self.params, name)

    def need_region(self) -> str:
        if self.region is None:
            raise ConfigError(f"fault {shown(self.name)} needs a region")
        return self.region


Ctx_contra = TypeVar("Ctx_contra", contravariant=True)


class Action(Protocol[Ctx_contra]):
    """How one target does one fault: inject plus its exact inverse (a seam of two methods,
    as httpx's transports are ``handle_request`` plus ``close``), and both in words for the
    dry run. *ctx* is what the target hands its actions (local: the federation).
    """

    def inject(self, ctx: Ctx_contra, call: FaultCall) -> None:
        """Put the fault in effect; record in ``call.params`` what :meth:`revert` needs."""

    def revert(self, ctx: Ctx_contra, call: FaultCall) -> None:
        """Exactly undo :meth:`inject` (same call). Idempotent: safe after a partial
        injection, twice, or from ``gameday restore`` after the runner was killed."""

    def plan(self, ctx: Ctx_contra, call: FaultCall) -> tuple[str, str]:
        """``(what inject does, what revert does)`` in words, doing nothing."""


class FaultTable(Table[Fault]):
    """The faults a drill may inject, by name."""

    def __init__(self, faults: tuple[Fault, ...] = ()) -> None:
        super().__init__("fault", {f.name: f for f in faults})

    def extended(self, extra: Mapping[str, Fault]) -> FaultTable:
        """A new table: this one's faults, with *extra*'s added (and winning on a name)."""
        merged = FaultTable(tuple(self.values()))
        for fault in extra.values():
            merged.add(fault, replace=True)
        return merged

    def add(self, fault: Fault, *, replace: bool = False) -> Fault:
        """Register *fault* under its own name."""
        return self.register(fault.name, fault, replace=replace)

    def check(self, kind: str, region: str | None, params: Mapping[str, object], regions: list[str]) -> Fault:
        """Validate a fault request before anything is injected.

        Raises:
            ConfigError: unknown kind, missing/extra region, unknown region, unknown or
                missing parameter.
        """
        fk = self.get(kind)
        if fk is None:
            raise ConfigError(f"fault {shown(kind)}: unknown; expected one of {', '.join(self.names())}")
        if fk.needs_region and region is None:
            raise ConfigError(f"fault {shown(kind)} needs a region (one of {', '.join(regions)})")
        if not fk.needs_region and region is not None:
            raise ConfigError(f"fault {shown(kind)} takes no region, got {shown(region)}")
        if region is not None and region not in regions:
            raise ConfigError(f"fault {shown(kind)}: region {shown(region)} not in the topology ({', '.join(regions)})")
        names = [p.name for p in fk.params]
        unknown = set(params) - set(names)
        if unknown:
            raise ConfigError(f"fault {shown(kind)}: unknown parameter(s) {shown(sorted(unknown))}; "
                              f"expected {names}")
        missing = [p.name for p in fk.params if p.required and p.name not in params]
        if missing:
            raise ConfigError(f"fault {shown(kind)} needs the parameter(s) {shown(missing)}")
        return fk
