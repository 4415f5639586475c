"""The drill's two waits on the federation: its steady state before a fault (the hypothesis the
drill tests, DESIGN.md §4) and its return to steady state after the revert.

Both read only the timeline the observer records, tick the live line, and raise a casualty
(:class:`~gameday.drill.guard.FaultGuard`) as soon as the watcher sees one.
"""

from __future__ import annotations

import math
import time

from gameday.drill.context import ActiveFault
from gameday.drill.guard import FaultGuard
from gameday.errors import FaultError, TargetUnreachable
from gameday.model.timeline import Timeline, latest_per_node
from gameday.observers.observer import Observer
from gameday.observers.watch import steady_state as steady_state_seen


def steady_state(guard: FaultGuard, observer: Observer, tl: Timeline, baseline: float, *, nodes: tuple[str, ...],
                 lost: tuple[str, ...], outermost: bool, label: str, timeout: float = 20.0) -> None:
    """Observe at least *baseline* seconds in which every entry node in *nodes* answered
    routing to every region outside *lost*, the control plane answered, the GSLB
    answered (its latest answer, and every region outside *lost* at least once), and -
    before the outermost fault, with a load generator attached - the load was achieved
    (the steady-state hypothesis before the fault). Inside an enclosing fault the load
    is judged by the watcher's collapse bound instead: the enclosing fault may slow it.

    Raises:
        TargetUnreachable: a component died or the load generator exited (at once), or
            the rest was not seen in *timeout*; nothing was injected.
        ComponentDied, LoadCollapsed: the same inside an enclosing fault, which the
            watcher reverted.
    """
    t0 = time.monotonic()
    want = {r for r in guard.ctx.region_names if r not in lost}
    watcher = guard.watcher
    assert watcher is not None
    while True:
        now = time.monotonic()
        if guard.casualty is not None:
            if not outermost:
                raise guard.casualty_error(f"{label} was not injected")
            raise TargetUnreachable(f"steady state broken before injecting {label}: "
                                    f"{guard.casualty.message}; nothing was injected")
        holds, seen = steady_state_seen(tl.copy(), t0, nodes, want,
                                        control_plane=observer.sources.control_plane is not None)
        load_ok, _, load_seen = watcher.baseline_load(now) if outermost else (True, None, "")
        if now - t0 >= baseline and holds and load_ok:
            return
        if observer.error is not None or now - t0 > timeout:
            raise TargetUnreachable(
                f"steady state not observed within {timeout:g} s before injecting {label}: {seen}"
                + (f"; {load_seen}" if load_seen else "") + "; nothing was injected")
        guard.tick_progress()
        time.sleep(0.05)


def restored(guard: FaultGuard, active: ActiveFault, timeout: float, still_lost: tuple[str, ...] = ()) -> None:
    """Wait until every entry node outside *still_lost* routes to every region outside it
    again, and the control plane answers with a settled version; record ``t_restored``.

    Raises:
        FaultError: not back within *timeout* seconds.
        ComponentDied, LoadCollapsed: a casualty (no steady state is coming back).
    """
    regions = {r for r in guard.ctx.region_names if r not in still_lost}
    sources = active.observer.sources
    nodes = {n.name for n in sources.entry_nodes if n.region not in still_lost}
    deadline = time.monotonic() + timeout
    w = active.window
    assert w.t_revert is not None
    while time.monotonic() < deadline:
        if guard.casualty is not None:  # no steady state is coming back: say why now
            raise guard.casualty_error()
        snap = active.result.timeline.copy()
        latest = latest_per_node(snap.nodes, nodes=nodes, since=math.nextafter(w.t_revert, math.inf))
        routes_back = set(latest) == nodes and all(o.ok and (o.routable is None or set(o.routable) == regions)
                                                   for o in latest.values())
        back_at = [o.t for o in latest.values()]
        if not any(o.routable is not None for o in latest.values()):
            # No entry node says where it routes: the GSLB answering every region again
            # is what "back" can mean (its answers are weighted samples: the union).
            after = [d for d in snap.dns if d.ok and d.t > w.t_revert]
            routes_back = routes_back and regions <= {r for d in after for r in d.regions}
            back_at += [d.t for d in after[-1:]]
        # The control plane must answer again too, with a version that has held for 0.5 s:
        # a restarted control plane's version is part of what the version check judges.
        cp = [c for c in snap.cp if c.source == "poll" and c.t > w.t_revert and c.version is not None]
        cp_settled = sources.control_plane is None or (
            bool(cp) and all(c.version == cp[-1].version for c in cp if c.t >= cp[-1].t - 0.5)
            and cp[-1].t - cp[0].t >= 0.5)
        if routes_back and cp_settled:
            w.t_restored = max(back_at)
            active.result.timeline.mark(w.t_restored, "restored")
            return
        guard.tick_progress()
        time.sleep(0.1)
    raise FaultError(
        f"after reverting {w.kind} {w.region or ''} the federation did not return to steady state "
        f"within {timeout:g} s (every entry node routing to {sorted(regions)})")
