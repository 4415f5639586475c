"""The federation topology: what regions exist, their weights, capacities and timings.

A topology is a YAML file (``clusters/local.yaml`` is the default). It is validated
into frozen pydantic models; every error names the file, the field, the value and
what was expected, e.g.::

    clusters/bad.yaml: regions[1].weight: got -5, expected a number > 0

Units are in the field names' docstrings: seconds for times, requests/s for rates.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gameday.errors import ConfigError
from gameday.resources import clusters_dir

#: Key of the global tier's cluster in :attr:`Topology.contexts` (not a region name).
GLOBAL_CLUSTER = "global"

#: The topology used when none is given.
DEFAULT_TOPOLOGY = clusters_dir() / "local.yaml"

_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")
_ZONE = re.compile(r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Timing(_Model):
    """Timings of the federation's sync chain. All values are seconds unless noted."""

    probe_interval: float = Field(1.0, gt=0, le=60)
    """Agent and GSLB health-probe period. 1 s is the production default; the local
    topology lowers it so drills are short."""
    probe_timeout: float = Field(0.25, gt=0, le=10)
    """A probe that has not answered within this is a failure (hung gateway)."""
    fall: int = Field(3, ge=1, le=100)
    """Consecutive failed probes before an instance or gateway is removed (R2: 3)."""
    rise: int = Field(2, ge=1, le=100)
    """Consecutive successful probes before re-admission (R2)."""
    heartbeat_interval: float = Field(1.0, gt=0, le=60)
    """Agents' heartbeat period and the control plane's version re-broadcast period."""
    region_timeout: float = Field(3.0, gt=0, le=600)
    """A region whose agent has not been heard for this long is marked not alive."""
    stale_after: float = Field(10.0, gt=0, le=3600)
    """A proxy lagging the broadcast, or hearing none, for this long raises the alarm (R6)."""
    reconcile_interval: float = Field(300.0, gt=0, le=86400)
    """Period of the slow full reconciliation of quotas and labels (R3: 5 minutes)."""
    dns_ttl: int = Field(5, ge=0, le=86400)
    """TTL in seconds of the GSLB's answers for the service name."""
    ramp_seconds: float = Field(10.0, ge=0, le=3600)
    """A re-admitted region's DNS weight ramps linearly from 0 to full over this (R10)."""
    request_budget: float = Field(0.5, gt=0, le=30)
    """Total time a gateway may spend on one request including its one retry (R7)."""

    @model_validator(mode="after")
    def _timeout_below_interval(self) -> Timing:
        if self.probe_timeout > self.probe_interval * 5:
            raise ValueError(
                f"probe_timeout {self.probe_timeout} s is more than 5x probe_interval "
                f"{self.probe_interval} s; probes would pile up"
            )
        return self


class ControlPlane(_Model):
    """How the federation control plane keeps its state."""

    state: Literal["durable", "ephemeral"] = "durable"
    """``durable`` keeps the snapshot in JetStream KV (survives restarts); ``ephemeral``
    keeps it in memory only, a real misconfiguration the negative controls use."""
    broadcast_delay: float = Field(0.0, ge=0, le=3600)
    """Seconds each version broadcast is held back (the calibrated sync delay)."""


class Defects(_Model):
    """Deliberate misconfigurations, for negative controls: a federation that is broken on
    purpose so a verdict can be shown to fail. Never set these for a real drill."""

    proxy_never_refresh: list[str] = Field(default_factory=list)
    """Regions whose proxy hears broadcasts but never pulls the diff (stale snapshot)."""
    gateway_no_fallback: list[str] = Field(default_factory=list)
    """Regions whose gateway has local fallback disabled (R7 broken)."""
    gslb_ignore_weights: bool = False
    """The GSLB answers uniformly instead of by weight (R8 broken)."""


class Region(_Model):
    """One region (one cluster) of the federation."""

    name: str
    """DNS label, e.g. ``a`` or ``eu-west``."""
    weight: float = Field(gt=0, le=1000)
    """Static global routing weight (R8), relative to the other regions."""
    fallback: str | None = None
    """Region the gateway forwards to when no local instance is ready (R7)."""
    instances: int = Field(2, ge=1, le=50)
    """App instances in the region (>= 2 so one can fail)."""
    capacity_rps: float = Field(40.0, gt=0, le=1_000_000)
    """Declared capacity of each instance, requests/s; above it the app answers 503."""
    quota: dict[str, int] = Field(default_factory=dict)
    """Slow state (R3): resource quotas, reconciled on the full pass only."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Slow state (R3): labels, reconciled on the full pass only."""

    @field_validator("name")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        if not _LABEL.match(v):
            raise ValueError(f"got {v!r}, expected a DNS label ([a-z][a-z0-9-]*, <= 32 chars)")
        return v

    @property
    def capacity(self) -> float:
        """Total declared capacity of the region, requests/s."""
        return self.instances * self.capacity_rps


class Load(_Model):
    """The default offered load for drills."""

    users: int = Field(20, ge=1, le=10_000)
    """Simulated clients; each resolves the service name and honours the TTL."""
    rate: float = Field(60.0, gt=0, le=1_000_000)
    """Offered load across all users, requests/s."""
    margin: float = Field(0.2, ge=0, le=10)
    """N-1 headroom margin: capacity(all but r) >= rate * (1 + margin)."""


class Topology(_Model):
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
    regions: list[Region] = Field(min_length=1, max_length=250)
    contexts: dict[str, str] | None = None
    """kube/kind targets: the kubeconfig context of each cluster, ``{region: context}``
    plus the global tier under the key ``global`` (control plane, GSLB, NATS). Every
    region and ``global`` need one; ``None`` for the local target, which has no clusters."""

    @field_validator("zone")
    @classmethod
    def _zone_name(cls, v: str) -> str:
        if not _ZONE.match(v):
            raise ValueError(f"got {v!r}, expected a DNS zone name such as 'gameday.test'")
        return v

    @field_validator("service")
    @classmethod
    def _service_label(cls, v: str) -> str:
        if not _LABEL.match(v):
            raise ValueError(f"got {v!r}, expected a DNS label")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> Topology:
        names = [r.name for r in self.regions]
        seen: set[str] = set()
        for i, n in enumerate(names):
            if n in seen:
                raise ValueError(f"regions[{i}].name: {n!r} is used twice; region names must be unique")
            seen.add(n)
        for i, r in enumerate(self.regions):
            if r.fallback is not None and r.fallback not in seen:
                raise ValueError(
                    f"regions[{i}].fallback: got {r.fallback!r}, expected one of {sorted(seen)}"
                )
            if r.fallback == r.name:
                raise ValueError(f"regions[{i}].fallback: a region cannot fall back to itself ({r.name!r})")
        for fld in ("proxy_never_refresh", "gateway_no_fallback"):
            for r in getattr(self.defects, fld):
                if r not in seen:
                    raise ValueError(f"defects.{fld}: got {r!r}, expected one of {sorted(seen)}")
        if self.contexts is not None:
            self._check_contexts(self.contexts, names)
        if self.primary is not None and self.primary not in seen:
            raise ValueError(f"primary: got {self.primary!r}, expected one of {sorted(seen)}")
        return self

    @staticmethod
    def _check_contexts(contexts: dict[str, str], names: list[str]) -> None:
        if GLOBAL_CLUSTER in names:
            raise ValueError(f"contexts: a region may not be called {GLOBAL_CLUSTER!r} when contexts are "
                             "given: that key names the global tier's cluster")
        expected = [*names, GLOBAL_CLUSTER]
        unknown = sorted(set(contexts) - set(expected))
        if unknown:
            raise ValueError(f"contexts: unknown key(s) {unknown}, expected region names or "
                             f"{GLOBAL_CLUSTER!r} ({', '.join(expected)})")
        missing = [n for n in expected if n not in contexts]
        if missing:
            raise ValueError(f"contexts: no context for {missing}; every region and {GLOBAL_CLUSTER!r} "
                             "need a kubeconfig context")
        for key, ctx in contexts.items():
            if not ctx.strip() or len(ctx) > 253:
                raise ValueError(f"contexts.{key}: got {ctx!r}, expected a kubeconfig context name "
                                 "(1..253 characters)")

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


def format_validation_error(source: str, exc: ValidationError) -> str:
    """Render a pydantic error as ``file: field: got VALUE, expected ...`` lines."""
    lines = []
    for err in exc.errors():
        loc = _loc(tuple(err["loc"]))
        msg = str(err["msg"]).removeprefix("Value error, ")
        if msg.startswith(("regions[", "primary:", "defects.", "contexts")):
            lines.append(f"{source}: {msg}")
            continue
        if err["type"] == "extra_forbidden":
            lines.append(f"{source}: {loc}: unknown field (check the spelling; see clusters/local.yaml)")
            continue
        if err["type"] == "missing":
            lines.append(f"{source}: {loc}: required field is missing")
            continue
        if msg.startswith("got "):
            lines.append(f"{source}: {loc}: {msg}")
        else:
            expected = msg.removeprefix("Input should be ").removeprefix("Input should ")
            lines.append(f"{source}: {loc}: got {err.get('input')!r}, expected {expected}")
    return "\n".join(lines)


def parse_topology(data: Any, source: str = "<topology>") -> Topology:
    """Validate already-parsed YAML/JSON data; raise :class:`ConfigError` naming *source*."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping at the top level, got {type(data).__name__}", source=source
        )
    try:
        return Topology.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(
            format_validation_error(source, exc), source=source, field=_loc(tuple(first["loc"]))
        ) from exc


def load_topology(path: str | Path | None = None) -> Topology:
    """Load and validate a topology YAML file (the default one if *path* is None).

    Raises:
        ConfigError: the file is missing, is not YAML, or a field is invalid; the
            message names the file and the field.
    """
    p = Path(path) if path is not None else DEFAULT_TOPOLOGY
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read topology file ({exc.strerror})", source=str(p)) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}", source=str(p)) from exc
    return parse_topology(data, str(p))
