"""Turn a topology into a :class:`FederationSpec`: pick addresses and free ports.

A port that is free when planned is bound by its component a moment later; two
processes planning at once (two drills from one checkout, two xdist workers) could both
pick it. Every pick is therefore recorded, under a file lock, in a per-user reservation
file in the temporary directory: a reserved port is never picked again while the
process that reserved it lives (so a component restarted by a revert gets its port
back), and reservations of dead processes are dropped on the next pick.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import socket
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from gameday.errors import TargetError
from gameday.fedapp.spec import Endpoint, FederationSpec, InstanceSpec, RegionSpec, region_address
from gameday.procs import pid_alive, starttime
from gameday.topology import Topology

GLOBAL_HOST = "127.0.0.1"


#: Ports are picked below Linux's ephemeral range (ip_local_port_range, 32768-60999 by
#: default): a port planned now is bound by its component a moment later, and in between
#: an outgoing connection elsewhere on the machine could be given an ephemeral port.
PORT_RANGE = (20000, 32700)


def _reservations_path() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"gameday-ports-{uid}.json"


class _Picker:
    """Port picks under the reservation lock; :meth:`commit` records them."""

    def __init__(self) -> None:
        self.path = _reservations_path()
        self.taken: dict[str, list[int | None]] = {}
        self.new: list[int] = []

    def load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            data = {}  # absent or damaged: it only ever holds hints, start afresh
        if not isinstance(data, dict):
            data = {}
        self.taken = {}
        for port, owner in data.items():
            with contextlib.suppress(TypeError, ValueError, IndexError):
                pid, start = int(owner[0]), (None if owner[1] is None else int(owner[1]))
                if pid_alive(pid, start):
                    self.taken[str(int(port))] = [pid, start]

    def reserved(self, port: int) -> bool:
        return str(port) in self.taken or port in self.new

    def free_port(self, host: str = GLOBAL_HOST, kind: int = socket.SOCK_STREAM) -> int:
        for _ in range(64):
            port = random.randrange(*PORT_RANGE)
            if self.reserved(port):
                continue
            with socket.socket(socket.AF_INET, kind) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
            self.new.append(port)
            return port
        for _ in range(16):  # crowded: let the OS pick
            with socket.socket(socket.AF_INET, kind) as s:
                s.bind((host, 0))
                port = int(s.getsockname()[1])
            if not self.reserved(port):
                self.new.append(port)
                return port
        raise TargetError(f"no free {'UDP' if kind == socket.SOCK_DGRAM else 'TCP'} port on {host}")

    def forget(self, port: int) -> None:
        """Drop a pick that turned out unusable (it was reserved in this batch only)."""
        with contextlib.suppress(ValueError):
            self.new.remove(port)

    def commit(self) -> None:
        me = [os.getpid(), starttime(os.getpid())]
        for port in self.new:
            self.taken[str(port)] = me
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.taken))
        os.replace(tmp, self.path)


@contextlib.contextmanager
def _picking() -> Iterator[_Picker]:
    picker = _Picker()
    try:
        lock = FileLock(str(picker.path) + ".lock", timeout=30)
        lock.acquire()
    except Timeout as exc:
        raise TargetError(f"could not lock the port reservations {picker.path} in 30 s: another process "
                          "holds its lock; remove the .lock file if no gameday runs") from exc
    try:
        picker.load()
        yield picker
        picker.commit()
    finally:
        lock.release()


def release_ports(spec: FederationSpec) -> None:
    """Give back the ports *spec* reserved (when its federation has stopped)."""
    ports = {spec.nats_port, spec.control_plane.port, spec.gslb_dns.port, spec.gslb_http.port, spec.gateway_port}
    for r in spec.regions:
        ports |= {r.proxy.port, r.agent.port, *(i.endpoint.port for i in r.instances)}
        if r.control_plane is not None:
            ports.add(r.control_plane.port)
    release(ports | {ep.port for ep in spec.admin.values()})


def release(ports: Iterable[int]) -> None:
    """Give back ports this process reserved."""
    mine = os.getpid()
    # Best effort: an unreleased reservation only lasts until this process exits.
    with contextlib.suppress(OSError, TimeoutError), FileLock(str(_reservations_path()) + ".lock", timeout=5):
        picker = _Picker()
        picker.load()
        for port in ports:
            owner = picker.taken.get(str(port))
            if owner is not None and owner[0] == mine:
                del picker.taken[str(port)]
        picker._write()


def free_port(host: str = GLOBAL_HOST, kind: int = socket.SOCK_STREAM) -> int:
    """A port that is free on *host* right now, outside the ephemeral range when possible,
    and reserved for this process (see the module docstring)."""
    with _picking() as picker:
        return picker.free_port(host, kind)


def _port_free(host: str, port: int) -> bool:
    for kind in (socket.SOCK_STREAM,):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def _common_free_port(picker: _Picker, hosts: list[str], attempts: int) -> int:
    for _ in range(attempts):
        port = picker.free_port(hosts[0])
        if all(_port_free(h, port) for h in hosts[1:]):
            return port
        picker.forget(port)
    raise TargetError(f"no TCP port free on all of {len(hosts)} region addresses after {attempts} tries")


def common_free_port(hosts: list[str], attempts: int = 200) -> int:
    """A TCP port free on every host in *hosts* (gateways share one: DNS carries no port)."""
    with _picking() as picker:
        return _common_free_port(picker, hosts, attempts)


def _dns_port(picker: _Picker) -> int:
    for _ in range(200):
        port = picker.free_port(GLOBAL_HOST, socket.SOCK_DGRAM)
        if _port_free(GLOBAL_HOST, port):
            return port
        picker.forget(port)
    raise TargetError("no port free for both UDP and TCP on 127.0.0.1")


def dns_port() -> int:
    """A port free for both UDP and TCP on the global address (the GSLB serves both)."""
    with _picking() as picker:
        return _dns_port(picker)


def new_run_id() -> str:
    """A run id no other federation on this machine has: the planning process's pid (unique
    among live processes) and 32 random bits (against pid reuse). It names NATS subjects,
    streams and the launcher's socket, so it stays short and within ``[A-Za-z0-9-]``."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


def plan_federation(topology: Topology, workdir: Path, run_id: str | None = None, *,
                    separate_admin: bool = False) -> FederationSpec:
    """Assign addresses and free ports to every component of *topology*.

    Region N (1-based, in file order) gets 127.0.N.0/24: gateway .1, proxy .2,
    agent .3, the regional control plane .4 (regional layout only), app instance k at
    .(10+k). Global components are on 127.0.0.1. With *separate_admin* every HTTP
    component also gets an admin port of its own on its own address (``spec.admin``).
    """
    with _picking() as picker:
        spec = _plan(picker, topology, workdir, run_id or new_run_id())
        if separate_admin:
            admin = {name: Endpoint(host=ep.host, port=picker.free_port(ep.host))
                     for name, ep in spec.http_endpoints().items()}
            spec = spec.model_copy(update={"admin": admin})
        return spec


def _plan(picker: _Picker, topology: Topology, workdir: Path, run_id: str) -> FederationSpec:
    free_port = picker.free_port
    gateway_hosts = [region_address(i + 1, 1) for i in range(len(topology.regions))]
    gw_port = _common_free_port(picker, gateway_hosts, 200)
    regions: list[RegionSpec] = []
    for i, r in enumerate(topology.regions):
        n = i + 1
        proxy_host, agent_host = region_address(n, 2), region_address(n, 3)
        cp_host = region_address(n, 4)
        regional_cp = (Endpoint(host=cp_host, port=free_port(cp_host)) if topology.layout == "regional"
                       else None)
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
        gslb_dns=Endpoint(host=GLOBAL_HOST, port=_dns_port(picker)),
        gslb_http=Endpoint(host=GLOBAL_HOST, port=free_port()),
        gateway_port=gw_port,
        regions=regions,
    )
