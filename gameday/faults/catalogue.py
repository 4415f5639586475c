"""The fault catalogue: every fault a drill can inject, and what it takes out.

Each fault is an action with an exact inverse; the target knows how to do both.

==================  ==========  ====================================================
kind                region?     effect (local target)
==================  ==========  ====================================================
gateway_down        yes         the region's gateway process is stopped (SIGTERM);
                                revert starts it again on the same address and port
gateway_hung        yes         the gateway is frozen (SIGSTOP): connections hang;
                                revert SIGCONT
region_blackhole    yes         every process of the region is frozen: nothing in or
                                out answers ("pulling the cable"); revert SIGCONT
control_plane_down  no          the control plane is stopped; revert starts it
bus_down            no          nats-server is stopped; revert starts it (JetStream
                                state on disk survives)
sync_delay          no          the control plane holds each broadcast back
                                ``seconds`` (param); revert restores the old delay
probe_flap          yes         the region gateway's /readyz fails ``down`` s out of
                                every ``period`` s (params); revert makes it healthy
gateway_blip        yes         the region gateway's /readyz fails once for ``seconds``
                                (param) and then recovers by itself (a probe blip,
                                R2); revert makes it healthy at once
gateway_unready     yes         the region gateway's /readyz fails until reverted (the
                                gateway still serves: only health checks see it)
instances_unready   yes         every app instance of the region fails /readyz (their
                                /livez stays fine): no ready local replica, the
                                gateway must fall back (R7); revert makes them ready
instances_hung      yes         every app instance of the region is frozen (SIGSTOP):
                                upstream attempts time out, the gateway must retry in
                                another region (R7); revert SIGCONT
proxy_cut_off       yes         the region's local proxy drops every version broadcast
                                (cut off from the control plane, R6); revert lets it
                                hear them again
region_labels       yes         the region agent's labels (slow state) are replaced by
                                ``labels`` (param); nothing reaches the global snapshot
                                until the next full reconciliation pass (R3); revert
                                puts the old labels back and runs the full pass
==================  ==========  ====================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from gameday.errors import ConfigError
from gameday.userinput import shown


@dataclass(frozen=True)
class FaultKind:
    name: str
    needs_region: bool
    takes_region_out: bool
    """True when the fault removes its region from service (switchover is measured)."""
    params: tuple[str, ...] = ()


CATALOGUE: dict[str, FaultKind] = {
    k.name: k
    for k in (
        FaultKind("gateway_down", True, True),
        FaultKind("gateway_hung", True, True),
        FaultKind("region_blackhole", True, True),
        FaultKind("control_plane_down", False, False),
        FaultKind("bus_down", False, False),
        FaultKind("sync_delay", False, False, ("seconds",)),
        FaultKind("probe_flap", True, False, ("period", "down")),
        FaultKind("gateway_blip", True, False, ("seconds",)),
        FaultKind("gateway_unready", True, True),
        FaultKind("instances_unready", True, True),
        FaultKind("instances_hung", True, True),
        FaultKind("proxy_cut_off", True, False),
        FaultKind("region_labels", True, False, ("labels",)),
    )
}


def check_fault(kind: str, region: str | None, params: dict[str, object], regions: list[str]) -> FaultKind:
    """Validate a fault request before anything is injected.

    Raises:
        ConfigError: unknown kind, missing/extra region, unknown region or parameter.
    """
    fk = CATALOGUE.get(kind)
    if fk is None:
        raise ConfigError(f"fault {shown(kind)}: unknown; expected one of {', '.join(sorted(CATALOGUE))}")
    if fk.needs_region and region is None:
        raise ConfigError(f"fault {shown(kind)} needs a region (one of {', '.join(regions)})")
    if not fk.needs_region and region is not None:
        raise ConfigError(f"fault {shown(kind)} takes no region, got {shown(region)}")
    if region is not None and region not in regions:
        raise ConfigError(f"fault {shown(kind)}: region {shown(region)} not in the topology ({', '.join(regions)})")
    unknown = set(params) - set(fk.params)
    if unknown:
        raise ConfigError(f"fault {shown(kind)}: unknown parameter(s) {shown(sorted(unknown))}; "
                          f"expected {list(fk.params)}")
    return fk
