"""Turn a topology into a :class:`FederationSpec`: pick addresses and free ports."""

from __future__ import annotations

import random
import secrets
import socket
from pathlib import Path

from gameday.errors import TargetError
from gameday.fedapp.spec import Endpoint, FederationSpec, InstanceSpec, RegionSpec, region_address
from gameday.topology import Topology

GLOBAL_HOST = "127.0.0.1"


#: Ports are picked below Linux's ephemeral range (ip_local_port_range, 32768-60999 by
#: default): a port planned now is bound by its component a moment later, and in between
#: an outgoing connection elsewhere on the machine could be given an ephemeral port.
PORT_RANGE = (20000, 32700)


def free_port(host: str = GLOBAL_HOST, kind: int = socket.SOCK_STREAM) -> int:
    """A port that is free on *host* right now, outside the ephemeral range when possible."""
    for _ in range(64):
        port = random.randrange(*PORT_RANGE)
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, kind) as s:  # crowded: let the OS pick
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_free(host: str, port: int) -> bool:
    for kind in (socket.SOCK_STREAM,):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def common_free_port(hosts: list[str], attempts: int = 200) -> int:
    """A TCP port free on every host in *hosts* (gateways share one: DNS carries no port)."""
    for _ in range(attempts):
        port = free_port(hosts[0])
        if all(_port_free(h, port) for h in hosts[1:]):
            return port
    raise TargetError(f"no TCP port free on all of {len(hosts)} region addresses after {attempts} tries")


def dns_port() -> int:
    """A port free for both UDP and TCP on the global address (the GSLB serves both)."""
    for _ in range(200):
        port = free_port(GLOBAL_HOST, socket.SOCK_DGRAM)
        if _port_free(GLOBAL_HOST, port):
            return port
    raise TargetError("no port free for both UDP and TCP on 127.0.0.1")


def plan_federation(topology: Topology, workdir: Path, run_id: str | None = None) -> FederationSpec:
    """Assign addresses and free ports to every component of *topology*.

    Region N (1-based, in file order) gets 127.0.N.0/24: gateway .1, proxy .2,
    agent .3, app instance k at .(10+k). Global components are on 127.0.0.1.
    """
    run_id = run_id or secrets.token_hex(4)
    gateway_hosts = [region_address(i + 1, 1) for i in range(len(topology.regions))]
    gw_port = common_free_port(gateway_hosts)
    regions: list[RegionSpec] = []
    for i, r in enumerate(topology.regions):
        n = i + 1
        proxy_host, agent_host = region_address(n, 2), region_address(n, 3)
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
            )
        )
    nats_port = free_port()
    return FederationSpec(
        run_id=run_id,
        workdir=str(workdir),
        topology=topology,
        nats_url=f"nats://{GLOBAL_HOST}:{nats_port}",
        nats_port=nats_port,
        control_plane=Endpoint(host=GLOBAL_HOST, port=free_port()),
        gslb_dns=Endpoint(host=GLOBAL_HOST, port=dns_port()),
        gslb_http=Endpoint(host=GLOBAL_HOST, port=free_port()),
        gateway_port=gw_port,
        regions=regions,
    )
