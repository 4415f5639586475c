"""A federation profile: how the harness reaches, observes and breaks a federation it did not build.

The ``external`` target (:mod:`gameday.targets.external`) knows a federation only through
its profile (DESIGN.md §7): the name clients resolve and the DNS server they ask, how a
client reaches a region's gateway, each region's gateway address, weight and (if known)
capacity, where each entry node reports its route version and routable regions, optional
sources of the control-plane version and of stale-snapshot alarms, every fault as a
command with its exact inverse, and optionally its state layer (``state:``: how the drill
writes and reads back, and the replication it states). ``docs/howto/own-federation.md`` walks
through a complete, commented example (``examples/profiles/``, each tested), and
``docs/reference/profile.md`` lists every field, generated from these models.

A profile is YAML read defensively (:mod:`gameday.runtime.userinput`: bounded size, UTF-8, one
document, no duplicate keys, no alias bombs) and validated into frozen pydantic models.
Numbers are strict (``true`` is not 1) and finite. Every error names the file, the field,
the value (shortened) and what was expected::

    team.yaml: regions[1].weight: got -5, expected a finite number > 0 and <= 1000

Relative paths in a profile (alarm log files) are relative to the profile's directory,
and commands run there, so a profile and its scripts can live side by side.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    PlainSerializer,
    PlainValidator,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from gameday.errors import ConfigError
from gameday.faults.catalogue import CATALOGUE
from gameday.model.topology import (
    _LABEL,
    _ZONE,
    MAX_DNS_TTL,
    Load,
    Region,
    Timing,
    Topology,
    _loc,
    format_validation_error,
)
from gameday.observers.kinds import (
    LENIENT,
    SOURCE_KINDS,
    NonEmpty,
    Role,
    SourceChoice,
    StrictModel,
    choose,
    http_url,
)
from gameday.runtime.userinput import load_yaml, read_text_file, shown
from gameday.verdicts.state import StatedElection, StatedFailover, StatedReplication

EXAMPLE = "docs/reference/profile.md and examples/profiles/"
"""Where an "unknown field" message points."""

MAX_COMMAND_TIMEOUT = 600.0
"""Seconds. A fault command that takes longer than 10 minutes is not a fault injection but
a deployment; a drill whose inject may hang for longer cannot bound its own duration."""

_FAULT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_DNS_NAME_LABEL = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")
_HEADER = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")  # an HTTP token (RFC 9110)

# -- commands and faults ---------------------------------------------------------------------------
class Command(StrictModel):
    """One command of a fault: run without a shell (``argv``) unless ``shell: true`` asks for one."""

    argv: list[NonEmpty] | None = Field(None, min_length=1, max_length=1000)
    """The program and its arguments, run directly (no shell: nothing is word-split or expanded)."""
    shell: bool = Field(False, strict=True)
    """True: run ``command`` with ``/bin/sh -c`` (pipes, redirections); only when asked for."""
    command: NonEmpty | None = None
    """The shell command line (only with ``shell: true``)."""
    timeout: float = Field(30.0, gt=0, le=MAX_COMMAND_TIMEOUT, strict=True)
    """Seconds the command may take; it is killed after that and counts as failed. 30 s:
    stopping or reloading a service takes seconds; a hung command must not hold the drill."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the command (added to the harness's own)."""

    @model_validator(mode="after")
    def _one_way_to_run(self) -> Command:
        if self.shell:
            if self.command is None:
                raise ValueError("command: required with shell: true (the shell command line to run)")
            if self.argv is not None:
                raise ValueError("argv: not allowed with shell: true; give either argv or shell: true + command")
        else:
            if self.command is not None:
                raise ValueError("command: needs shell: true; or give argv (a list: program, then its arguments), "
                                 "run without a shell")
            if self.argv is None:
                raise ValueError("argv: required field is missing (a list: program, then its arguments); "
                                 "or shell: true + command")
        return self


class FaultSpec(StrictModel):
    """A fault as two commands: the injection and its exact inverse.

    The revert must be idempotent (safe to run when the fault is not in effect): it runs
    after a failed injection that may have half happened, and ``gameday restore`` runs it
    again after a killed runner. The harness runs it at most once per injection itself.
    """

    inject: Command
    """What puts the fault in effect."""
    revert: Command
    """Its exact inverse; idempotent (see above)."""
    takes_region_out: bool | None = Field(None, strict=True)
    """Only for a fault of the profile's own: it takes its region out of service (switchover
    is then measured). A fault gameday knows (``gateway_down``) keeps its own meaning."""


FaultTable = dict[str, FaultSpec]


def _check_fault_names(faults: FaultTable, where: str, *, regional: bool) -> None:
    for name in faults:
        if not _FAULT_NAME.match(name):
            raise ValueError(f"{where}.{name}: got {shown(name)}, expected a fault name ([a-z][a-z0-9_]*), "
                             "e.g. gateway_down")
        kind = CATALOGUE.get(name)
        if kind is None:
            continue  # a fault of the profile's own: it is run by name with target.inject
        if faults[name].takes_region_out is not None:
            raise ValueError(f"{where}.{name}.takes_region_out: {name} is a fault gameday knows; its meaning is "
                             "fixed (leave takes_region_out out)")
        if regional and not kind.needs_region:
            raise ValueError(f"{where}.{name}: {name} takes no region; put it under the top-level faults")
        if not regional and kind.needs_region:
            raise ValueError(f"{where}.{name}: {name} needs a region; put it under regions[i].faults")


# -- faults as Kubernetes operations (the kube and kind targets) -----------------------------------
_K8S_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # DNS-1123 label: namespaces
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # DNS-1123 subdomain: object names
_K8S_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_K8S_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _k8s(pattern: re.Pattern[str], what: str) -> Any:
    def check(v: str) -> str:
        if not pattern.match(v):
            raise ValueError(f"got {shown(v)}, expected {what}")
        return v
    return AfterValidator(check)


K8sNamespace = Annotated[str, _k8s(_K8S_LABEL, "a Kubernetes namespace (DNS-1123 label: [a-z0-9-], <= 63)")]
K8sName = Annotated[str, _k8s(_K8S_NAME, "a Kubernetes object name (DNS-1123 subdomain: [a-z0-9.-], <= 253)")]


class ScaleToZero(StrictModel):
    """Scale a workload to 0 replicas; the revert scales it back to the count read just before."""

    kind: Literal["Deployment", "StatefulSet"] = "Deployment"
    """The workload's kind."""
    namespace: K8sNamespace
    """Its namespace."""
    name: K8sName
    """The workload's name."""


class IsolateNamespace(StrictModel):
    """A NetworkPolicy selecting every pod of the namespace with no rule: all traffic into and out
    of it is dropped (the CNI must enforce NetworkPolicies); the revert deletes the policy."""

    namespace: K8sNamespace
    """The namespace to cut off."""


class PatchSelector(StrictModel):
    """Point a Service at other pods (e.g. none: a selector no pod has); the revert puts back
    exactly the selector read just before."""

    namespace: K8sNamespace
    """The Service's namespace."""
    service: K8sName
    """The Service's name."""
    selector: dict[str, str] = Field(min_length=1, max_length=20)
    """The labels it selects while the fault is in effect (e.g. a label no pod has)."""

    @field_validator("selector")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not _K8S_LABEL_KEY.match(key):
                raise ValueError(f"key {shown(key)}: expected a Kubernetes label key ([prefix/]name)")
            if not _K8S_LABEL_VALUE.match(value):
                raise ValueError(f"{key}: got {shown(value)}, expected a Kubernetes label value "
                                 "([A-Za-z0-9._-], <= 63)")
        return v


class KubernetesFault(StrictModel):
    """One fault as a Kubernetes operation with an exact inverse: exactly one of the three."""

    cluster: str | None = None
    """The key in ``kubernetes.contexts`` of the cluster to act on; default: the fault's region."""
    scale_to_zero: ScaleToZero | None = None
    """Scale a Deployment or StatefulSet to 0; the revert scales it back to the count read before."""
    isolate_namespace: IsolateNamespace | None = None
    """Drop all traffic into and out of a namespace with a NetworkPolicy; the revert deletes it."""
    patch_selector: PatchSelector | None = None
    """Point a Service at other pods; the revert puts its old selector back."""
    takes_region_out: bool | None = Field(None, strict=True)
    """As for command faults: only for a fault of the profile's own."""

    @model_validator(mode="after")
    def _exactly_one(self) -> KubernetesFault:
        given = [n for n in ("scale_to_zero", "isolate_namespace", "patch_selector") if getattr(self, n) is not None]
        if not given:
            raise ValueError("scale_to_zero: required field is missing; a Kubernetes fault is exactly one of "
                             "scale_to_zero, isolate_namespace, patch_selector")
        if len(given) > 1:
            raise ValueError(f"{given[1]}: not allowed with {given[0]}; a Kubernetes fault is exactly one of "
                             "scale_to_zero, isolate_namespace, patch_selector")
        return self

    @property
    def action(self) -> ScaleToZero | IsolateNamespace | PatchSelector:
        a = self.scale_to_zero or self.isolate_namespace or self.patch_selector
        assert a is not None  # _exactly_one
        return a


class KubernetesSpec(StrictModel):
    """The federation's clusters and its faults as Kubernetes operations, for ``--gameday-target``
    ``kube`` or ``kind`` with a profile (the ``external`` target ignores this section)."""

    contexts: dict[str, str] = Field(min_length=1)
    """Cluster key (a region name, or another name such as ``global``) -> kubeconfig context;
    every context must be allowed with ``--gameday-allow-context``."""
    faults: dict[str, KubernetesFault] = Field(default_factory=dict)
    """Region-less faults (each names its ``cluster``)."""
    regions: dict[str, dict[str, KubernetesFault]] = Field(default_factory=dict)
    """Region name -> its faults (on the region's own cluster unless one names another)."""

    @field_validator("contexts")
    @classmethod
    def _contexts(cls, v: dict[str, str]) -> dict[str, str]:
        for key, ctx in v.items():
            if not key or not ctx:
                raise ValueError(f"{shown(key)}: expected a cluster key and a kubeconfig context, both non-empty")
        return v


# -- observation sources ---------------------------------------------------------------------------
# Each source is ``{kind: fields}``, its kind looked up in gameday.observers.kinds.SOURCE_KINDS
# (the built-ins there: http_json, prometheus, metrics, log, command; a conftest or plugin adds more).
def _choice(role: Role) -> Callable[[Any, ValidationInfo], SourceChoice]:
    def validate(value: Any, info: ValidationInfo) -> SourceChoice:
        if isinstance(value, SourceChoice):
            return value
        return choose(role, value, lenient=bool((info.context or {}).get(LENIENT)))
    return validate


def _dump_choice(choice: SourceChoice) -> dict[str, Any]:
    return choice.dump()


VersionChoice = Annotated[SourceChoice, PlainValidator(_choice("version")), PlainSerializer(_dump_choice)]
AlarmChoice = Annotated[SourceChoice, PlainValidator(_choice("alarms")), PlainSerializer(_dump_choice)]
NodeChoice = Annotated[SourceChoice, PlainValidator(_choice("entry_node")), PlainSerializer(_dump_choice)]
StateChoice = Annotated[SourceChoice, PlainValidator(_choice("state")), PlainSerializer(_dump_choice)]


class EntryNode(StrictModel):
    """One entry node (gateway, proxy) of a region: its name and how it is read
    (``{name: gateway-a, http_json: {url: ...}}``: exactly one source kind beside the name)."""

    name: str = Field(min_length=1, max_length=63)
    """The name figures and messages use, e.g. ``gateway-a``."""
    source: NodeChoice

    @model_validator(mode="before")
    @classmethod
    def _kind_beside_name(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or "source" in data:
            return data
        rest = {k: v for k, v in data.items() if k != "name"}
        return {"name": data.get("name"),
                "source": choose("entry_node", rest, lenient=bool((info.context or {}).get(LENIENT)))}

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        return {"name": out["name"], **self.source.dump()}


Replication = Literal["sync", "async", "none"]


class FailoverSpec(StrictModel):
    """How the federation states it replaces a lost write primary (``async`` only): what the
    write-recovery prediction of a drill that takes the primary is made from. A controller checks
    the primary every ``probe_interval`` s (each check failing at once or at ``probe_timeout``),
    declares it failed after ``fall`` failures, promotes a standby once the old primary's last
    ``lease`` ran out, and every writer hears of it within ``announce`` s."""

    probe_interval: float = Field(gt=0, le=3600, strict=True)
    probe_timeout: float = Field(gt=0, le=3600, strict=True)
    fall: int = Field(ge=1, le=100, strict=True)
    lease: float = Field(0.0, ge=0, le=3600, strict=True)
    """Seconds the old primary's writers may keep writing after their last renewal (fencing by
    time): no promotion before it ran out. 0: fenced at once."""
    announce: float = Field(0.0, ge=0, le=3600, strict=True)
    """Seconds within which every writer hears of a promotion (0: at once)."""
    nodes: int = Field(1, ge=1, le=100, strict=True)
    """Store nodes the controller checks each round, one after the other."""
    dead_connection: float | None = Field(None, ge=0, le=3600, strict=True)
    """Seconds within which a client's connection to a frozen store node (alive, answering
    nothing) is found dead and replaced; null: not stated (a frozen node costs nothing extra)."""


class ElectionSpec(StrictModel):
    """How a ``sync`` store (a Raft or Paxos group: etcd, a JetStream stream, a CockroachDB range)
    states it elects a new leader when its leader is lost: what the write-recovery prediction of a
    drill that takes the leader is made from. Each surviving follower campaigns once it has heard
    nothing from the leader for a random election timeout in ``timeout_min`` .. ``timeout_max``,
    counted from the last heartbeat it heard (at most ``heartbeat`` before the loss); a vote round
    that won nothing is tried again within ``campaign_max``."""

    timeout_min: float = Field(gt=0, le=3600, strict=True)
    timeout_max: float = Field(gt=0, le=3600, strict=True)
    heartbeat: float = Field(0.0, ge=0, le=3600, strict=True)
    """Seconds between the leader's heartbeats (0: the followers heard it at the moment of the loss)."""
    campaign_max: float = Field(0.0, ge=0, le=3600, strict=True)
    """Seconds within which a candidate whose vote round won nothing campaigns again (0: one round)."""

    @model_validator(mode="after")
    def _ordered(self) -> ElectionSpec:
        if self.timeout_max < self.timeout_min:
            raise ValueError(f"timeout_max ({self.timeout_max:g}) is below timeout_min ({self.timeout_min:g}): the "
                             "election timeout is drawn from timeout_min .. timeout_max")
        return self


class PrimarySpec(StrictModel):
    """Where the drill reads which region leads the data just before a fault that takes a store
    node: a JSON document over HTTP and the field that names the region."""

    url: str = Field(pattern=r"^https?://")
    field: str = Field("primary", min_length=1)
    """Dotted path to the region's name in the answer (``store.primary``)."""
    timeout: float = Field(2.0, gt=0, le=60, strict=True)


class StateSpec(StrictModel):
    """The federation's state layer (DESIGN.md section 9): how the drill writes to it and reads
    the writes back (exactly one source kind beside the other fields, e.g. ``http: {...}``),
    what it states of its replication, and the drill's write rate. Without it the state
    verdicts are not applicable (never a pass)."""

    replication: Replication | None = None
    """What the federation states: ``sync`` (an acknowledged write is held by a synchronous
    standby or a quorum: 0 lost), ``async`` (the standby trails by at most ``max_lag``),
    ``none`` (one copy); null: not stated (the data-loss prediction is not applicable)."""
    max_lag: float | None = Field(None, ge=0, le=3600, strict=True)
    """``async`` only (and required there): the stated maximum replication lag, seconds."""
    write_rate: float = Field(5.0, gt=0, le=1000, strict=True)
    """Writes per second the drill's writer sends (Poisson arrivals) while it observes."""
    write_timeout: float = Field(1.0, gt=0, le=30, strict=True)
    """Seconds a write may take; one not answered within it is indeterminate (it may or may
    not have been stored), never counted as acknowledged."""
    failover: FailoverSpec | None = None
    """``async`` only: how a lost primary is replaced (null: not stated; the write-recovery
    prediction of a drill that takes the primary is then not applicable)."""
    election: ElectionSpec | None = None
    """``sync`` only: how the store elects a new leader when its leader is lost (null: not stated;
    the write-recovery prediction of a drill that takes the leader is then not applicable)."""
    primary: PrimarySpec | None = None
    """Where the drill reads which region leads the data (null: it cannot tell a failover from a
    lost follower, and the write-recovery prediction of a store fault is not applicable)."""
    source: StateChoice
    """How writes are sent and read back: ``http`` or a kind a plugin adds (role ``state``)."""

    @model_validator(mode="before")
    @classmethod
    def _kind_beside_fields(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or "source" in data:
            return data
        own = {"replication", "max_lag", "write_rate", "write_timeout", "failover", "election", "primary"}
        rest = {k: v for k, v in data.items() if k not in own}
        if not rest:
            raise ValueError(f"got no source kind, expected exactly one of {', '.join(SOURCE_KINDS.of('state'))} "
                             "beside the other fields: how the drill writes and reads back (e.g. http: {})")
        return {**{k: v for k, v in data.items() if k in own},
                "source": choose("state", rest, lenient=bool((info.context or {}).get(LENIENT)))}

    @model_validator(mode="after")
    def _lag_with_async(self) -> StateSpec:
        if self.replication == "async" and self.max_lag is None:
            raise ValueError("max_lag: required with replication: async (the stated maximum replication lag, "
                             "seconds: what the data-loss prediction allows)")
        if self.replication != "async" and self.max_lag is not None:
            raise ValueError(f"max_lag: only with replication: async (got replication: "
                             f"{self.replication or 'not stated'})")
        if self.replication != "sync" and self.election is not None:
            raise ValueError(f"election: only with replication: sync, whose replicas elect a leader (got "
                             f"replication: {self.replication or 'not stated'}; an async store states its failover)")
        if self.replication != "async" and self.failover is not None:
            raise ValueError(f"failover: only with replication: async, whose standby a controller promotes (got "
                             f"replication: {self.replication or 'not stated'}; a sync store elects its own leader)")
        return self

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        out.pop("source", None)
        return {**out, **self.source.dump()}

    def stated(self) -> StatedReplication | None:
        """The stated replication, the data-loss prediction's input (None: not stated)."""
        if self.replication is None:
            return None
        f = self.failover
        failover = None if f is None else StatedFailover(
            probe_interval=f.probe_interval, probe_timeout=f.probe_timeout, fall=f.fall, lease=f.lease,
            announce=f.announce, nodes=f.nodes, source="the profile's state.failover")
        e = self.election
        election = None if e is None else StatedElection(
            timeout_min=e.timeout_min, timeout_max=e.timeout_max, heartbeat=e.heartbeat, campaign_max=e.campaign_max,
            source="the profile's state.election")
        return StatedReplication(self.replication, self.max_lag, failover=failover, election=election,
                                 dead_connection=None if f is None else f.dead_connection)


class ControlPlaneSpec(StrictModel):
    version: VersionChoice
    """Exactly one source kind: ``http_json``, ``prometheus``, ``metrics``, or one a plugin adds."""


# -- the service and its regions ------------------------------------------------------------------
class DnsServer(StrictModel):
    server: str
    """The DNS server clients ask (an IP address)."""
    port: int = Field(53, ge=1, le=65535, strict=True)
    """Its port."""

    @field_validator("server")
    @classmethod
    def _address(cls, v: str) -> str:
        try:
            ipaddress.ip_address(v)
        except ValueError as exc:
            raise ValueError(f"got {shown(v)}, expected an IP address (the DNS server clients ask)") from exc
        return v


class LoadTarget(StrictModel):
    """How a client reaches a gateway: ``scheme://<address DNS answered>:port/path`` with ``Host: host``."""

    scheme: Literal["http", "https"] = "http"
    """How a client speaks to a gateway."""
    port: int = Field(ge=1, le=65535, strict=True)
    """The gateways' load port (each must accept connections on it before a drill)."""
    path: str = "/"
    """The path the load's requests ask for."""
    host: str | None = None
    """The Host header (default: the service name without its trailing dot)."""

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("/") or any(c.isspace() for c in v):
            raise ValueError(f"got {shown(v)}, expected a URL path starting with / (no spaces)")
        return v


class Service(StrictModel):
    fqdn: str
    """The name clients resolve, e.g. ``app.example.test.`` (a trailing dot is added)."""
    dns: DnsServer
    """The DNS server (the GSLB) clients ask for that name."""
    load: LoadTarget
    """How a client reaches a region once DNS answered with its gateway."""
    served_by_header: str | None = None
    """A response header naming the serving region (``a`` or ``a/instance``), if the federation sets one."""

    @field_validator("fqdn")
    @classmethod
    def _dns_name(cls, v: str) -> str:
        name = v.rstrip(".").lower()
        labels = name.split(".")
        if not name or len(name) > 253 or not all(_DNS_NAME_LABEL.match(x) for x in labels):
            raise ValueError(f"got {shown(v)}, expected a DNS name such as 'app.example.test.'")
        return name + "."

    @field_validator("served_by_header")
    @classmethod
    def _header(cls, v: str | None) -> str | None:
        if v is not None and not _HEADER.match(v):
            raise ValueError(f"got {shown(v)}, expected an HTTP header name such as 'X-Served-By'")
        return v


UTILISATION_FIELDS = {"capacity": "capacity_rps", "utilisation": "utilisation", "rejected": "rejected_total"}
"""The profile format's contract for ``regions[].utilisation`` URLs (the fields of
:class:`~gameday.observers.sources.HttpJsonUtilisation`): each answers JSON with its declared
capacity (req/s) at ``capacity_rps``, the share of it in use at ``utilisation`` and its count of
overload rejections at ``rejected_total``. The format adopted the reference app's names, so a
profile of the reference app (and of a federation built to the documented format) lists URLs only.
"""


class UtilisationSpec(StrictModel):
    """One app instance's load, from a JSON document with field names of its own:
    ``{url: ..., capacity: cap.rps, utilisation: load.share, rejected: null}`` (dotted paths;
    ``rejected: null``: it counts no overload responses). A plain URL in the list means the
    format's own names (:data:`UTILISATION_FIELDS`)."""

    url: str
    capacity: NonEmpty = UTILISATION_FIELDS["capacity"]
    """Dotted path of its declared capacity, req/s."""
    utilisation: NonEmpty = UTILISATION_FIELDS["utilisation"]
    """Dotted path of the share of that capacity in use (0.5: half)."""
    rejected: NonEmpty | None = UTILISATION_FIELDS["rejected"]
    """Dotted path of its count of overload responses (503/429); null: it keeps none."""

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        http_url(v)
        return v


class ProfileRegion(StrictModel):
    """One region of the federation."""

    name: str
    """DNS label, e.g. ``a`` or ``eu-west`` (as the entry nodes' routable lists name it)."""
    gateway: str
    """The address the DNS server answers with for this region (IPv4: an A record)."""
    weight: float = Field(gt=0, le=1000, strict=True)
    """Static routing weight, relative to the other regions."""
    capacity_rps: float | None = Field(None, gt=0, le=2_000_000, strict=True)
    """Requests/s the whole region can serve; unknown (omitted): the headroom verdict is not applicable."""
    entry_nodes: list[EntryNode] = Field(default_factory=list)
    """Optional: the region's gateways and proxies, each with the source of its route version and
    routable regions; without any, switchover is measured from the DNS answers."""
    faults: FaultTable = Field(default_factory=dict)
    """The region's faults as commands: a name gameday knows (``gateway_down``) or one of the
    profile's own."""
    utilisation: list[UtilisationSpec] = Field(default_factory=list)
    """Optional: app instances' load: each a URL of a JSON document with the fields
    :data:`UTILISATION_FIELDS` names, or a :class:`UtilisationSpec` naming its own."""

    @field_validator("name")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        if not _LABEL.match(v):
            raise ValueError(f"got {shown(v)}, expected a DNS label ([a-z][a-z0-9-]*, <= 32 chars)")
        return v

    @field_validator("gateway")
    @classmethod
    def _ipv4(cls, v: str) -> str:
        try:
            ipaddress.IPv4Address(v)
        except ValueError as exc:
            raise ValueError(f"got {shown(v)}, expected an IPv4 address (the A record DNS answers with)") from exc
        return v

    @field_validator("utilisation", mode="before")
    @classmethod
    def _plain_urls(cls, v: Any) -> Any:
        # a plain URL is the format's own field names (one error path for either form)
        return [{"url": u} if isinstance(u, str) else u for u in v] if isinstance(v, list) else v


class FederationTiming(StrictModel):
    """What is known of the federation's failure detection (all optional).

    ``probe_interval``, ``probe_timeout`` and ``fall`` together give the detection time
    preflight checks (``fall x probe_interval + probe_timeout``); without them preflight
    says the detection time is unknown instead of inventing one.
    """

    probe_interval: float | None = Field(None, gt=0, le=600, strict=True)
    """Seconds between the DNS server's (or load balancer's) health checks of a gateway."""
    probe_timeout: float | None = Field(None, gt=0, le=60, strict=True)
    """Seconds a health check may take: a hung gateway's check fails at this (the detection of
    ``gateway_hung``)."""
    fall: int | None = Field(None, ge=1, le=100, strict=True)
    """Consecutive failed checks before a gateway is taken out."""
    rise: int | None = Field(None, ge=1, le=100, strict=True)
    """Consecutive passed checks before a gateway is taken back (not an input of the prediction)."""
    dns_ttl: int | None = Field(None, ge=0, le=MAX_DNS_TTL, strict=True)
    """TTL of the answers; unknown: the target reads it from the DNS server's answer. Stated and
    contradicted by the answers, the drill is refused (``--gameday-accept-observed-ttl``)."""
    propagation: float | None = Field(None, ge=0, le=600, strict=True)
    """Seconds, at most, from the health checker's decision to every entry node's route (the
    prediction's entry-node propagation); unknown: the switchover's vs-prediction verdict is n/a
    where entry nodes report their routes."""
    gslb_delay: float | None = Field(None, ge=0, le=600, strict=True)
    """Seconds, at most, from the DNS server's health decision to its answers: a GSLB that applies
    its decisions in batches, polls a health store, or pushes a zone to its secondaries answers up
    to this late (the prediction's GSLB propagation). Not stated: 0, a DNS server answering from
    its own checks at once (PowerDNS ``ifportup``); a later one then fails DNS convergence vs
    prediction, and the failure names this field."""

    @model_validator(mode="after")
    def _detection_fields_together(self) -> FederationTiming:
        given = [self.probe_interval is not None, self.probe_timeout is not None, self.fall is not None]
        if any(given) and not all(given):
            raise ValueError("probe_interval: give probe_interval, probe_timeout and fall together (the detection "
                             "time is fall x probe_interval + probe_timeout), or none of them")
        if self.probe_interval is not None and self.probe_timeout is not None \
                and self.probe_timeout > self.probe_interval * 5:
            raise ValueError(f"probe_timeout: got {self.probe_timeout:g} s, expected at most 5 x probe_interval "
                             f"({self.probe_interval:g} s)")
        return self


class Profile(StrictModel):
    """A validated federation profile."""

    name: str = Field(min_length=1, max_length=100)
    """The federation's name, as reports show it."""
    service: Service
    """The service clients use: its name, the DNS server they ask, how they reach a gateway."""
    regions: list[ProfileRegion] = Field(min_length=2, max_length=250,
                                         description="a failover drill needs a region to fail over to")
    control_plane: ControlPlaneSpec | None = None
    """None: the version verdict is not applicable."""
    alarms: list[AlarmChoice] = Field(default_factory=list)
    """Empty: the stale-snapshot alarm verdict is not applicable."""
    faults: FaultTable = Field(default_factory=dict)
    """Region-less faults (``control_plane_down``, ...)."""
    timing: FederationTiming | None = None
    """What is known of failure detection and propagation: the prediction's inputs (None: every
    vs-prediction verdict is n/a)."""
    load: Load = Field(default_factory=Load)
    """The drills' default offered load (users, rate) and the N-1 headroom margin."""
    kubernetes: KubernetesSpec | None = None
    """The clusters and faults the kube and kind targets use with this profile; None: the
    profile drills only through the ``external`` target's commands."""
    manifests: str | None = Field(default=None, min_length=1, max_length=4096)
    """A directory of the Kubernetes manifests the federation is deployed from (relative to
    the profile's file), for R11's offline checks; None: R11's manifest checks are n/a."""
    state: StateSpec | None = None
    """The state layer: how the drill writes and reads back; None: the state verdicts are n/a."""

    @model_validator(mode="after")
    def _cross_checks(self) -> Profile:
        names: set[str] = set()
        gateways: dict[str, str] = {}
        nodes: set[str] = set()
        for i, r in enumerate(self.regions):
            if r.name in names:
                raise ValueError(f"regions[{i}].name: {shown(r.name)} is used twice; region names must be unique")
            names.add(r.name)
            if r.gateway in gateways:
                raise ValueError(f"regions[{i}].gateway: {r.gateway} is also region {gateways[r.gateway]}'s gateway; "
                                 "each region needs its own address (DNS answers tell regions apart by it)")
            gateways[r.gateway] = r.name
            for j, n in enumerate(r.entry_nodes):
                if n.name in nodes:
                    raise ValueError(f"regions[{i}].entry_nodes[{j}].name: {shown(n.name)} is used twice; "
                                     "entry-node names must be unique")
                nodes.add(n.name)
            _check_fault_names(r.faults, f"regions[{i}].faults", regional=True)
        _check_fault_names(self.faults, "faults", regional=False)
        clash = sorted(set(self.faults) & {f for r in self.regions for f in r.faults})
        if clash:
            raise ValueError(f"faults: {clash} also declared per region; a fault is either regional or not")
        if self.kubernetes is not None:
            self._check_kubernetes(self.kubernetes, names)
        return self

    @staticmethod
    def _check_kubernetes(k: KubernetesSpec, regions: set[str]) -> None:
        for region, table in k.regions.items():
            if region not in regions:
                raise ValueError(f"kubernetes.regions.{region}: no region {shown(region)} in regions "
                                 f"(expected one of {sorted(regions)})")
            for name, fault in table.items():
                cluster = fault.cluster or region
                if cluster not in k.contexts:
                    raise ValueError(f"kubernetes.regions.{region}.{name}: cluster {shown(cluster)} has no "
                                     f"kubernetes.contexts entry (have {sorted(k.contexts)})")
        for name, fault in k.faults.items():
            if fault.cluster is None or fault.cluster not in k.contexts:
                raise ValueError(f"kubernetes.faults.{name}.cluster: got {shown(fault.cluster)}, expected one of "
                                 f"{sorted(k.contexts)} (a region-less fault names its cluster)")
        as_commands = {"_": FaultSpec(inject=Command(argv=["true"]), revert=Command(argv=["true"]))}
        for where, table, regional in [("kubernetes.faults", k.faults, False),
                                       *((f"kubernetes.regions.{r}", t, True) for r, t in k.regions.items())]:
            # the same naming rules as command faults (a known name keeps its meaning)
            _check_fault_names({n: as_commands["_"].model_copy(update={"takes_region_out": f.takes_region_out})
                                for n, f in table.items()}, where, regional=regional)
        clash = sorted(set(k.faults) & {f for t in k.regions.values() for f in t})
        if clash:
            raise ValueError(f"kubernetes.faults: {clash} also declared per region; a fault is either regional "
                             "or not")

    # -- what the drill needs -------------------------------------------------------------------
    def region(self, name: str) -> ProfileRegion:
        """The region called *name*; ``KeyError`` if there is none."""
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(name)

    def fault(self, kind: str, region: str | None) -> FaultSpec | None:
        """The fault *kind* of *region* (or the region-less one), or None when the profile has none."""
        table = self.faults if region is None else self.region(region).faults
        return table.get(kind)

    def fault_names(self, region: str | None) -> list[str]:
        """The faults declared for *region* (None: the region-less ones)."""
        return list(self.faults if region is None else self.region(region).faults)

    @property
    def host_header(self) -> str:
        return self.service.load.host or self.service.fqdn.rstrip(".")

    def detection_timing(self) -> Timing | None:
        """The timing preflight checks detection with, or None when the profile does not state it."""
        t = self.timing
        if t is None or t.probe_interval is None or t.probe_timeout is None or t.fall is None:
            return None
        return self._timing()

    def _timing(self) -> Timing:
        given = self.timing.model_dump(exclude_none=True) if self.timing is not None else {}
        given.pop("propagation", None)  # the prediction's input (ExternalTarget.stated_timing), no Timing field
        return Timing(**given)

    def as_topology(self) -> Topology:
        """The topology the plugin's fixtures and load defaults read (``topology``, ``timing``).

        Regions, weights, the load defaults and whatever timing the profile states come from
        the profile. Fields a profile does not carry keep the topology defaults and mean
        nothing for an external federation: the ``timing`` fixture's other values are only
        timeouts for conformance checks, and capacities are read from
        :meth:`gameday.interfaces.Target.regions` (None where unknown), never from here.
        """
        first, _, rest = self.service.fqdn.rstrip(".").partition(".")
        service = first if _LABEL.match(first) else "app"
        zone = rest if rest and _ZONE.match(rest) else "external.invalid"
        regions = [Region(name=r.name, weight=r.weight, instances=2,
                          capacity_rps=(r.capacity_rps / 2) if r.capacity_rps is not None else 40.0)
                   for r in self.regions]
        return Topology(name=self.name, zone=zone, service=service, timing=self._timing(), load=self.load,
                        regions=regions)


# -- loading ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadedProfile:
    """A profile with the file it came from and a hash of what was read."""

    profile: Profile
    path: Path
    """Absolute path of the profile file."""
    sha256: str
    """Of the file's text as validated; ``gameday restore`` compares it with the file's."""

    @property
    def base_dir(self) -> Path:
        """Where relative paths resolve and commands run: the profile's directory."""
        return self.path.parent


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_profile(data: Any, source: str = "<profile>", *, lenient: bool = False) -> Profile:
    """Validate already-parsed YAML/JSON data; raise :class:`ConfigError` naming *source*.

    *lenient*: a source kind not registered in this process is kept as written instead of
    refused (``gameday restore`` reads a profile for its fault commands only, without the
    conftest or plugin that registered the kind)."""
    if data is None:
        raise ConfigError(f"{source}: is empty, expected a federation profile (see {EXAMPLE})", source=source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__} {shown(data)}",
                          source=source)
    try:
        return Profile.model_validate(data, context={LENIENT: lenient})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(format_validation_error(source, exc, root=Profile, example=EXAMPLE), source=source,
                          field=_loc(tuple(first["loc"]))) from exc


def load_profile(path: str | Path, *, lenient: bool = False) -> LoadedProfile:
    """Load and validate a profile YAML file (*lenient*: as :func:`parse_profile`).

    Raises:
        ConfigError: the file is missing, unreadable, too large, not UTF-8, not YAML, or a
            field is invalid; the message names the file and the line or the field.
    """
    p = Path(path).absolute()
    text = read_text_file(p, "federation profile")
    key = (p, text_sha256(text), lenient)
    loaded = _PARSED.get(key)
    if loaded is None:
        profile = parse_profile(load_yaml(text, str(path)), str(path), lenient=lenient)
        loaded = _PARSED[key] = LoadedProfile(profile, p, key[1])
    return loaded


_PARSED: dict[tuple[Path, str, bool], LoadedProfile] = {}
"""Profiles already validated, by file and text: the session, the target and its parts each load
the profile, and one text is validated once (the models are frozen, so one object is shared); a
file that changed is read as it is now."""
