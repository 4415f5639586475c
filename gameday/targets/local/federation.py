"""The embedded local federation: start, watch, break (on purpose) and stop its processes.

``LocalFederation`` is the Python API the ``local`` target and ``gameday up`` use::

    with LocalFederation.from_topology(load_topology(), workdir) as fed:
        fed.wait_ready()
        print(fed.status_table())

Every component is its own OS process (see :mod:`gameday.targets.local.launcher`), in its own
session, so terminal signals reach only the harness, which decides when they stop. The
processes die with the process that started the federation, even under ``kill -9``
(:mod:`gameday.runtime.procs`): nothing outlives its runner. ``state.json`` records every pid
(with its start time), so :meth:`LocalFederation.attach` finds whatever is left where the
OS cannot tie a child to its parent.

Admin calls go to each component's own admin port (:meth:`LocalFederation.admin_endpoint`;
the public ports answer admin paths 404) and carry the run's token
(:mod:`gameday.targets.admin_token`): :meth:`start` writes a
fresh one to ``admin-token`` in the work directory (mode 0600) and gives the components its
path in ``$GAMEDAY_ADMIN_TOKEN_FILE``; ``state.json`` records the path, so ``gameday restore``
in another process signs its reverts too; :meth:`stop` removes the file.

Fault hooks come in exact pairs (:meth:`stop_component`/:meth:`start_component`,
:meth:`pause`/:meth:`resume`, :meth:`set_broadcast_delay` with the previous value,
:meth:`set_readyz_fault` with ``{"readyz": "ok"}``); the faults package builds on them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from gameday.errors import ComponentFailed, FaultError, GamedayError, TargetError
from gameday.fedapp import wire
from gameday.fedapp.spec import Endpoint, FederationSpec
from gameday.model.topology import Topology
from gameday.runtime.interrupts import INTERRUPTS
from gameday.runtime.procs import pid_alive, spawn, starttime
from gameday.runtime.statefile import CorruptFile, read_json_object, write_json_atomic
from gameday.targets.admin_token import ADMIN_TOKEN_ENV, AdminAuth, issue_admin_token
from gameday.targets.local.launcher import LauncherClient
from gameday.targets.local.natsserver import nats_server_argv, store_node_argv, wait_for_port
from gameday.targets.local.plan import plan_federation, release_ports

log = logging.getLogger(__name__)

STATE_FILE = "state.json"
ADMIN_TOKEN_FILE = "admin-token"  # noqa: S105  (the file's name; the token is generated per run)


@dataclass
class Component:
    """One process of the federation, as recorded in ``state.json``."""

    name: str
    role: str
    region: str | None = None
    instance: str | None = None
    pid: int | None = None
    starttime: int | None = None
    """Kernel start time of *pid* (``/proc/<pid>/stat`` field 22), guards against pid reuse."""
    paused: bool = False


def _state_field(state: dict[str, Any], name: str, kind: type[Any]) -> Any:
    if name not in state:
        raise KeyError(f"missing {name!r}")
    value = state[name]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _optional_int(value: object, where: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{where}: expected an integer or null, got {value!r}"[:120])
    return value


def _restore_state(fed: LocalFederation, state: dict[str, Any]) -> None:
    """Fill *fed* from a ``state.json`` object; raises ValueError/TypeError/KeyError naming the field."""
    fed.launcher_pid = _optional_int(state.get("launcher_pid"), "launcher_pid")
    fed.launcher_starttime = _optional_int(state.get("launcher_starttime"), "launcher_starttime")
    fed.owner_pid = _state_field(state, "owner_pid", int)
    fed.owner_starttime = _optional_int(state.get("owner_starttime"), "owner_starttime")
    token_file = state.get("admin_token_file", str(fed.admin_token_file))  # absent in older states
    if not isinstance(token_file, str):
        raise TypeError(f"admin_token_file: expected a path, got {type(token_file).__name__}")
    fed.admin_token_file = Path(token_file)
    for name, c in _state_field(state, "components", dict).items():
        if name not in fed.components:
            raise ValueError(f"components: {name!r} is not a component of this federation"[:120])
        if not isinstance(c, dict):
            raise TypeError(f"components.{name}: expected an object, got {type(c).__name__}")
        comp = Component(**c)
        _optional_int(comp.pid, f"components.{name}.pid")
        _optional_int(comp.starttime, f"components.{name}.starttime")
        fed.components[name] = comp


def _starttime(pid: int) -> int | None:
    return starttime(pid)


__all__ = ["Component", "LocalFederation", "pid_alive"]


class LocalFederation:
    """A federation of local processes on per-region loopback addresses."""

    def __init__(self, spec: FederationSpec, topology: Topology) -> None:
        self.spec = spec
        self.topology = topology
        """The harness's topology the spec was planned from (the app's spec carries only its own
        view of it, :class:`~gameday.fedapp.spec.AppTopology`); kept in ``state.json`` for :meth:`attach`."""
        #: Proxies given the ``proxy_never_refresh`` defect: they stay at the version they had
        #: then, so readiness asks them to route, not to be at the control plane's version.
        self.never_refreshing: set[str] = set()
        self.workdir = Path(spec.workdir)
        self.logdir = self.workdir / "logs"
        self.spec_path = self.workdir / "spec.json"
        self.components: dict[str, Component] = {}
        self.launcher_pid: int | None = None
        self.launcher_starttime: int | None = None
        self.owner_pid = os.getpid()
        """The process that started the federation (a dead owner means it was orphaned)."""
        self.owner_starttime = starttime(self.owner_pid)
        # Unix socket paths are limited to 108 bytes; work dirs (pytest tmp dirs) can be longer.
        self.launcher_sock = Path(tempfile.gettempdir()) / f"gameday-{spec.run_id}.sock"
        self.admin_token_file = self.workdir / ADMIN_TOKEN_FILE
        """The run's admin token (written by :meth:`start`); only its path is ever recorded."""
        self._http = httpx.Client(timeout=1.0, trust_env=False)
        self._build_inventory()

    # -- construction ---------------------------------------------------------------
    @classmethod
    def from_topology(cls, topology: Topology, workdir: Path, run_id: str | None = None) -> LocalFederation:
        """Plan addresses and ports for *topology* under *workdir* (nothing is started); every
        component serves admin on a port of its own (:meth:`admin_endpoint`)."""
        workdir.mkdir(parents=True, exist_ok=True)
        return cls(plan_federation(topology, workdir.resolve(), run_id, separate_admin=True), topology)

    @classmethod
    def attach(cls, workdir: Path) -> LocalFederation:
        """Re-attach to a federation started by another (possibly killed) process.

        Raises:
            TargetError: there is no ``state.json`` under *workdir*.
            CorruptFile: ``state.json`` exists but is not a federation state (names the
                path and the problem; the caller may move it aside).
        """
        state_path = workdir / STATE_FILE
        state = read_json_object(state_path)
        if state is None:
            raise TargetError(f"{state_path}: no federation state to attach to")
        try:
            fed = cls(FederationSpec.load(_state_field(state, "spec", str)),
                      Topology.model_validate(_state_field(state, "topology", dict)))
            _restore_state(fed, state)
            # a running federation had its defects applied when it started
            fed.never_refreshing = {f"proxy-{r}" for r in fed.spec.topology.defects.proxy_never_refresh}
        except (ValueError, TypeError, KeyError, OSError, GamedayError) as exc:
            raise CorruptFile(state_path, f"not a federation state ({exc})"[:300]) from exc
        return fed

    def _build_inventory(self) -> None:
        add = self._add
        add(Component("nats", "nats"))
        add(Component("controlplane", "controlplane"))
        add(Component("gslb", "gslb"))
        if self.spec.storectl is not None:  # an async state layer's store controller
            add(Component("storectl", "storectl"))
        for r in self.spec.regions:
            for inst in r.instances:
                add(Component(f"app-{inst.name}", "app", r.name, inst.name))
            add(Component(f"agent-{r.name}", "agent", r.name))
            if r.control_plane is not None:  # the regional layout (R14)
                add(Component(f"controlplane-{r.name}", "controlplane", r.name))
            add(Component(f"gateway-{r.name}", "gateway", r.name))
            add(Component(f"proxy-{r.name}", "proxy", r.name))
            if r.store is not None:  # the state layer: the region's store node
                add(Component(f"store-{r.name}", "store", r.name))

    def _add(self, c: Component) -> None:
        self.components[c.name] = c

    def _save_state(self) -> None:
        state = {
            "run_id": self.spec.run_id,
            "spec": str(self.spec_path),
            "topology": self.topology.model_dump(mode="json"),
            "launcher_pid": self.launcher_pid,
            "launcher_starttime": self.launcher_starttime,
            "owner_pid": self.owner_pid,
            "owner_starttime": self.owner_starttime,
            "admin_token_file": str(self.admin_token_file),
            "components": {n: asdict(c) for n, c in self.components.items()},
        }
        write_json_atomic(self.workdir / STATE_FILE, state)

    @property
    def owned(self) -> bool:
        """True in the process that started the federation: only there do new processes die
        with their starter. ``gameday restore --keep`` restarts a component that must
        outlive the restore command."""
        return self.owner_pid == os.getpid()

    def _death_signal(self, sig: int) -> int | None:
        return sig if self.owned else None

    # -- lifecycle ----------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> None:
        """Start every component and wait until the federation is ready.

        Raises:
            ComponentFailed: a component exited or did not become ready in *timeout* s;
                everything started is stopped again before raising.
        """
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.spec.dump(self.spec_path)
        issue_admin_token(self.admin_token_file)
        try:
            self._start_launcher()
            # The store nodes first (they form their cluster while the rest starts), then the bus.
            for name, c in self.components.items():
                if c.role == "store":
                    self.start_component(name, wait=False)
            self.start_component("nats")
            for name, c in self.components.items():
                if c.role not in ("nats", "store"):
                    self.start_component(name, wait=False)
            self.wait_ready(timeout)
            # Negative-control defect: proxies that stop refreshing once the federation runs
            # (at start-up they would never become ready, which is a different failure).
            for region in self.spec.topology.defects.proxy_never_refresh:
                self.admin(f"proxy-{region}", {"never_refresh": True})
                self.never_refreshing.add(f"proxy-{region}")
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> LocalFederation:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _component_env(self) -> dict[str, str]:
        """The environment of component processes: the harness's, and where the admin token is."""
        return {**os.environ, ADMIN_TOKEN_ENV: str(self.admin_token_file)}

    def _start_launcher(self) -> None:
        with (self.logdir / "launcher.log").open("ab") as out, INTERRUPTS.shielded("starting the launcher"):
            # SIGTERM, not SIGKILL: the launcher then stops the components it forked, which
            # matters where they cannot be tied to it (elsewhere they get SIGKILL as it exits).
            proc = spawn(
                [sys.executable, "-m", "gameday.targets.local.launcher", "--socket", str(self.launcher_sock)],
                death_signal=self._death_signal(signal.SIGTERM),
                stdout=out, stderr=out, start_new_session=True, cwd=self.workdir, env=self._component_env(),
            )
            self.launcher_pid = proc.pid
            self.launcher_starttime = starttime(proc.pid)
            self._save_state()
        client = LauncherClient(self.launcher_sock)
        deadline = time.monotonic() + 20
        while not client.alive():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise ComponentFailed(f"component launcher did not start; see {self.logdir / 'launcher.log'}")
            time.sleep(0.01)

    def _spawn(self, c: Component) -> int:
        logfile = self.logdir / f"{c.name}.log"
        if c.role == "nats":
            with logfile.open("ab") as out:
                proc = spawn(
                    nats_server_argv("127.0.0.1", self.spec.nats_port, self.workdir / "jetstream"),
                    death_signal=self._death_signal(signal.SIGKILL),
                    stdout=out, stderr=out, start_new_session=True, cwd=self.workdir,
                )
            return proc.pid
        if c.role == "store":
            with logfile.open("ab") as out:
                proc = spawn(store_node_argv(self.spec, str(c.region), self.workdir),
                             death_signal=self._death_signal(signal.SIGKILL),
                             stdout=out, stderr=out, start_new_session=True, cwd=self.workdir)
            return proc.pid
        client = LauncherClient(self.launcher_sock)
        req = {"op": "spawn", "role": c.role, "spec": str(self.spec_path), "region": c.region,
               "instance": c.instance, "log": str(logfile)}
        if client.alive():
            reply = client.call(req)
            if "pid" in reply:
                return int(reply["pid"])
            raise ComponentFailed(f"launcher refused to start {c.name}: {reply.get('error')}")
        # No launcher (e.g. `gameday restore` after the launcher died): start it the slow way.
        argv = [sys.executable, "-m", "gameday.fedapp", c.role, "--spec", str(self.spec_path)]
        if c.region and c.role != "app":
            argv += ["--region", c.region]
        if c.instance:
            argv += ["--instance", c.instance]
        with logfile.open("ab") as out:
            proc = spawn(argv, death_signal=self._death_signal(signal.SIGKILL), stdout=out, stderr=out,
                         start_new_session=True, cwd=self.workdir, env=self._component_env())
        return proc.pid

    def start_component(self, name: str, wait: bool = True, timeout: float = 15.0) -> None:
        """Start component *name* (no-op if it runs); with *wait*, until it listens."""
        c = self.components[name]
        if c.pid is not None and pid_alive(c.pid, c.starttime):
            return
        with INTERRUPTS.shielded(f"starting {name}"):  # a started process is always recorded
            c.pid = self._spawn(c)
            c.starttime = _starttime(c.pid)
            c.paused = False
            self._save_state()
        if wait:
            ep = self.listen_endpoint(name)
            wait_for_port(ep.host, ep.port, timeout, name, log=self.logdir / f"{name}.log")

    def stop_component(self, name: str, sig: int = signal.SIGTERM, timeout: float = 5.0) -> None:
        """Stop component *name* with *sig* (SIGKILL after *timeout*); no-op if not running."""
        c = self.components[name]
        if c.pid is None or not pid_alive(c.pid, c.starttime):
            c.pid, c.paused = None, False
            self._save_state()
            return
        with contextlib.suppress(ProcessLookupError):
            if c.paused:
                os.kill(c.pid, signal.SIGCONT)
            os.kill(c.pid, sig)
        deadline = time.monotonic() + timeout
        while pid_alive(c.pid, c.starttime):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(c.pid, signal.SIGKILL)
                deadline = time.monotonic() + timeout
            time.sleep(0.01)
        c.pid, c.paused = None, False
        self._save_state()

    def pause(self, name: str) -> None:
        """Freeze *name* with SIGSTOP: its sockets stay open but nothing answers (a hang)."""
        c = self.components[name]
        if c.pid is None or not pid_alive(c.pid, c.starttime):
            raise FaultError(f"cannot pause {name}: it is not running")
        os.kill(c.pid, signal.SIGSTOP)
        c.paused = True
        self._save_state()

    def resume(self, name: str) -> None:
        """Undo :meth:`pause` (SIGCONT); no-op if not paused or not running."""
        c = self.components[name]
        if c.pid is not None and pid_alive(c.pid, c.starttime):
            os.kill(c.pid, signal.SIGCONT)
        c.paused = False
        self._save_state()

    def any_running(self) -> bool:
        """True if any component (or the launcher) still runs."""
        return any(self.is_running(n) for n in self.components) or (
            self.launcher_pid is not None and pid_alive(self.launcher_pid, self.launcher_starttime))

    def is_running(self, name: str) -> bool:
        c = self.components[name]
        return c.pid is not None and pid_alive(c.pid, c.starttime)

    def stop(self) -> None:
        """Stop every component, the launcher and NATS; leaves no process behind."""
        for c in self.components.values():
            if c.pid is not None and pid_alive(c.pid, c.starttime):
                with contextlib.suppress(ProcessLookupError):
                    if c.paused:
                        os.kill(c.pid, signal.SIGCONT)
                    os.kill(c.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for name, c in self.components.items():
            while c.pid is not None and pid_alive(c.pid, c.starttime):
                if time.monotonic() > deadline:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(c.pid, signal.SIGKILL)
                time.sleep(0.01)
            self.components[name].pid = None
        if self.launcher_pid is not None:
            if pid_alive(self.launcher_pid, self.launcher_starttime):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.launcher_pid, signal.SIGTERM)
            if self.owned:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(self.launcher_pid, 0)
            else:  # not our child: wait for it to go (it stops what it forked first)
                deadline = time.monotonic() + 10
                while pid_alive(self.launcher_pid, self.launcher_starttime) and time.monotonic() < deadline:
                    time.sleep(0.02)
                if pid_alive(self.launcher_pid, self.launcher_starttime):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.launcher_pid, signal.SIGKILL)
            self.launcher_pid = None
        # A launcher that exits on its own removes its socket; a killed one cannot (and a socket
        # file would be left in the temporary directory for every killed run).
        self.launcher_sock.unlink(missing_ok=True)
        # Every process that knew the token is gone: it is worth nothing now, and is not left behind.
        self.admin_token_file.unlink(missing_ok=True)
        if self.workdir.exists():
            self._save_state()
        if self.owned:
            release_ports(self.spec)
        self._http.close()

    # -- addresses ---------------------------------------------------------------------
    def listen_endpoint(self, name: str) -> Endpoint:
        """The TCP endpoint component *name* listens on (HTTP, or NATS for ``nats``)."""
        c = self.components[name]
        s = self.spec
        if c.role == "nats":
            return Endpoint(host="127.0.0.1", port=s.nats_port)
        if c.role == "store":
            store = s.region(str(c.region)).store
            assert store is not None, f"{name}: a store node in a federation without a state layer"
            return store
        if c.role == "controlplane":
            if c.region is not None:
                regional = s.region(c.region).control_plane
                assert regional is not None, f"{name}: a regional control plane in a {s.topology.layout} layout"
                return regional
            return s.control_plane
        if c.role == "gslb":
            return s.gslb_http
        if c.role == "storectl":
            assert s.storectl is not None, f"{name}: a store controller in a federation without async state"
            return s.storectl
        assert c.region is not None
        r = s.region(c.region)
        if c.role == "app":
            return s.instance(str(c.instance))[1].endpoint
        ep: Endpoint = getattr(r, c.role)
        return ep

    def admin_endpoint(self, name: str) -> Endpoint:
        """Where component *name* serves its admin paths: its own admin port when the spec
        plans one (a federation this class planned does), else its public port."""
        return self.spec.admin.get(name) or self.listen_endpoint(name)

    def entry_nodes(self) -> list[str]:
        """Names of every gateway and proxy (the nodes switchover is measured on)."""
        return [n for n, c in self.components.items() if c.role in ("gateway", "proxy")]

    def regional_control_planes(self) -> dict[str, str]:
        """Region -> name of its control plane (the regional layout; empty in the global one)."""
        return {str(c.region): n for n, c in self.components.items() if c.role == "controlplane" and c.region}

    def region_components(self, region: str) -> list[str]:
        return [n for n, c in self.components.items() if c.region == region]

    # -- HTTP helpers -------------------------------------------------------------------
    def get_json(self, name: str, path: str = "/status", timeout: float = 1.0) -> dict[str, Any]:
        """GET a component's JSON endpoint. Raises ``httpx.HTTPError`` on failure."""
        r = self._http.get(self.listen_endpoint(name).url + path, timeout=timeout)
        r.raise_for_status()
        data: dict[str, Any] = r.json()
        return data

    def admin(self, name: str, body: dict[str, Any], path: str = "/admin/fault") -> dict[str, Any]:
        """POST a fault-hook body to a component, signed with the run's admin token.

        Raises:
            FaultError: the component refused or could not be reached, or the token file
                cannot be read.
        """
        try:
            r = self._http.post(self.admin_endpoint(name).url + path, json=body, timeout=2.0,
                                auth=AdminAuth(self.admin_token_file))
            r.raise_for_status()
        except httpx.HTTPError as exc:
            raise FaultError(f"{name}: POST {path} {body} failed: {exc}") from exc
        except FaultError as exc:  # from AdminAuth: no token to sign with
            raise FaultError(f"{name}: {exc}") from exc
        return dict(r.json()) if r.content else {}

    # -- readiness -----------------------------------------------------------------------
    def wait_ready(self, timeout: float = 30.0, versions: bool = True) -> float:
        """Wait until every component is ready, every entry node routes to every region (at
        the control plane's version, with *versions*), and the GSLB answers. Returns the
        seconds waited.

        Raises:
            ComponentFailed: a component died, or *timeout* passed; says which and why.
        """
        from gameday.targets.local.readiness import wait_ready  # noqa: PLC0415  (keeps dnspython out of imports)

        return wait_ready(self, timeout, versions)

    def status_table(self) -> str:
        from gameday.targets.local.readiness import status_table  # noqa: PLC0415

        return status_table(self)

    # -- fault hooks (each has an exact inverse) -------------------------------------------
    def set_broadcast_delay(self, seconds: float) -> float:
        """Delay the control plane's version broadcasts; returns the previous delay (the inverse)."""
        before = float(self.get_json("controlplane").get("broadcast_delay", 0.0))
        admin = wire.broadcast_delay(seconds)
        self.admin("controlplane", admin.json(), path=admin.path)
        return before

    def set_readyz_fault(self, name: str, body: dict[str, Any]) -> None:
        """Fail or flap a component's ``/readyz`` (``{"readyz": "ok"}`` is the inverse)."""
        self.admin(name, body)

    def cleanup_workdir(self) -> None:
        """Remove the work directory (only when nothing runs)."""
        if any(c.pid is not None for c in self.components.values()):
            raise TargetError("refusing to remove the work directory of a running federation")
        shutil.rmtree(self.workdir, ignore_errors=True)
