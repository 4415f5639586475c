"""Turn a topology into a :class:`FederationSpec`: pick addresses and free ports.

Ports come from :mod:`gameday.runtime.ports`, which reserves each pick across processes (two
drills from one checkout, two xdist workers), so two federations never plan the same one.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

from gameday.errors import TargetError
from gameday.fedapp.spec import Endpoint, FederationSpec, InstanceSpec, RegionSpec, region_address
from gameday.model.topology import Topology
from gameday.runtime.ports import PortPicker, picking, port_free, release
from gameday.targets.fedapp_spec import app_topology

GLOBAL_HOST = "127.0.0.1"


def release_ports(spec: FederationSpec) -> None:
    """Give back the ports *spec* reserved (when its federation has stopped)."""
    ports = {spec.nats_port, spec.control_plane.port, spec.gslb_dns.port, spec.gslb_http.port, spec.gateway_port}
    if spec.storectl is not None:
        ports.add(spec.storectl.port)
    for r in spec.regions:
        ports |= {r.proxy.port, r.agent.port, *(i.endpoint.port for i in r.instances)}
        if r.control_plane is not None:
            ports.add(r.control_plane.port)
        if r.store is not None and r.store_cluster is not None:
            ports |= {r.store.port, r.store_cluster.port}
    release(ports | {ep.port for ep in spec.admin.values()})


def _common_free_port(picker: PortPicker, hosts: list[str], attempts: int) -> int:
    for _ in range(attempts):
        port = picker.free_port(hosts[0])
        if all(port_free(h, port) for h in hosts[1:]):
            return port
        picker.forget(port)
    raise TargetError(f"no TCP port free on all of {len(hosts)} region addresses after {attempts} tries")


def common_free_port(hosts: list[str], attempts: int = 200) -> int:
    """A TCP port free on every host in *hosts* (gateways share one: DNS carries no port)."""
    with picking() as picker:
        return _common_free_port(picker, hosts, attempts)


def _dns_port(picker: PortPicker) -> int:
    for _ in range(200):
        port = picker.free_port(GLOBAL_HOST, socket.SOCK_DGRAM)
        if port_free(GLOBAL_HOST, port):
            return port
        picker.forget(port)
    raise TargetError("no port free for both UDP and TCP on 127.0.0.1")


def dns_port() -> int:
    """A port free for both UDP and TCP on the global address (the GSLB serves both)."""
    with picking() as picker:
        return _dns_port(picker)


def new_run_id() -> str:
    """A run id no other federation on this machine has: the planning process's pid (unique
    among live processes) and 32 random bits (against pid reuse). It names NATS subjects,
    streams and the launcher's socket, so it stays short and within ``[A-Za-z0-9-]``."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


STORE_NODES = 3
"""Store nodes at most (a Raft group of 3 survives one node's loss; more only costs CPU)."""


def store_node_regions(topology: Topology) -> list[str]:
    """The regions that run a store node (a state layer): the primary region, then the next
    ones in topology order, :data:`STORE_NODES` at most; none without a state layer."""
    if topology.state is None:
        return []
    names = [r.name for r in topology.regions]
    primary = topology.primary_region
    return [primary, *(n for n in names if n != primary)][:STORE_NODES]


def plan_federation(topology: Topology, workdir: Path, run_id: str | None = None, *,
                    separate_admin: bool = False) -> FederationSpec:
    """Assign addresses and free ports to every component of *topology*.

    Region N (1-based, in file order) gets 127.0.N.0/24: gateway .1, proxy .2,
    agent .3, the regional control plane .4 (regional layout only), the store node .5
    (a state layer only), app instance k at
    .(10+k). Global components are on 127.0.0.1. With *separate_admin* every HTTP
    component also gets an admin port of its own on its own address (``spec.admin``).
    """
    with picking() as picker:
        spec = _plan(picker, topology, workdir, run_id or new_run_id())
        if separate_admin:
            admin = {name: Endpoint(host=ep.host, port=picker.free_port(ep.host))
                     for name, ep in spec.http_endpoints().items()}
            spec = spec.model_copy(update={"admin": admin})
        return spec


def _plan(picker: PortPicker, topology: Topology, workdir: Path, run_id: str) -> FederationSpec:
    free_port = picker.free_port
    gateway_hosts = [region_address(i + 1, 1) for i in range(len(topology.regions))]
    gw_port = _common_free_port(picker, gateway_hosts, 200)
    store_regions = store_node_regions(topology)
    regions: list[RegionSpec] = []
    for i, r in enumerate(topology.regions):
        n = i + 1
        proxy_host, agent_host = region_address(n, 2), region_address(n, 3)
        cp_host = region_address(n, 4)
        regional_cp = (Endpoint(host=cp_host, port=free_port(cp_host)) if topology.layout == "regional"
                       else None)
        store_host = region_address(n, 5)
        store, store_cluster = ((Endpoint(host=store_host, port=free_port(store_host)),
                                 Endpoint(host=store_host, port=free_port(store_host)))
                                if r.name in store_regions else (None, None))
        instances = []
        for k in range(1, r.instances + 1):
            host = region_address(n, 10 + k)
            instances.append(
                InstanceSpec(name=f"{r.name}-{k}", endpoint=Endpoint(host=host, port=free_port(host)),
                             capacity_rps=r.capacity_rps)
            )
        regions.append(
            RegionSpec(
                name=r.name,
                index=n,
                weight=r.weight,
                fallback=r.fallback,
                gateway=Endpoint(host=gateway_hosts[i], port=gw_port),
                proxy=Endpoint(host=proxy_host, port=free_port(proxy_host)),
                agent=Endpoint(host=agent_host, port=free_port(agent_host)),
                instances=instances,
                quota=dict(r.quota),
                labels=dict(r.labels),
                control_plane=regional_cp,
                store=store,
                store_cluster=store_cluster,
            )
        )
    nats_port = free_port()
    return FederationSpec(
        run_id=run_id,
        workdir=str(workdir),
        topology=app_topology(topology),
        nats_url=f"nats://{GLOBAL_HOST}:{nats_port}",
        nats_port=nats_port,
        control_plane=Endpoint(host=GLOBAL_HOST, port=free_port()),
        gslb_dns=Endpoint(host=GLOBAL_HOST, port=_dns_port(picker)),
        gslb_http=Endpoint(host=GLOBAL_HOST, port=free_port()),
        gateway_port=gw_port,
        regions=regions,
        storectl=(Endpoint(host=GLOBAL_HOST, port=free_port())
                  if topology.state is not None and topology.state.replication == "async" else None),
    )
