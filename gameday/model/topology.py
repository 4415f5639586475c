"""The federation topology: what regions exist, their weights, capacities and timings.

A topology is a YAML file (``clusters/local.yaml`` is the default), read defensively
(:mod:`gameday.runtime.userinput`: bounded size, UTF-8, one document, no duplicate keys, no
alias bombs) and validated into frozen pydantic models. Numbers are strict (``true`` is
not 1) and finite; a topology has at least 2 regions of at least 2 instances, a
heartbeat faster than the region timeout and a DNS TTL of at most :data:`MAX_DNS_TTL`.
Every error names the file, the field, the value (shortened) and what was expected::

    clusters/bad.yaml: regions[1].weight: got -5, expected a finite number > 0 and <= 1000

Units are in the field names' docstrings: seconds for times, requests/s for rates.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from gameday.errors import ConfigError
from gameday.model.base import StrictModel
from gameday.runtime.resources import clusters_dir
from gameday.runtime.userinput import load_yaml, read_text_file, shown

#: Key of the global tier's cluster in :attr:`Topology.contexts` (not a region name).
GLOBAL_CLUSTER = "global"

#: The topology used when none is given.
DEFAULT_TOPOLOGY = clusters_dir() / "local.yaml"

_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")
_ZONE = re.compile(r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


MAX_DNS_TTL = 60
"""Seconds. Clients may keep a failed region's address for up to one TTL after the GSLB
stops answering it (resolver caches can add to that), so the TTL is spent out of the
switchover budget: 60 s is a third of the 180 s switchover limit, leaving the rest for
detection and the sync chain; failover GSLBs commonly answer with 30-60 s."""

StrictInt = Annotated[int, Field(strict=True)]
"""An integer that is not a bool (YAML ``true`` would otherwise count as 1)."""


class Timing(StrictModel):
    """Timings of the federation's sync chain. All values are seconds unless noted."""

    probe_interval: float = Field(1.0, gt=0, le=60, strict=True)
    """Agent and GSLB health-probe period. 1 s is the production default; the local
    topology lowers it so drills are short."""
    probe_timeout: float = Field(0.25, gt=0, le=10, strict=True)
    """A probe that has not answered within this is a failure (hung gateway)."""
    fall: int = Field(3, ge=1, le=100, strict=True)
    """Consecutive failed probes before an instance or gateway is removed (R2: 3)."""
    rise: int = Field(2, ge=1, le=100, strict=True)
    """Consecutive successful probes before re-admission (R2)."""
    heartbeat_interval: float = Field(1.0, gt=0, le=60, strict=True)
    """Agents' heartbeat period and the control plane's version re-broadcast period."""
    region_timeout: float = Field(3.0, gt=0, le=600, strict=True)
    """A region whose agent has not been heard for this long is marked not alive."""
    stale_after: float = Field(10.0, gt=0, le=3600, strict=True)
    """A proxy lagging the broadcast, or hearing none, for this long raises the alarm (R6)."""
    reconcile_interval: float = Field(300.0, gt=0, le=86400, strict=True)
    """Period of the slow full reconciliation of quotas and labels (R3: 5 minutes)."""
    dns_ttl: int = Field(5, ge=0, le=MAX_DNS_TTL, strict=True,
                         description="clients may keep a failed region's address for one TTL: "
                         "at most a third of the 180 s switchover limit")
    """TTL in seconds of the GSLB's answers for the service name (see :data:`MAX_DNS_TTL`)."""
    ramp_seconds: float = Field(10.0, ge=0, le=3600, strict=True)
    """A re-admitted region's DNS weight ramps linearly from 0 to full over this (R10)."""
    request_budget: float = Field(0.5, gt=0, le=30, strict=True)
    """Total time a gateway may spend on one request including its one retry (R7)."""
    gslb_delay: float = Field(0.0, ge=0, le=60, strict=True)
    """The reference GSLB applies its health decisions to its answers in batches, every this many
    seconds (0: at once), as GSLBs that push a zone or poll their health state do: a decision
    reaches the answers up to this late. It is stated, so the prediction of DNS convergence adds
    it (unlike the ``gslb_answer_lag`` defect, which the prediction does not know of)."""

    @model_validator(mode="after")
    def _timings_fit_together(self) -> Timing:
        # Messages start with the field's name: the formatter puts "timing." in front.
        if self.probe_timeout > self.probe_interval * 5:
            raise ValueError(
                f"probe_timeout: got {self.probe_timeout:g} s, expected at most 5 x probe_interval "
                f"({self.probe_interval:g} s); probes would pile up"
            )
        if self.heartbeat_interval >= self.region_timeout:
            raise ValueError(
                f"heartbeat_interval: got {self.heartbeat_interval:g} s, expected less than region_timeout "
                f"({self.region_timeout:g} s): a region not heard for region_timeout is declared dead, so "
                "healthy regions would be declared dead between heartbeats"
            )
        if self.stale_after <= self.heartbeat_interval:
            raise ValueError(
                f"stale_after: got {self.stale_after:g} s, expected more than heartbeat_interval "
                f"({self.heartbeat_interval:g} s): the version is re-broadcast once per heartbeat, so every proxy "
                "would raise the stale-snapshot alarm between two broadcasts"
            )
        return self


SYNC_CHAIN = 0.1
"""Seconds, at most, the reference federation's sync chain takes from an agent's health
decision to every entry node's route, without ``broadcast_delay``: event on JetStream,
control-plane commit (KV compare-and-set), version broadcast, diff pull. Measured p99 25 ms
at 3 regions and 136 ms at 30 (bench/README.md, "propagation"); 0.1 s states the
3-region case with room for a busy machine (the slack of the vs-prediction verdict covers
the rest)."""

REGIONAL_ABOVE = 10
"""Regions above which the control plane is split per region by default (R14: article 000's
large-scale layout, "more than 10 clusters")."""

Layout = Literal["global", "regional"]


class ControlPlane(StrictModel):
    """How the federation control plane keeps its state, and how it is laid out."""

    layout: Layout | None = None
    """``global``: one control plane for the whole federation (one snapshot, one version).
    ``regional`` (R14): one control plane per region keeping that region's instance health
    in a regional snapshot of its own, plus the global tier for what changes global routing
    (gateway health, region liveness and weights). ``None`` (not set): ``regional`` above
    :data:`REGIONAL_ABOVE` regions, ``global`` otherwise; see :attr:`Topology.layout`."""

    state: Literal["durable", "ephemeral"] = "durable"
    """``durable`` keeps the snapshot in JetStream KV (survives restarts); ``ephemeral``
    keeps it in memory only, a real misconfiguration the negative controls use."""
    broadcast_delay: float = Field(0.0, ge=0, le=3600, strict=True)
    """Seconds each version broadcast is held back (the calibrated sync delay)."""

    @property
    def propagation(self) -> float:
        """Seconds from an agent's health decision to every entry node, at most:
        ``broadcast_delay`` + :data:`SYNC_CHAIN`."""
        return self.broadcast_delay + SYNC_CHAIN


class Defects(StrictModel):
    """Deliberate misconfigurations, for negative controls: a federation that is broken on
    purpose so a verdict can be shown to fail. Never set these for a real drill."""

    proxy_never_refresh: list[str] = Field(default_factory=list)
    """Regions whose proxy hears broadcasts but never pulls the diff (stale snapshot)."""
    gateway_no_fallback: list[str] = Field(default_factory=list)
    """Regions whose gateway has local fallback disabled (R7 broken)."""
    gslb_ignore_weights: bool = Field(False, strict=True)
    """The GSLB answers uniformly instead of by weight (R8 broken)."""
    probe_interval_factor: float = Field(1.0, ge=1, le=100, strict=True)
    """The GSLB and the agents really probe every ``factor x timing.probe_interval``: a
    federation slower than its topology states (the vs-prediction verdicts broken)."""
    gslb_answer_lag: float = Field(0.0, ge=0, le=600, strict=True)
    """Seconds the GSLB keeps answering with a region after its own health state took the
    region out (a GSLB slower than its health checks; the DNS vs-prediction verdict broken)."""
    consumers_per_region: bool = Field(False, strict=True)
    """Each region's background workers consume the task queue through a consumer of their
    own and record what they process without a claim: every region processes every task (the
    duplicates verdict broken)."""
    unfenced_old_primary: bool = Field(False, strict=True)
    """``async`` replication: an old primary that comes back after a promotion is never fenced
    (its stream keeps taking writes), and its region's apps keep writing to it at the old
    epoch, their connection pool pointing there: split brain (the fencing verdict broken)."""
    reads_from_local_replica: bool = Field(False, strict=True)
    """``async`` replication: an app instance serves a read by id (``GET /data/<id>``) from its own
    region's copy of the data, which trails the primary by the replication lag, instead of from
    the primary: a client that wrote through one region and reads through another does not find
    what it was just told is stored (the stale-reads verdict broken; the read-back the RPO is
    judged on still reads the primary)."""
    slow_promotion: float = Field(0.0, ge=0, le=60, strict=True)
    """``async`` replication: seconds the store controller waits, once it has declared the primary
    failed, before it promotes a standby (a manual approval step, a fencing timeout nobody stated):
    writes are refused that much longer than the stated timing predicts (the write-recovery
    vs-prediction verdict broken; nothing is lost)."""
    store_unreplicated: bool = Field(False, strict=True)
    """The store keeps the data in one replica, in memory, on the primary region's node,
    whatever ``state.replication`` states: it acknowledges writes no other node holds (the
    RPO verdict broken)."""
    gateway_needs_sync: list[str] = Field(default_factory=list)
    """Regions whose gateway refuses to route clients' requests (503) once it has heard no
    broadcast for four heartbeat periods: the clients' traffic coupled to the control plane and
    the bus (R1 broken on the north-south path: the error-ratio verdict of the control-plane and
    bus drills broken)."""
    proxy_needs_sync: list[str] = Field(default_factory=list)
    """Regions whose proxy refuses to route (503) once it has heard no broadcast for two
    heartbeat periods: traffic coupled to the control plane and the bus (R1 broken)."""
    proxy_full_pulls: list[str] = Field(default_factory=list)
    """Regions whose proxy pulls the whole snapshot on every change instead of the diff since
    its version (R4 broken)."""
    proxy_no_stale_alarm: list[str] = Field(default_factory=list)
    """Regions whose proxy never raises the stale-snapshot alarm, however long it lags or hears
    nothing (R6 broken)."""
    gslb_no_ramp: bool = Field(False, strict=True)
    """The GSLB re-admits a returning region at its full weight at once, with no ramp (R10 broken)."""
    cp_event_delay: float = Field(0.0, ge=0, le=60, strict=True)
    """Seconds the control plane's consumer waits before applying each event: a consumer that
    falls behind, its processing latency above R13's 1 s P99 (R13 broken)."""
    release_all_at_once: bool = Field(False, strict=True)
    """The federation's release controller upgrades every instance of every region at the same
    moment instead of region by region (R12 broken)."""
    reconcile_every: float = Field(0.0, ge=0, le=3600, strict=True)
    """Seconds between the control plane's full reconciliation passes, whatever
    ``timing.reconcile_interval`` states (0: as stated): slow state (labels, quotas) travels
    near-real-time on a pass every few moments (R3 broken: its cadence)."""
    livez_follows_readyz: list[str] = Field(default_factory=list)
    """Regions whose app instances answer ``/livez`` as they answer ``/readyz``: an instance that
    is only unready reads as dead, and a kubelet would restart it (R11 broken: liveness coupled
    to readiness)."""
    slow_auto_merge: bool = Field(False, strict=True)
    """On a label conflict the control plane keeps a non-primary region's value (the first
    region in name order whose value differs from the primary's) instead of the designated
    primary's: an auto-merge that lets any region override the primary (R3 broken: the conflict)."""


Replication = Literal["sync", "async", "none"]


class State(StrictModel):
    """The federation's state layer (DESIGN.md section 9): the store the app's data lives in,
    how it replicates, and the writes a drill makes to judge what happened to the data.

    The reference federation runs one real ``nats-server`` per region (on ``127.0.N.5``),
    clustered, and keeps the app's data in one JetStream stream. Absent (``state:`` not in
    the topology): the federation has no state layer and every state verdict is "not
    applicable" with that reason."""

    store: Literal["jetstream"] = "jetstream"
    """The store: ``jetstream`` (a JetStream cluster, one node per region)."""
    replication: Replication = "sync"
    """``sync``: the stream has one replica per region (at most 3; Raft): a write is
    acknowledged once a quorum holds it, so losing one node loses no acknowledged write.
    ``async``: one stream per store node; writes go to the primary region's, acknowledged
    once that node stored them, and a replicator copies them to the standbys' (lag at most
    ``max_lag`` while it runs); a store controller promotes a standby when the primary's
    node fails ``timing.fall`` checks: what was not replicated yet is lost (RPO <= max_lag +
    detection, the prediction).
    ``none``: one replica, on the primary region's node: losing that node loses what it held
    (a stated single point of failure; the RPO prediction says so)."""
    max_lag: float | None = Field(None, gt=0, le=600, strict=True)
    """``async`` only, and required there: the stated maximum replication lag, seconds (the
    replicator copies at least this often)."""
    write_rate: float = Field(5.0, gt=0, le=1000, strict=True)
    """Writes per second the drill's writer sends (Poisson arrivals) while it observes."""
    writers: int = Field(8, ge=1, le=256, strict=True)
    """Writer clients, each with its own DNS cache (each write is sent by one picked at random): a
    read-after-write session reads its writes back through the region its client's answer names,
    so the regions the writes are read through are this many independent draws per TTL, not one
    per write."""
    task_rate: float = Field(2.0, ge=0, le=1000, strict=True)
    """Tasks per second the drill adds to the background workers' queue (Poisson arrivals);
    each must be processed exactly once. 0: no tasks (the duplicates verdict is n/a)."""
    write_timeout: float = Field(1.0, gt=0, le=30, strict=True)
    """Seconds a write may take; one not answered within it is *indeterminate* (it may
    or may not have been stored), never counted as acknowledged."""

    @model_validator(mode="after")
    def _lag_with_async(self) -> State:
        if self.replication == "async" and self.max_lag is None:
            raise ValueError("max_lag: required with replication: async (the stated maximum replication lag, s)")
        if self.replication != "async" and self.max_lag is not None:
            raise ValueError(f"max_lag: only with replication: async (got replication: {self.replication})")
        return self


class Region(StrictModel):
    """One region (one cluster) of the federation."""

    name: str
    """DNS label, e.g. ``a`` or ``eu-west``."""
    weight: float = Field(gt=0, le=1000, strict=True)
    """Static global routing weight (R8), relative to the other regions."""
    fallback: str | None = None
    """Region the gateway forwards to when no local instance is ready (R7)."""
    instances: int = Field(2, ge=2, le=50, strict=True, description="one instance must be able to fail")
    """App instances in the region (>= 2 so one can fail)."""
    capacity_rps: float = Field(40.0, gt=0, le=1_000_000, strict=True)
    """Declared capacity of each instance, requests/s; above it the app answers 503."""
    quota: dict[str, StrictInt] = Field(default_factory=dict)
    """Slow state (R3): resource quotas, reconciled on the full pass only."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Slow state (R3): labels, reconciled on the full pass only."""

    @field_validator("name")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        if not _LABEL.match(v):
            raise ValueError(f"got {shown(v)}, expected a DNS label ([a-z][a-z0-9-]*, <= 32 chars)")
        return v

    @property
    def capacity(self) -> float:
        """Total declared capacity of the region, requests/s."""
        return self.instances * self.capacity_rps


class Load(StrictModel):
    """The default offered load for drills."""

    users: int = Field(20, ge=1, le=10_000, strict=True)
    """Simulated clients; each resolves the service name and honours the TTL."""
    rate: float = Field(60.0, gt=0, le=1_000_000, strict=True)
    """Offered load across all users, requests/s."""
    margin: float = Field(0.2, ge=0, le=10, strict=True)
    """N-1 headroom margin: capacity(all but r) >= rate * (1 + margin)."""


class Topology(StrictModel):
    """A validated federation topology."""

    name: str = "local"
    zone: str = "gameday.test"
    """Authoritative DNS zone served by the GSLB."""
    service: str = "app"
    """Service label; clients resolve ``<service>.<zone>``."""
    primary: str | None = None
    """Designated primary region: wins slow-state conflicts (R3). Default: first region."""
    timing: Timing = Field(default_factory=Timing)
    control_plane: ControlPlane = Field(default_factory=ControlPlane)
    load: Load = Field(default_factory=Load)
    defects: Defects = Field(default_factory=Defects)
    state: State | None = None
    """The state layer (DESIGN.md section 9); None: the federation declares none, and the
    state verdicts are not applicable."""
    regions: list[Region] = Field(min_length=2, max_length=250,
                                  description="a failover drill needs a region to fail over to")
    contexts: dict[str, str] | None = None
    """kube/kind targets: the kubeconfig context of each cluster, ``{region: context}``
    plus the global tier under the key ``global`` (control plane, GSLB, NATS). Every
    region and ``global`` need one; ``None`` for the local target, which has no clusters."""

    @field_validator("zone")
    @classmethod
    def _zone_name(cls, v: str) -> str:
        if not _ZONE.match(v):
            raise ValueError(f"got {shown(v)}, expected a DNS zone name such as 'gameday.test'")
        return v

    @field_validator("service")
    @classmethod
    def _service_label(cls, v: str) -> str:
        if not _LABEL.match(v):
            raise ValueError(f"got {shown(v)}, expected a DNS label")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> Topology:
        names = [r.name for r in self.regions]
        seen: set[str] = set()
        for i, n in enumerate(names):
            if n in seen:
                raise ValueError(f"regions[{i}].name: {shown(n)} is used twice; region names must be unique")
            seen.add(n)
        for i, r in enumerate(self.regions):
            if r.fallback is not None and r.fallback not in seen:
                raise ValueError(
                    f"regions[{i}].fallback: got {shown(r.fallback)}, expected one of {sorted(seen)}"
                )
            if r.fallback == r.name:
                raise ValueError(f"regions[{i}].fallback: a region cannot fall back to itself ({shown(r.name)})")
        for fld in ("proxy_never_refresh", "gateway_no_fallback", "gateway_needs_sync", "proxy_needs_sync",
                    "proxy_full_pulls", "proxy_no_stale_alarm", "livez_follows_readyz"):
            for r in getattr(self.defects, fld):
                if r not in seen:
                    raise ValueError(f"defects.{fld}: got {shown(r)}, expected one of {sorted(seen)}")
        if self.contexts is not None:
            self._check_contexts(self.contexts, names)
            if self.layout == "regional":
                how = ("set" if self.control_plane.layout is not None
                       else f"the default above {REGIONAL_ABOVE} regions ({len(names)} here)")
                raise ValueError(
                    f"control_plane.layout: 'regional' ({how}) runs on the local target only; the kind and "
                    "kube targets (contexts given) deploy one global control plane: set control_plane.layout: "
                    "global")
        if self.primary is not None and self.primary not in seen:
            raise ValueError(f"primary: got {shown(self.primary)}, expected one of {sorted(seen)}")
        for defect in ("store_unreplicated", "consumers_per_region", "unfenced_old_primary",
                       "reads_from_local_replica"):
            if getattr(self.defects, defect) and self.state is None:
                raise ValueError(f"defects.{defect}: the topology has no state layer (state:) to break")
        if self.defects.unfenced_old_primary and self.state is not None and self.state.replication != "async":
            raise ValueError("defects.unfenced_old_primary: only with state.replication: async (a store "
                             "controller that could fence)")
        if self.defects.slow_promotion and (self.state is None or self.state.replication != "async"):
            raise ValueError("defects.slow_promotion: only with state.replication: async (a store controller that "
                             "promotes)")
        if self.defects.reads_from_local_replica and self.state is not None and self.state.replication != "async":
            raise ValueError("defects.reads_from_local_replica: only with state.replication: async (a sync store "
                             "reads from its stream's leader; an async one has a copy per region to read from)")
        if self.state is not None and self.contexts is not None:
            raise ValueError("state: the state layer runs on the local target only for now; the kind and kube "
                             "targets (contexts given) deploy no store: remove state:")
        return self

    @staticmethod
    def _check_contexts(contexts: dict[str, str], names: list[str]) -> None:
        if GLOBAL_CLUSTER in names:
            raise ValueError(f"contexts: a region may not be called {GLOBAL_CLUSTER!r} when contexts are "
                             "given: that key names the global tier's cluster")
        expected = [*names, GLOBAL_CLUSTER]
        unknown = sorted(set(contexts) - set(expected))
        if unknown:
            raise ValueError(f"contexts: unknown key(s) {shown(unknown)}, expected region names or "
                             f"{GLOBAL_CLUSTER!r} ({', '.join(expected)})")
        missing = [n for n in expected if n not in contexts]
        if missing:
            raise ValueError(f"contexts: no context for {missing}; every region and {GLOBAL_CLUSTER!r} "
                             "need a kubeconfig context")
        for key, ctx in contexts.items():
            if not ctx.strip() or len(ctx) > 253:
                raise ValueError(f"contexts.{key}: got {shown(ctx)}, expected a kubeconfig context name "
                                 "(1..253 characters)")

    @property
    def layout(self) -> Layout:
        """The control-plane layout in force: ``control_plane.layout`` if set, else
        ``regional`` above :data:`REGIONAL_ABOVE` regions and ``global`` otherwise."""
        if self.control_plane.layout is not None:
            return self.control_plane.layout
        return "regional" if len(self.regions) > REGIONAL_ABOVE else "global"

    @property
    def primary_region(self) -> str:
        """The designated primary region (the first region unless set)."""
        return self.primary or self.regions[0].name

    @property
    def fqdn(self) -> str:
        """The service's fully qualified name, e.g. ``app.gameday.test.``."""
        return f"{self.service}.{self.zone}."

    def region(self, name: str) -> Region:
        """Return the region called *name*; raise ``KeyError`` if there is none."""
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(name)

    def with_overrides(self, **changes: Any) -> Topology:
        """Return a copy with top-level fields replaced, re-validated."""
        data = self.model_dump()
        data.update(changes)
        return Topology.model_validate(data)


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _unwrap_optional(ann: Any) -> Any:
    """``X | None`` -> ``X`` (a profile's optional sections and numbers)."""
    if get_origin(ann) in (Union, UnionType):
        rest = [a for a in get_args(ann) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return ann


def _field_at(loc: tuple[int | str, ...], root: type[BaseModel] | None = None) -> tuple[FieldInfo | None, Any]:
    """The model field (and the type) a validation error's location points at, if any."""
    info: FieldInfo | None = None
    ann: Any = root or Topology
    for part in loc:
        ann = _unwrap_optional(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel) and isinstance(part, str):
            info = ann.model_fields.get(part)
            if info is None:
                return None, None
            ann = info.annotation
            continue
        origin, args = get_origin(ann), get_args(ann)
        if origin in (list, dict) and args:  # an element (list index) or a value (dict key)
            info, ann = None, args[-1]
            if get_origin(ann) is Annotated:
                ann = get_args(ann)[0]
            continue
        return None, None
    return info, _unwrap_optional(ann)


_NUMERIC_ERRORS = frozenset({
    "int_type", "int_parsing", "int_from_float", "float_type", "float_parsing", "finite_number", "bool_type",
    "greater_than", "greater_than_equal", "less_than", "less_than_equal",
})


def _expected_number(loc: tuple[int | str, ...], root: type[BaseModel] | None = None) -> str | None:
    """``an integer >= 2 and <= 50 (why)`` for a numeric field, from its declared bounds."""
    info, ann = _field_at(loc, root)
    if ann is bool:
        return "true or false"
    if ann not in (int, float):
        return None
    what = "an integer" if ann is int else "a finite number"
    bounds = []
    for m in info.metadata if info is not None else ():
        for cls, op, attr in ((Gt, ">", "gt"), (Ge, ">=", "ge"), (Lt, "<", "lt"), (Le, "<=", "le")):
            if isinstance(m, cls):
                bounds.append(f"{op} {getattr(m, attr):g}")
    text = what + (" " + " and ".join(bounds) if bounds else "")
    if info is not None and info.description:
        text += f" ({info.description})"
    return text


MAX_ERRORS_SHOWN = 10
"""Lines of one validation error: a generated file can be wrong in thousands of places."""


def _error_line(err: Any, root: type[BaseModel] | None = None, example: str = "clusters/local.yaml") -> str:
    loc_t = tuple(err["loc"])
    loc = _loc(loc_t)
    msg = str(err["msg"]).removeprefix("Value error, ")
    kind = err["type"]
    if kind == "value_error":
        # Our validators' messages: "got ..." for the field itself, "<field>: ..." for a
        # field of the model the validator belongs to (loc is that model's location).
        if msg.startswith("got "):
            return f"{loc}: {msg}"
        return f"{_loc(loc_t) + '.' if loc_t else ''}{msg}"
    if kind == "extra_forbidden":
        return f"{loc}: unknown field (check the spelling; see {example})"
    if kind == "missing":
        return f"{loc}: required field is missing"
    if kind in ("too_short", "too_long"):
        info, _ = _field_at(loc_t, root)
        n = len(err["input"]) if hasattr(err.get("input"), "__len__") else "?"
        bound = (f"at least {err['ctx']['min_length']}" if kind == "too_short"
                 else f"at most {err['ctx']['max_length']}")
        why = f" ({info.description})" if info is not None and info.description else ""
        return f"{loc}: got {n} item(s), expected {bound}{why}"
    if kind in _NUMERIC_ERRORS:
        expected = _expected_number(loc_t, root)
        if expected is not None:
            return f"{loc}: got {shown(err.get('input'))}, expected {expected}"
    expected = msg.removeprefix("Input should be ").removeprefix("Input should ")
    return f"{loc}: got {shown(err.get('input'))}, expected {expected}"


def format_validation_error(source: str, exc: ValidationError, *, root: type[BaseModel] | None = None,
                            example: str = "clusters/local.yaml") -> str:
    """Render a pydantic error as ``file: field: got VALUE, expected ...`` lines.

    Args:
        root: the model validated (default :class:`Topology`): numeric bounds are read from it.
        example: the file an "unknown field" message points to.
    """
    errors = exc.errors()
    lines = [f"{source}: {_error_line(err, root, example)}" for err in errors[:MAX_ERRORS_SHOWN]]
    if len(errors) > MAX_ERRORS_SHOWN:
        lines.append(f"{source}: ... and {len(errors) - MAX_ERRORS_SHOWN} more error(s)")
    return "\n".join(lines)


def parse_topology(data: Any, source: str = "<topology>") -> Topology:
    """Validate already-parsed YAML/JSON data; raise :class:`ConfigError` naming *source*."""
    if data is None:
        raise ConfigError(f"{source}: is empty, expected a topology (see clusters/local.yaml)", source=source)
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping at the top level, got {type(data).__name__} {shown(data)}", source=source
        )
    try:
        return Topology.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(
            format_validation_error(source, exc), source=source, field=_loc(tuple(first["loc"]))
        ) from exc


def generated_topology(regions: int, *, layout: Layout | None = None, base: Topology | None = None,
                       instances: int = 2, name: str | None = None, **timing: float) -> Topology:
    """A topology of *regions* generated regions ``r01..rNN`` (the large-scale checks and benchmarks).

    Zone, service, timings, load and control-plane state come from *base* (default:
    ``clusters/local.yaml``), *timing* overrides the timings. Every region has *instances*
    app instances of the base's first region's capacity, weight 10, and falls back to the
    next region (the last one to the first). *layout* sets ``control_plane.layout`` (None
    leaves it to the region count).

    Raises:
        ConfigError: *regions* is outside 2..250 or a timing override is invalid; the
            message names the field as for a file.
    """
    b = base if base is not None else load_topology()
    data = b.model_dump()
    names = [f"r{i:02d}" if regions < 100 else f"r{i:03d}" for i in range(1, regions + 1)]
    data["name"] = name or f"generated-{regions}"
    data["primary"] = names[0] if names else None
    data["contexts"] = None
    data["defects"] = {}
    data["regions"] = [
        {"name": n, "weight": 10, "fallback": names[(i + 1) % regions] if regions > 1 else None,
         "instances": instances, "capacity_rps": b.regions[0].capacity_rps}
        for i, n in enumerate(names)
    ]
    data["timing"].update(timing)
    data["control_plane"]["layout"] = layout
    return parse_topology(data, f"<generated topology of {regions} regions>")


def load_topology(path: str | Path | None = None) -> Topology:
    """Load and validate a topology YAML file (the default one if *path* is None).

    The file is read defensively (:mod:`gameday.runtime.userinput`): at most 1 MiB of UTF-8, one
    YAML document without duplicate keys, deep nesting or alias bombs.

    Raises:
        ConfigError: the file is missing, a directory, unreadable, too large, not UTF-8,
            not YAML, or a field is invalid; the message names the file and the line or
            the field.
    """
    p = Path(path) if path is not None else DEFAULT_TOPOLOGY
    data = load_yaml(read_text_file(p, "topology file"), str(p))
    return parse_topology(data, str(p))
