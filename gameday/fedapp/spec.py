"""The resolved federation: the app's view of a topology plus the addresses and ports each component got.

The launcher writes one ``spec.json`` per federation into its work directory; every
component process reads it (``--spec``) and finds its own section by role, region and
instance. Addresses: region number N (1-based) owns the loopback ``127.0.N.0/24``:

======================  ===================  ===========================
component               address              port
======================  ===================  ===========================
gateway of region N     127.0.N.1            ``gateway_port`` (same for all
                                             regions: DNS answers carry no port)
local proxy             127.0.N.2            free port
region agent            127.0.N.3            free port (HTTP status/admin)
regional control plane  127.0.N.4            free port (regional layout only, R14)
store node (NATS)       127.0.N.5            free ports (state layer only)
app instance k          127.0.N.(10+k)       free port
NATS, control plane,    127.0.0.1            free ports
GSLB (DNS UDP+TCP, HTTP)
======================  ===================  ===========================

With ``admin`` planned (the local target does), each HTTP component also has an admin
listener of its own, on its own address and a free port: its admin paths are served only
there (:mod:`gameday.fedapp.skeleton`).

The reference app owns these types: it imports nothing of the harness (the import-linter
contract in pyproject.toml forbids :mod:`gameday.model.topology` too), so a component process
starts with only its own dependencies. :class:`AppTopology` is the part of the harness's
topology the components act on (zone, service, timings, control-plane layout and state, the
negative controls' defects); the harness builds it from its validated topology
(:mod:`gameday.targets.fedapp_spec`) and keeps what only it needs (kubeconfig contexts, the
offered load, per-region capacities as a model) to itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Spec(BaseModel):
    # Frozen and strict about unknown fields: spec.json is written by the harness and read by
    # every component; a field one side knows and the other does not is a version skew to see.
    model_config = ConfigDict(frozen=True, extra="forbid")


class AppTiming(_Spec):
    """The sync chain's timings the components act on; seconds unless noted (the harness's
    topology validates them and documents each: ``gameday.model.topology.Timing``)."""

    probe_interval: float
    """Agent and GSLB health-probe period."""
    probe_timeout: float
    """A probe that has not answered within this is a failure."""
    fall: int
    """Consecutive failed probes before removal (R2)."""
    rise: int
    """Consecutive successful probes before re-admission (R2)."""
    heartbeat_interval: float
    """Agents' heartbeat period and the control plane's version re-broadcast period."""
    region_timeout: float
    """A region not heard for this long is marked not alive."""
    stale_after: float
    """A proxy lagging or hearing no broadcast for this long raises the alarm (R6)."""
    reconcile_interval: float
    """Period of the slow full reconciliation (R3)."""
    dns_ttl: int
    """TTL of the GSLB's answers for the service name."""
    ramp_seconds: float
    """A re-admitted region's DNS weight ramps from 0 to full over this (R10)."""
    request_budget: float
    """Total time a gateway may spend on one request including its retry (R7)."""
    gslb_delay: float = 0.0
    """The GSLB applies health decisions to its answers in batches this many seconds apart (0: at once)."""


class AppControlPlane(_Spec):
    """How the control plane keeps its state."""

    state: Literal["durable", "ephemeral"] = "durable"
    """``durable``: the snapshot in JetStream KV; ``ephemeral``: in memory only (a negative control)."""
    broadcast_delay: float = 0.0
    """Seconds each version broadcast is held back (the calibrated sync delay)."""


class AppDefects(_Spec):
    """Deliberate misconfigurations for negative controls (the harness's ``Defects``); the
    defaults are a healthy federation."""

    proxy_never_refresh: list[str] = Field(default_factory=list)
    """Regions whose proxy hears broadcasts but never pulls the diff."""
    gateway_no_fallback: list[str] = Field(default_factory=list)
    """Regions whose gateway has local fallback disabled."""
    gslb_ignore_weights: bool = False
    """The GSLB answers uniformly instead of by weight."""
    probe_interval_factor: float = 1.0
    """The GSLB and agents probe every ``factor x probe_interval``."""
    gslb_answer_lag: float = 0.0
    """Seconds the GSLB keeps answering with a region after taking it out."""
    unfenced_old_primary: bool = False
    """``async``: the store controller never fences an old primary, and its region's apps keep writing to it."""
    reads_from_local_replica: bool = False
    """``async``: reads by id are served from the instance's own region's copy, not the primary's."""
    slow_promotion: float = 0.0
    """``async``: seconds the store controller waits, once it declared the primary failed, before it promotes."""
    consumers_per_region: bool = False
    """Each region's workers consume the task queue through a consumer of their own, unclaimed."""
    gateway_needs_sync: list[str] = Field(default_factory=list)
    """Regions whose gateway refuses to route once no broadcast was heard for four heartbeats (R1 broken)."""
    proxy_needs_sync: list[str] = Field(default_factory=list)
    """Regions whose proxy refuses to route once it has heard no broadcast for two heartbeats (R1)."""
    proxy_full_pulls: list[str] = Field(default_factory=list)
    """Regions whose proxy pulls the full snapshot on every change (R4)."""
    proxy_no_stale_alarm: list[str] = Field(default_factory=list)
    """Regions whose proxy never raises the stale-snapshot alarm (R6)."""
    gslb_no_ramp: bool = False
    """The GSLB re-admits a region at full weight at once (R10)."""
    cp_event_delay: float = 0.0
    """Seconds the control plane's consumer waits before applying each event (R13)."""
    release_all_at_once: bool = False
    """The release controller upgrades every instance of every region at once (R12)."""
    reconcile_every: float = 0.0
    """Seconds between the control plane's full passes, whatever its interval states (R3); 0: as stated."""
    livez_follows_readyz: list[str] = Field(default_factory=list)
    """Regions whose app instances fail ``/livez`` whenever they are unready (R11)."""
    slow_auto_merge: bool = False
    """A label conflict goes to a non-primary region's value, not the primary's (R3)."""


class AppState(_Spec):
    """The data store the app writes to (the harness's ``State``; DESIGN.md section 9)."""

    replicas: int = Field(ge=1, le=5)
    """Replicas of the data stream: an acknowledgement means this many nodes' quorum holds it."""
    storage: Literal["file", "memory"] = "file"
    placement: str | None = None
    """The region whose node holds the only replica (``replicas`` 1); None: JetStream places it."""
    mode: Literal["sync", "async", "none"] = "sync"
    """``async``: a stream per store node, the store controller (:mod:`gameday.fedapp.storectl`)
    replicates from the primary's and promotes a standby when the primary fails."""
    primary: str = ""
    """``async``: the region whose store is primary at start."""
    replication_interval: float = 0.1
    """``async``: seconds between the replicator's copies (at most the stated max lag)."""
    queue_replicas: int = Field(1, ge=1, le=5)
    """Replicas of the task queue and its processed records."""


class AppTopology(_Spec):
    """What the reference app needs of the federation's topology (the regions themselves
    are :attr:`FederationSpec.regions`, with their addresses)."""

    name: str
    zone: str
    """Authoritative DNS zone served by the GSLB."""
    service: str
    """Service label; clients resolve ``<service>.<zone>``."""
    primary_region: str
    """Wins slow-state conflicts (R3)."""
    layout: Literal["global", "regional"]
    """The control-plane layout in force (R14)."""
    timing: AppTiming
    control_plane: AppControlPlane = Field(default_factory=AppControlPlane)
    defects: AppDefects = Field(default_factory=AppDefects)
    state: AppState | None = None
    """The data store (a nats-server in the primary region and the next two,
    :attr:`RegionSpec.store`); None: no data path."""

    @property
    def fqdn(self) -> str:
        """The service's fully qualified name, e.g. ``app.gameday.test.``."""
        return f"{self.service}.{self.zone}."


class Endpoint(BaseModel):
    """A host and port; ``url`` is its HTTP base URL."""

    model_config = ConfigDict(frozen=True)
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class InstanceSpec(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    """``<region>-<k>``, e.g. ``a-1``."""
    endpoint: Endpoint
    capacity_rps: float


class RegionSpec(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    index: int
    """1-based region number N; the region owns 127.0.N.0/24."""
    weight: float
    fallback: str | None
    gateway: Endpoint
    proxy: Endpoint
    agent: Endpoint
    instances: list[InstanceSpec]
    quota: dict[str, int]
    labels: dict[str, str]
    control_plane: Endpoint | None = None
    """The region's own control plane (the regional layout, R14); None in the global layout."""
    store: Endpoint | None = None
    """The region's store node (a nats-server, clients' port) at 127.0.N.5; None: no state
    layer, or a region beyond the three that run one."""
    store_cluster: Endpoint | None = None
    """The same node's cluster (route) port."""


class FederationSpec(BaseModel):
    """Everything a component needs to know to find its peers."""

    model_config = ConfigDict(frozen=True)
    run_id: str
    """Unique per federation; prefixes the NATS stream/bucket names so two federations
    never share state even if they shared a server."""
    workdir: str
    topology: AppTopology
    nats_url: str
    nats_port: int
    control_plane: Endpoint
    gslb_dns: Endpoint
    """UDP and TCP on the same port."""
    gslb_http: Endpoint
    gateway_port: int
    regions: list[RegionSpec]
    storectl: Endpoint | None = None
    """The store controller (``async`` replication only): replicates, promotes, announces."""
    admin: dict[str, Endpoint] = {}
    """Component name (:meth:`http_endpoints`) -> the address of its own admin listener, on
    the component's own host; a component not named here serves admin on its public port
    unless ``$GAMEDAY_ADMIN_LISTEN`` names one (the Kubernetes pods: their spec has none)."""

    @property
    def regional(self) -> bool:
        """True when the federation runs the regional control-plane layout (R14)."""
        return self.topology.layout == "regional"

    def region(self, name: str) -> RegionSpec:
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(name)

    def instance(self, name: str) -> tuple[RegionSpec, InstanceSpec]:
        for r in self.regions:
            for i in r.instances:
                if i.name == name:
                    return r, i
        raise KeyError(name)

    def http_endpoints(self) -> dict[str, Endpoint]:
        """Every HTTP component's public endpoint by its name: ``controlplane``,
        ``controlplane-<r>`` (regional layout), ``gslb``, ``agent-<r>``, ``gateway-<r>``,
        ``proxy-<r>``, ``app-<instance>``."""
        out = {"controlplane": self.control_plane, "gslb": self.gslb_http}
        if self.storectl is not None:
            out["storectl"] = self.storectl
        for r in self.regions:
            if r.control_plane is not None:
                out[f"controlplane-{r.name}"] = r.control_plane
            out |= {f"agent-{r.name}": r.agent, f"gateway-{r.name}": r.gateway, f"proxy-{r.name}": r.proxy}
            out |= {f"app-{i.name}": i.endpoint for i in r.instances}
        return out

    def dump(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> FederationSpec:
        return cls.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))


def region_address(index: int, host: int) -> str:
    """Loopback address of host number *host* in region number *index* (1-based)."""
    if not 1 <= index <= 250:
        raise ValueError(f"region index {index} outside 1..250")
    return f"127.0.{index}.{host}"
