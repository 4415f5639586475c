"""The ``local`` target: the embedded federation of local processes (no Docker, no root)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

import httpx

from gameday.errors import ComponentFailed, ConfigError, FaultError, TargetError, TargetUnreachable
from gameday.faults.catalogue import FAULTS
from gameday.faults.model import FaultCall
from gameday.fedapp import wire
from gameday.fedapp.wire import broadcast_subject
from gameday.interfaces import SUPERVISOR_ROLE, ComponentState, Endpoints, RegionInfo
from gameday.model.release import plan_release
from gameday.model.topology import Topology
from gameday.observers.reference import ReferenceEndpoints, log_file_alarms, reference_sources
from gameday.observers.sources import HttpState, Sources
from gameday.runtime.resources import clusters_dir
from gameday.runtime.settings import Settings
from gameday.targets.fedapp_spec import ReferenceTiming, stated_replication
from gameday.targets.local.faults import LOCAL_ACTIONS, LocalAction, app_instances
from gameday.targets.local.federation import LocalFederation, pid_alive
from gameday.targets.local.natsserver import nats_server_version

READY_TIMEOUT = 30.0
"""Seconds a federation of up to 10 regions has to come up and be ready; larger ones get
:data:`READY_PER_REGION` more per region (more processes to fork, probe and converge)."""
READY_PER_REGION = 2.0

INSTANCE_READY_TIMEOUT = 15.0
"""Seconds a restarted app instance has to become ready (own /readyz and its gateway's view)."""

RELEASE_RESTART_S = 0.3
"""Seconds each app instance is down (restarting) in one step of a release (R12)."""


class LocalTarget(ReferenceTiming):
    """A :class:`~gameday.interfaces.Target` backed by :class:`LocalFederation`."""

    name = "local"

    def __init__(self, topology: Topology, workdir: Path, federation: LocalFederation | None = None) -> None:
        self.topology = topology
        self.workdir = workdir
        self.fed = federation or LocalFederation.from_topology(topology, workdir)
        self._offsets: dict[str, int] = {}
        self._up = federation is not None
        self._launcher_seen: int | None = None
        """The launcher pid :meth:`liveness` has seen alive (only its death is a casualty)."""

    def runs_on_this_machine(self) -> bool:
        """Every component is a process here (:class:`~gameday.interfaces.RunsOnThisMachine`)."""
        return True

    @classmethod
    def from_settings(cls, topology: Topology, settings: Settings, workdir: Path) -> Self:
        """The registry's factory (:mod:`gameday.targets.registry`)."""
        return cls(topology, workdir)

    @classmethod
    def attach(cls, ref: dict[str, Any]) -> Self:
        """Re-attach from a ledger reference (``{"workdir": ...}``)."""
        fed = LocalFederation.attach(Path(ref["workdir"]))
        return cls(fed.topology, Path(ref["workdir"]), fed)

    # -- lifecycle -----------------------------------------------------------------------
    def _ready_timeout(self) -> float:
        return READY_TIMEOUT + READY_PER_REGION * max(0, len(self.topology.regions) - 10)

    def up(self) -> None:
        if not self._up:
            self.fed.start(timeout=self._ready_timeout())
            self._up = True

    def deploy(self) -> None:
        """The local federation runs the app as part of :meth:`up`; wait until it serves."""
        self.fed.wait_ready(self._ready_timeout())

    def down(self) -> None:
        self.fed.stop()
        self._up = False

    def ref(self) -> dict[str, Any]:
        return {"workdir": str(self.fed.workdir)}

    # -- description -----------------------------------------------------------------------
    def manifests_dir(self) -> Path:
        """The reference app's shipped manifests (the ones kind and kube deploy; R11)."""
        return clusters_dir() / "manifests"

    def software(self) -> Mapping[str, str]:
        """The nats-server this federation runs (its bus), for the report's environment."""
        return {"nats-server": nats_server_version()}

    def regions(self) -> list[RegionInfo]:
        return [
            RegionInfo(r.name, r.weight, r.capacity, self.fed.spec.region(r.name).gateway.host)
            for r in self.topology.regions
        ]

    def endpoints(self) -> Endpoints:
        s = self.fed.spec
        return Endpoints(dns_server=(s.gslb_dns.host, s.gslb_dns.port), fqdn=s.topology.fqdn,
                         gateway_port=s.gateway_port)

    def reference_endpoints(self) -> ReferenceEndpoints:
        """The reference app's URLs on this machine (:class:`~gameday.observers.reference.RunsReferenceApp`)."""
        s = self.fed.spec
        return ReferenceEndpoints(
            entry_nodes={n: self.fed.listen_endpoint(n).url + "/status" for n in self.fed.entry_nodes()},
            control_plane=s.control_plane.url + "/status",
            utilisation={r.name: [i.endpoint.url + "/status" for i in r.instances] for r in s.regions},
            nats_url=s.nats_url,
            broadcast_subject=broadcast_subject(s.run_id),
            extra={"gslb_status": s.gslb_http.url + "/status", "logs": str(self.fed.logdir),
                   "layout": s.topology.layout,
                   **({"regional_control_planes": {
                       r: self.fed.listen_endpoint(n).url + "/status"
                       for r, n in self.fed.regional_control_planes().items()}} if s.regional else {})},
            gslb=s.gslb_http.url + "/status",
            agents={r.name: r.agent.url + "/status" for r in s.regions},
            snapshot=s.control_plane.url + "/snapshot",
        )

    def sources(self) -> Sources:
        """The reference app's sources (:mod:`gameday.observers.reference`): each entry node's
        ``/status``, the control plane's ``/status``, the GSLB, and the proxies' log files (the
        stale-snapshot alarm is the proxies', DESIGN.md §4)."""
        proxies = [n for n in self.fed.entry_nodes() if self.fed.components[n].role == "proxy"]
        sources = reference_sources(self.endpoints(), self.reference_endpoints(),
                                    log_file_alarms(self.fed.logdir, proxies))
        state = self.topology.state
        if state is None:
            return sources
        ep = self.endpoints()
        return replace(sources, state=HttpState(dns_server=ep.dns_server, fqdn=ep.fqdn, port=ep.gateway_port,
                                                timeout=state.write_timeout,
                                                stated=stated_replication(self.topology),
                                                task_path="/tasks"),
                       write_rate=state.write_rate, writers=state.writers, task_rate=state.task_rate,
                       write_ttl_hint=float(self.topology.timing.dns_ttl))

    # -- the prediction's inputs (StatesTiming) ---------------------------------------------
    def check_health(self, timeout: float) -> None:
        try:
            self.fed.wait_ready(timeout, versions=False)
        except ComponentFailed as exc:
            raise TargetUnreachable(f"local federation is not healthy, nothing was injected: {exc}") from exc

    # -- faults --------------------------------------------------------------------------------
    actions: Mapping[str, LocalAction] = LOCAL_ACTIONS
    """Fault name -> how this target does it (a subclass may extend or replace entries)."""

    def _call(self, kind: str, region: str | None, params: dict[str, Any]) -> tuple[LocalAction, FaultCall]:
        fault = FAULTS.get(kind)
        if fault is None:
            raise ConfigError(f"local target: unknown fault {kind!r}; expected one of {', '.join(FAULTS.names())} "
                              "(a fault a conftest or plugin adds must be registered in this process too: "
                              "`gameday restore -p MODULE`)")
        action = self.actions.get(kind)
        if action is None:
            raise ConfigError(f"local target: fault {kind!r} has no local action; register one with "
                              f"gameday.targets.local.faults.LOCAL_ACTIONS.register({kind!r}, ...)")
        return action, FaultCall(fault, region, params)

    def plan_fault(self, kind: str, region: str | None, params: dict[str, Any]) -> tuple[str, str]:
        """What :meth:`inject` and :meth:`revert` would do, in words, doing nothing (dry run).

        Returns:
            ``(injection, its exact inverse)``, naming the processes concerned.

        Raises:
            ConfigError: *kind* is not a fault this target knows.
        """
        action, call = self._call(kind, region, params)
        return action.plan(self.fed, call)

    def inject(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        action, call = self._call(kind, region, params)
        action.inject(self.fed, call)

    def revert(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        action, call = self._call(kind, region, params)
        try:
            action.revert(self.fed, call)
        except ComponentFailed as exc:
            raise FaultError(f"reverting {kind} {region or ''}: {exc}") from exc

    # -- liveness (the drill's watcher) ------------------------------------------------------
    def liveness(self) -> list[ComponentState]:
        """Every component from the pids this federation started: alive when its pid runs
        with the start time recorded for it (a reused pid is not mistaken for it).

        A paused component (a hang fault) is alive; one whose pid the federation cleared
        was stopped on purpose and is reported not running.

        The launcher that forks the components comes first (role
        :data:`~gameday.interfaces.SUPERVISOR_ROLE`): every component it forked dies with it,
        and only it is to blame then. It is read *after* the components, so a component seen
        dead because the launcher died is never seen beside a launcher still alive.
        """
        out = []
        for name, c in self.fed.components.items():
            pid, starttime = c.pid, c.starttime  # read once: a revert may be restarting it
            log = self.fed.logdir / f"{name}.log"
            if pid is None:
                out.append(ComponentState(name, False, None, c.role, f"not running; see {log}"))
            elif pid_alive(pid, starttime):
                out.append(ComponentState(name, True, pid, c.role))
            else:
                out.append(ComponentState(name, False, pid, c.role, f"exited; see {log}"))
        launcher = self._launcher_state()
        return [launcher, *out] if launcher is not None else out

    def _launcher_state(self) -> ComponentState | None:
        pid, starttime = self.fed.launcher_pid, self.fed.launcher_starttime
        if pid is None:  # not started (or stopped with the federation): nothing to watch
            return None
        log = self.fed.logdir / "launcher.log"
        if pid_alive(pid, starttime):
            self._launcher_seen = pid
            return ComponentState("launcher", True, pid, SUPERVISOR_ROLE)
        if self._launcher_seen != pid:
            # Dead before this target first looked (a federation `gameday restore --keep` restarted
            # without it): its components run on their own, and there is no death to name.
            return None
        return ComponentState("launcher", False, pid, SUPERVISOR_ROLE,
                              f"exited; every component it forked died with it; see {log}")

    def stopped_by(self, kind: str, region: str | None) -> frozenset[str]:
        fault = FAULTS.get(kind)  # the others pause, fail probes or reconfigure: nothing exits
        return fault.stopped(region) if fault is not None else frozenset()

    # -- the state layer (HasStatePrimary) ---------------------------------------------------
    def state_primary(self, timeout: float = 10.0) -> str:
        """The region whose store node leads the data stream, as the app instances see it (they
        read the stream's placement every 2 s); waits up to *timeout* for one to say."""
        if self.topology.state is None:
            raise TargetError("the topology declares no state layer: no store primary")
        apps = [n for n, c in self.fed.components.items() if c.role == "app"]
        deadline = time.monotonic() + timeout
        seen = "no app instance answered"
        if self.fed.spec.storectl is not None:  # async: the store controller's primary
            while True:
                try:
                    return str(self.fed.get_json("storectl")["primary"])
                except (httpx.HTTPError, ValueError, KeyError) as exc:
                    if time.monotonic() > deadline:
                        raise TargetError(f"the store controller named no primary within {timeout:g} s "
                                          f"({type(exc).__name__})") from exc
                    time.sleep(0.2)
        while True:
            for name in apps:
                try:
                    leader = (self.fed.get_json(name).get("store") or {}).get("leader")
                except (httpx.HTTPError, ValueError) as exc:
                    seen = f"{name}: {type(exc).__name__}"
                    continue
                if isinstance(leader, str) and leader.startswith("store-"):
                    return leader.removeprefix("store-")
                seen = f"{name}: leader {leader!r}"
            if time.monotonic() > deadline:
                raise TargetError(f"the store named no leader within {timeout:g} s ({seen})")
            time.sleep(0.2)

    def _apps(self, region: str) -> list[str]:
        return app_instances(self.fed, region)

    # -- slow state and releases ------------------------------------------------------------
    def reconcile(self) -> dict[str, Any]:
        try:
            admin = wire.reconcile()
            return self.fed.admin("controlplane", admin.json(), path=admin.path)
        except FaultError as exc:
            raise TargetError(f"full reconciliation pass failed: {exc}") from exc

    def start_release(self, version: str) -> None:
        """The control plane's release controller rolls *version* out (:mod:`gameday.fedapp.controlplane.release`)."""
        try:
            self.fed.admin("controlplane", {"version": version, "restart_s": RELEASE_RESTART_S}, path="/admin/release")
        except FaultError as exc:
            raise TargetError(f"the federation's release controller refused {version}: {exc}") from exc

    def release_plan(self) -> list[str]:
        return plan_release(self.regions(), self.topology.primary_region)

    def rollout_region(self, region: str) -> None:
        """Restart the region's app instances one at a time; each must be ready again before
        the next one goes: its own ``/readyz``, ``rise`` fresh successful probes by the region
        agent, and its gateway's ready set."""
        for name in self._apps(region):
            try:
                self.fed.stop_component(name, signal.SIGTERM)
            finally:
                self.fed.start_component(name)  # never leave an instance down, whatever happened
            self._wait_instance_ready(region, name)

    def _wait_instance_ready(self, region: str, name: str) -> None:
        instance = str(self.fed.components[name].instance)
        rise = self.topology.timing.rise
        deadline = time.monotonic() + INSTANCE_READY_TIMEOUT
        probes_at_start: int | None = None
        seen = "nothing yet"
        while time.monotonic() < deadline:
            try:
                target = self.fed.get_json(f"agent-{region}")["targets"][instance]
                if probes_at_start is None:
                    probes_at_start = int(target["probes"])
                own = self.fed.get_json(name, "/readyz")
                gw = self.fed.get_json(f"gateway-{region}")
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                seen = f"{type(exc).__name__}: {exc}"
            else:
                view = gw.get("local", {}).get(instance, {})
                fresh = int(target["probes"]) - probes_at_start
                if (own.get("ready") and target.get("healthy") and fresh >= rise
                        and int(target.get("consecutive_ok", 0)) >= rise and view.get("ready")
                        and not view.get("ejected")):
                    return
                seen = (f"own /readyz {own}, agent: {fresh} probes since the restart, healthy "
                        f"{target.get('healthy')}; gateway-{region} sees {view}")
            time.sleep(0.05)
        raise TargetError(f"{name} was restarted but is not ready within {INSTANCE_READY_TIMEOUT:g} s "
                          f"(last seen: {seen}); see {self.fed.logdir / (name + '.log')}")

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
