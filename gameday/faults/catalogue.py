"""The built-in faults: one table of what each fault means (:data:`FAULTS`).

Each fault is an action with an exact inverse; each target knows how to do both, in its
own table keyed by these names (local: :data:`gameday.targets.local.faults.LOCAL_ACTIONS`;
kind/kube: :data:`gameday.targets.k8s.plan.K8S_ACTIONS`). The descriptions below say what
the fault does to the reference federation; ``python -c "from gameday.faults import FAULTS;
print(*(f.describe() for f in FAULTS.values()), sep='\\n')"`` lists them.
"""

from __future__ import annotations

from gameday.faults.model import Fault, FaultTable, Param

FAULTS = FaultTable((
    Fault(name="gateway_down", needs_region=True, takes_region_out=True, stops=("gateway-{region}",),
          gateway_check_fails="at once",
          description="the region's gateway is stopped; revert starts it again on the same address and port"),
    Fault(name="gateway_hung", needs_region=True, takes_region_out=True, gateway_check_fails="at the timeout",
          description="the region's gateway is frozen: connections hang; revert resumes it"),
    Fault(name="region_blackhole", needs_region=True, takes_region_out=True, cuts_off_region=True, store_node="frozen",
          description="every process of the region is frozen, nothing in or out answers ('pulling the "
                      "cable'); revert resumes them"),
    Fault(name="control_plane_down", needs_region=False, stops=("controlplane",),
          description="the control plane is stopped; revert starts it"),
    Fault(name="bus_down", needs_region=False, stops=("nats",),
          description="the bus (nats-server) is stopped; revert starts it (JetStream state survives)"),
    Fault(name="sync_delay", needs_region=False, params=(Param("seconds", 0.0),),
          description="the control plane holds each broadcast back `seconds`; revert restores the old delay"),
    Fault(name="probe_flap", needs_region=True, params=(Param("period", 1.0), Param("down", 0.3)),
          description="the region gateway's /readyz fails `down` s out of every `period` s; revert makes "
                      "it healthy"),
    Fault(name="gateway_blip", needs_region=True, params=(Param("seconds"),),
          description="the region gateway's /readyz fails once for `seconds` and recovers by itself (a probe "
                      "blip, R2); revert makes it healthy at once"),
    Fault(name="gateway_unready", needs_region=True, takes_region_out=True, gateway_check_fails="at once",
          description="the region gateway's /readyz fails until reverted (it still serves: only health "
                      "checks see it)"),
    Fault(name="instances_unready", needs_region=True, takes_region_out=True, hits_instances=True,
          description="every app instance of the region fails /readyz (/livez stays fine): no ready local "
                      "replica, the gateway must fall back (R7); revert makes them ready"),
    Fault(name="instances_hung", needs_region=True, takes_region_out=True, hits_instances=True,
          description="every app instance of the region is frozen: upstream attempts time out, the gateway "
                      "must retry in another region (R7); revert resumes them"),
    Fault(name="proxy_cut_off", needs_region=True,
          description="the region's local proxy drops every version broadcast (cut off from the control "
                      "plane, R6); revert lets it hear them again"),
    Fault(name="store_down", needs_region=True, stops=("store-{region}",), store_node="stopped",
          description="the region's store node (the state layer's nats-server) is killed (SIGKILL): what it held "
                      "only in memory is gone, a file store's data survives on disk; revert starts it again on the "
                      "same address and port (a federation with a state layer only)"),
    Fault(name="store_isolated", needs_region=True, store_node="frozen",
          description="the region's store node is frozen (SIGSTOP): alive with everything it held, answering "
                      "nothing, so a standby is promoted (async) or a new leader elected (sync) behind its back; "
                      "revert resumes it, an old primary returning as it was, which is where fencing is tested "
                      "(a federation with a state layer only)"),
    Fault(name="replication_lag", needs_region=False, store_node="frozen",
          description="replication is held back until reverted: async, the store controller's replicator "
                      "stops copying (a stalled WAL sender); sync, one replica that does not lead is frozen, "
                      "so every acknowledgement needs both others; revert releases it (a state layer only)"),
    Fault(name="region_labels", needs_region=True, params=(Param("labels"),),
          description="the region agent's labels (slow state) are replaced by `labels`; nothing reaches the "
                      "global snapshot until the next full reconciliation pass (R3); revert puts the old "
                      "labels back and runs the full pass"),
))
"""Every fault a drill can inject, by name. Extend it with :meth:`FaultTable.add`."""

CATALOGUE = FAULTS
"""The name older code and tests use for :data:`FAULTS`."""

FaultKind = Fault
"""The name older code uses for :class:`Fault`."""


def check_fault(kind: str, region: str | None, params: dict[str, object], regions: list[str]) -> Fault:
    """Validate a fault request before anything is injected (see :meth:`FaultTable.check`).

    Raises:
        ConfigError: unknown kind, missing/extra region, unknown region or parameter.
    """
    return FAULTS.check(kind, region, params, regions)
