"""How the ``local`` target does each fault: one action per fault name, with its exact inverse.

:data:`LOCAL_ACTIONS` maps a fault of :data:`gameday.faults.FAULTS` to an action on the
:class:`~gameday.targets.local.federation.LocalFederation`: stop a process (and start it again),
freeze processes (SIGSTOP / SIGCONT), a ``/readyz`` fault hook (and ``ok``), an admin hook
(and its opposite), the broadcast delay or an agent's labels (the old value recorded in the
call's params, so the revert is exact). The admin calls (paths and bodies) are the reference
app's own, built by :mod:`gameday.fedapp.wire` (the kind/kube plans build theirs there too);
an admin action's ``admin_calls`` says which ones it makes (inject and revert use it).
Inject, revert and the dry-run plan all come from the one entry; which components a fault stops is the fault's own fact
(:attr:`gameday.faults.Fault.stops`), so the watcher and the action agree by construction.

Extend it from a conftest with ``LOCAL_ACTIONS.register(name, action)`` for a fault added
to :data:`gameday.faults.FAULTS`.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from gameday.errors import FaultError, FaultUnavailable
from gameday.faults.model import Action, FaultCall
from gameday.fedapp.wire import (
    AdminCall,
    ReadyzMode,
    agent_labels,
    broadcast_delay,
    drop_broadcasts,
    readyz_fault,
    reconcile,
)
from gameday.model.tables import Table
from gameday.targets.local.federation import LocalFederation

LocalAction = Action[LocalFederation]


@dataclass(frozen=True)
class Components:
    """Which processes an action acts on: their names from the federation and the call,
    and (optionally) how the dry run names the group (``every process of region {region}``)."""

    pick: Callable[[LocalFederation, FaultCall], list[str]]
    label: str | None = None
    role: str | None = None
    """The one role of every process picked (``gateway``), if they share one."""

    def names(self, fed: LocalFederation, call: FaultCall) -> list[str]:
        return self.pick(fed, call)

    def words(self, fed: LocalFederation, call: FaultCall) -> str:
        return ", ".join(self.names(fed, call))


def one(template: str) -> Components:
    """A single component, ``{region}`` filled in: ``one("gateway-{region}")`` (role ``gateway``)."""
    role = template.split("-{", maxsplit=1)[0]
    return Components(lambda fed, call: [template.format(region=call.region)], role=role)


def app_instances(fed: LocalFederation, region: str) -> list[str]:
    """The app instances of *region* (``app-b-1``, ...)."""
    return [n for n in fed.region_components(region) if fed.components[n].role == "app"]


region_gateway = one("gateway-{region}")
region_proxy = one("proxy-{region}")
region_agent = one("agent-{region}")
region_apps = Components(lambda fed, call: app_instances(fed, call.need_region()), role="app")
region_all = Components(lambda fed, call: fed.region_components(call.need_region()),
                        label="every process of region {region}")


@dataclass(frozen=True)
class Stop:
    """Stop the components the fault stops (:attr:`Fault.stops`) with *sig*; revert starts them."""

    sig: signal.Signals = signal.SIGTERM
    note: str = ""
    """Said in the plan after the signal (``its JetStream state on disk survives``)."""

    def _names(self, call: FaultCall) -> list[str]:
        names = sorted(call.fault.stopped(call.region))
        if not names:
            raise FaultError(f"fault {call.name!r} declares no component it stops (Fault.stops), "
                             "so the local Stop action has nothing to stop")
        return names

    def inject(self, fed: LocalFederation, call: FaultCall) -> None:
        for name in self._names(call):
            fed.stop_component(name, self.sig)

    def revert(self, fed: LocalFederation, call: FaultCall) -> None:
        for name in self._names(call):
            fed.start_component(name)

    def plan(self, fed: LocalFederation, call: FaultCall) -> tuple[str, str]:
        names = ", ".join(self._names(call))
        verb = "kill" if self.sig == signal.SIGKILL else "stop"
        how = f"{self.sig.name}; {self.note}" if self.note else self.sig.name
        return f"{verb} {names} ({how})", f"start {names} again on the same address and port"


def _has_store_nodes(fed: LocalFederation, call: FaultCall, names: list[str]) -> None:
    """Refuse *call* (:class:`FaultUnavailable`) unless the federation runs store nodes *names*."""
    missing = [n for n in names if n not in fed.components]
    if missing:
        nodes = sorted(n for n, c in fed.components.items() if c.role == "store")
        raise FaultUnavailable(f"{call.name}: this federation has no {', '.join(missing)} ("
                               + (f"its store nodes are {', '.join(nodes)})" if nodes else
                                  "its topology declares no state layer: add a state: section)"))


@dataclass(frozen=True)
class StopStore(Stop):
    """:class:`Stop` of a region's store node; a federation without a state layer has none, and
    the fault is unavailable there (refused before anything is touched)."""

    def _check(self, fed: LocalFederation, call: FaultCall) -> None:
        _has_store_nodes(fed, call, self._names(call))

    def inject(self, fed: LocalFederation, call: FaultCall) -> None:
        self._check(fed, call)
        super().inject(fed, call)

    def revert(self, fed: LocalFederation, call: FaultCall) -> None:
        if all(n in fed.components for n in self._names(call)):
            super().revert(fed, call)

    def plan(self, fed: LocalFederation, call: FaultCall) -> tuple[str, str]:
        self._check(fed, call)
        return super().plan(fed, call)


@dataclass(frozen=True)
class ReplicationLag:
    """Hold replication back: ``async``, the store controller's replicator is held
    (``{"replication": "hold"}``, revert ``run``); ``sync``, one store node that does not lead
    the data is frozen (SIGSTOP, revert SIGCONT; the node is recorded as ``node``)."""

    def _mode(self, fed: LocalFederation, call: FaultCall) -> str:
        state = fed.spec.topology.state
        if state is None or state.mode == "none" or (state.mode == "sync" and state.replicas < 3):
            raise FaultUnavailable(f"{call.name}: this federation's store has no replication to hold back")
        return state.mode

    def _follower(self, fed: LocalFederation) -> str:
        apps = [n for n, c in fed.components.items() if c.role == "app"]
        for name in apps:
            try:
                leader = (fed.get_json(name).get("store") or {}).get("leader")
            except (httpx.HTTPError, ValueError):
                continue
            if isinstance(leader, str) and leader:
                nodes = sorted(n for n, c in fed.components.items() if c.role == "store" and n != leader)
                if nodes:
                    return nodes[0]
        raise FaultError("replication_lag: no app instance named the store's leader, so no follower to hold back")

    def inject(self, fed: LocalFederation, call: FaultCall) -> None:
        if self._mode(fed, call) == "async":
            fed.admin("storectl", {"replication": "hold"})
            return
        node = call.params.get("node") or self._follower(fed)
        call.params["node"] = node
        fed.pause(node)

    def revert(self, fed: LocalFederation, call: FaultCall) -> None:
        if self._mode(fed, call) == "async":
            fed.admin("storectl", {"replication": "run"})
        elif call.params.get("node") in fed.components:
            fed.resume(str(call.params["node"]))

    def plan(self, fed: LocalFederation, call: FaultCall) -> tuple[str, str]:
        if self._mode(fed, call) == "async":
            return ("hold the store controller's replicator back (storectl: replication hold)",
                    "let it copy again (storectl: replication run)")
        return ("freeze one store node that does not lead the data (SIGSTOP; which one is recorded)",
                "resume it (SIGCONT)")


@dataclass(frozen=True)
class Freeze:
    """Freeze the components (SIGSTOP: alive, answering nothing); revert resumes them (SIGCONT)."""

    who: Components

    def inject(self, fed: LocalFederation, call: FaultCall) -> None:
        for name in self.who.names(fed, call):
            fed.pause(name)

    def revert(self, fed: LocalFederation, call: FaultCall) -> None:
        for name in self.who.names(fed, call):
            fed.resume(name)

    def plan(self, fed: LocalFederation, call: FaultCall) -> tuple[str, str]:
        names = self.who.words(fed, call)
        if self.who.label:
            return (f"freeze {self.who.label.format(region=call.region)} (SIGSTOP): {names}",
                    f"resume them (SIGCONT): {names}")
        return f"freeze {names} (SIGSTOP)", f"resume {names} (SIGCONT)"


AdminCalls = list[tuple[str, AdminCall]]
"""``(role, call)``: the admin calls an action makes, each on every process it picks of that role."""


@dataclass(frozen=True)
class FreezeStore(Freeze):
    """:class:`Freeze` of a region's store node, unavailable (refused before anything is touched)
    where the federation has no such node, as :class:`StopStore` is."""

    def inject(self, fed: LocalFederation, call: FaultCall) -> None:
        _has_store_nodes(fed, call, self.who.names(fed, call))
        super().inject(fed, call)

    def revert(self, fed: LocalFederation, call: FaultCall) -> None:
        if all(n in fed.components for n in self.who.names(fed, call)):
            super().revert(fed, call)

    def plan(self, fed: LocalFederation, call: FaultCall) -> tuple[str, str]:
        _has_store_nodes(fed, call, self.who.names(fed, call))
        return super().plan(fed, call)


def _post(fed: LocalFederation, names: list[str], admin: AdminCall) -> None:
    for name in names:
        fed.admin(name, admin.json(), path=admin.path)


@dataclass(frozen=True)
class Readyz:
    """The components' ``/readyz`` fault hook: *mode* (``fail`` or ``flap``) with the fault's
    *timed* parameters (seconds); revert sets ``ok``."""

    who: Components
    mode: ReadyzMode = "fail"
    timed: tuple[str, ...] = ()

    def admin_calls(self, call: FaultCall, *, revert: bool = False) -> AdminCalls:
        mode: ReadyzMode = "ok" if revert else self.mode
        timed = {} if revert else {p: float(call.value(p)) for p in self.timed}
        return [(str(self.who.role), readyz_fault(mode, **timed))]

    def inject(self, fed: LocalFederation, call: FaultCall) -> None:
        for _, admin in self.admin_calls(call):
            _post(fed, self.who.names(fed, call), admin)

    def revert(self, fed: LocalFederation, call: FaultCall) -> None:
        for _, admin in self.admin_calls(call, revert=True):
            _post(fed, self.who.names(fed, call), admin)

    def plan(self, fed: LocalFederation, call: FaultCall) -> tuple[str, str]:
        names = self.who.words(fed, call)
        timing = ", ".join(f"{p} {float(call.value(p)):g} s" for p in self.timed)
        return (f"make /readyz {self.mode} on {names}" + (f" ({timing})" if timing else ""),
                f"make /readyz pass on {names}")


@dataclass(frozen=True)
class Hook:
    """POST the admin call *on* to each component; revert POSTs *off*."""

    who: Components
    on: AdminCall
    off: AdminCall
    words: tuple[str, str]
    """``(inject, revert)`` in words, ``{names}`` filled in."""

    def admin_calls(self, call: FaultCall, *, revert: bool = False) -> AdminCalls:
        return [(str(self.who.role), self.off if revert else self.on)]

    def inject(self, fed: LocalFederation, call: FaultCall) -> None:
        _post(fed, self.who.names(fed, call), self.on)

    def revert(self, fed: LocalFederation, call: FaultCall) -> None:
        _post(fed, self.who.names(fed, call), self.off)

    def plan(self, fed: LocalFederation, call: FaultCall) -> tuple[str, str]:
        names = self.who.words(fed, call)
        return self.words[0].format(names=names), self.words[1].format(names=names)


@dataclass(frozen=True)
class BroadcastDelay:
    """The control plane holds each broadcast back ``seconds``; the old delay is recorded as
    ``previous`` and set again by the revert (0 if the record was lost)."""

    def admin_calls(self, call: FaultCall, *, revert: bool = False) -> AdminCalls:
        seconds = float(call.params.get("previous", 0.0)) if revert else float(call.value("seconds"))
        return [("controlplane", broadcast_delay(seconds))]

    def inject(self, fed: LocalFederation, call: FaultCall) -> None:
        previous = float(fed.get_json("controlplane").get("broadcast_delay", 0.0))
        (_, admin), = self.admin_calls(call)
        _post(fed, ["controlplane"], admin)
        call.params["previous"] = previous

    def revert(self, fed: LocalFederation, call: FaultCall) -> None:
        (_, admin), = self.admin_calls(call, revert=True)
        _post(fed, ["controlplane"], admin)

    def plan(self, fed: LocalFederation, call: FaultCall) -> tuple[str, str]:
        return (f"hold each control-plane broadcast back {float(call.value('seconds')):g} s (the current delay "
                "is recorded)", "set the recorded broadcast delay again")


@dataclass(frozen=True)
class AgentLabels:
    """Replace the region agent's slow-state labels (the old ones recorded as ``previous``);
    revert puts them back and runs the control plane's full reconciliation pass, since the
    snapshot learns slow state only on that pass (R3)."""

    def admin_calls(self, call: FaultCall, *, revert: bool = False) -> AdminCalls:
        if not revert:
            return [("agent", agent_labels(dict(call.value("labels"))))]
        # "previous" absent: the injection never changed anything, only the pass is run
        put_back = [("agent", agent_labels(dict(call.params["previous"])))] if "previous" in call.params else []
        return [*put_back, ("controlplane", reconcile())]

    def _run(self, fed: LocalFederation, call: FaultCall, calls: AdminCalls) -> None:
        for role, admin in calls:
            _post(fed, [f"agent-{call.need_region()}" if role == "agent" else role], admin)

    def inject(self, fed: LocalFederation, call: FaultCall) -> None:
        region = call.need_region()
        call.params["previous"] = dict(_agent_slow(fed, region)["labels"])  # the ledger keeps it too
        self._run(fed, call, self.admin_calls(call))

    def revert(self, fed: LocalFederation, call: FaultCall) -> None:
        self._run(fed, call, self.admin_calls(call, revert=True))

    def plan(self, fed: LocalFederation, call: FaultCall) -> tuple[str, str]:
        r = call.region
        return (f"replace agent-{r}'s labels with {call.value('labels')} (the old ones are recorded)",
                f"put agent-{r}'s recorded labels back and run the full reconciliation pass")


def _agent_slow(fed: LocalFederation, region: str) -> dict[str, Any]:
    try:
        slow: dict[str, Any] = fed.get_json(f"agent-{region}")["slow"]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise FaultError(f"agent-{region}: cannot read its slow state from /status: {exc!r}") from exc
    return slow


LOCAL_ACTIONS: Table[LocalAction] = Table("local fault action", {
    "gateway_down": Stop(signal.SIGTERM),
    "gateway_hung": Freeze(region_gateway),
    "region_blackhole": Freeze(region_all),
    "control_plane_down": Stop(signal.SIGKILL),
    "bus_down": Stop(signal.SIGKILL, note="its JetStream state on disk survives"),
    "sync_delay": BroadcastDelay(),
    "probe_flap": Readyz(region_gateway, "flap", ("period", "down")),
    "gateway_blip": Readyz(region_gateway, "fail", ("seconds",)),
    "gateway_unready": Readyz(region_gateway),
    "instances_unready": Readyz(region_apps),
    "instances_hung": Freeze(region_apps),
    "proxy_cut_off": Hook(region_proxy, drop_broadcasts(True), drop_broadcasts(False),
                          ("make {names} drop every version broadcast", "let {names} hear broadcasts again")),
    "region_labels": AgentLabels(),
    "store_down": StopStore(signal.SIGKILL, note="a file store's data survives on disk, memory does not"),
    "store_isolated": FreezeStore(one("store-{region}")),
    "replication_lag": ReplicationLag(),
})
"""Fault name -> how the local target injects and reverts it."""
