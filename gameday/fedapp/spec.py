"""The resolved federation: a topology plus the addresses and ports each component got.

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
app instance k          127.0.N.(10+k)       free port
NATS, control plane,    127.0.0.1            free ports
GSLB (DNS UDP+TCP, HTTP)
======================  ===================  ===========================

With ``admin`` planned (the local target does), each HTTP component also has an admin
listener of its own, on its own address and a free port: its admin paths are served only
there (:mod:`gameday.fedapp.skeleton`).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gameday.topology import Topology


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


class FederationSpec(BaseModel):
    """Everything a component needs to know to find its peers."""

    model_config = ConfigDict(frozen=True)
    run_id: str
    """Unique per federation; prefixes the NATS stream/bucket names so two federations
    never share state even if they shared a server."""
    workdir: str
    topology: Topology
    nats_url: str
    nats_port: int
    control_plane: Endpoint
    gslb_dns: Endpoint
    """UDP and TCP on the same port."""
    gslb_http: Endpoint
    gateway_port: int
    regions: list[RegionSpec]
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
