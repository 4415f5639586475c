"""The ``local`` target: the embedded federation of local processes (no Docker, no root)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gameday.errors import ComponentFailed, ConfigError, FaultError, TargetUnreachable
from gameday.fedapp.federation import LocalFederation
from gameday.fedapp.wire import broadcast_subject
from gameday.targets.base import Endpoints, RegionInfo
from gameday.topology import Topology


class LocalTarget:
    """A :class:`~gameday.targets.base.Target` backed by :class:`LocalFederation`."""

    name = "local"

    def __init__(self, topology: Topology, workdir: Path, federation: LocalFederation | None = None) -> None:
        self.topology = topology
        self.workdir = workdir
        self.fed = federation or LocalFederation.from_topology(topology, workdir)
        self._offsets: dict[str, int] = {}
        self._up = federation is not None

    @classmethod
    def attach(cls, ref: dict[str, Any]) -> LocalTarget:
        """Re-attach from a ledger reference (``{"workdir": ...}``)."""
        fed = LocalFederation.attach(Path(ref["workdir"]))
        return cls(fed.spec.topology, Path(ref["workdir"]), fed)

    # -- lifecycle -----------------------------------------------------------------------
    def up(self) -> None:
        if not self._up:
            self.fed.start()
            self._up = True

    def deploy(self) -> None:
        """The local federation runs the app as part of :meth:`up`; wait until it serves."""
        self.fed.wait_ready(30)

    def down(self) -> None:
        self.fed.stop()
        self._up = False

    def ref(self) -> dict[str, Any]:
        return {"workdir": str(self.fed.workdir)}

    # -- description -----------------------------------------------------------------------
    def regions(self) -> list[RegionInfo]:
        return [
            RegionInfo(r.name, r.weight, r.capacity, self.fed.spec.region(r.name).gateway.host)
            for r in self.topology.regions
        ]

    def endpoints(self) -> Endpoints:
        s = self.fed.spec
        return Endpoints(
            dns_server=(s.gslb_dns.host, s.gslb_dns.port),
            fqdn=s.topology.fqdn,
            gateway_port=s.gateway_port,
            entry_nodes={n: self.fed.listen_endpoint(n).url + "/status" for n in self.fed.entry_nodes()},
            control_plane=s.control_plane.url + "/status",
            utilisation={r.name: [i.endpoint.url + "/status" for i in r.instances] for r in s.regions},
            nats_url=s.nats_url,
            broadcast_subject=broadcast_subject(s.run_id),
            extra={"gslb_status": s.gslb_http.url + "/status", "logs": str(self.fed.logdir)},
        )

    def check_health(self, timeout: float) -> None:
        try:
            self.fed.wait_ready(timeout)
        except ComponentFailed as exc:
            raise TargetUnreachable(f"local federation is not healthy, nothing was injected: {exc}") from exc

    # -- faults --------------------------------------------------------------------------------
    def inject(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        f = self.fed
        if kind == "gateway_down":
            f.stop_component(f"gateway-{region}", signal.SIGTERM)
        elif kind == "gateway_hung":
            f.pause(f"gateway-{region}")
        elif kind == "region_blackhole":
            for name in f.region_components(str(region)):
                f.pause(name)
        elif kind == "control_plane_down":
            f.stop_component("controlplane", signal.SIGKILL)
        elif kind == "bus_down":
            f.stop_component("nats", signal.SIGKILL)
        elif kind == "sync_delay":
            before = f.set_broadcast_delay(float(params.get("seconds", 0.0)))
            params["previous"] = before  # recorded so the revert is exact
        elif kind == "probe_flap":
            f.set_readyz_fault(f"gateway-{region}", {"readyz": "flap", "period": float(params.get("period", 1.0)),
                                                     "down": float(params.get("down", 0.3))})
        else:
            raise ConfigError(f"local target: unknown fault {kind!r}")

    def revert(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        f = self.fed
        try:
            if kind == "gateway_down":
                f.start_component(f"gateway-{region}")
            elif kind == "gateway_hung":
                f.resume(f"gateway-{region}")
            elif kind == "region_blackhole":
                for name in f.region_components(str(region)):
                    f.resume(name)
            elif kind == "control_plane_down":
                f.start_component("controlplane")
            elif kind == "bus_down":
                f.start_component("nats")
            elif kind == "sync_delay":
                f.set_broadcast_delay(float(params.get("previous", 0.0)))
            elif kind == "probe_flap":
                f.set_readyz_fault(f"gateway-{region}", {"readyz": "ok"})
            else:
                raise ConfigError(f"local target: unknown fault {kind!r}")
        except ComponentFailed as exc:
            raise FaultError(f"reverting {kind} {region or ''}: {exc}") from exc

    # -- logs --------------------------------------------------------------------------------------
    def alarm_lines(self) -> Iterator[tuple[str, str]]:
        for node in self.fed.entry_nodes():
            path = self.fed.logdir / f"{node}.log"
            try:
                with path.open("rb") as fh:
                    fh.seek(self._offsets.get(node, 0))
                    data = fh.read()
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1  # keep a half-written last line for next time
            self._offsets[node] = self._offsets.get(node, 0) + end
            for line in data[:end].decode(errors="replace").splitlines():
                yield node, line
