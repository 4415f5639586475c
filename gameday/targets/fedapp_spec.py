"""The reference app's view of a topology, built by the targets that deploy it (local, kind, kube).

The app owns its spec types (:mod:`gameday.fedapp.spec`) and imports nothing of the harness;
this is the one place the harness's validated :class:`~gameday.model.topology.Topology` is turned
into them. Fields only the harness uses (kubeconfig contexts, the offered load) stay behind.
"""

from __future__ import annotations

from gameday.fedapp import storetiming
from gameday.fedapp.spec import AppControlPlane, AppDefects, AppState, AppTiming, AppTopology
from gameday.model.topology import Topology
from gameday.verdicts.predict import StatedTiming, from_topology
from gameday.verdicts.state import StatedElection, StatedFailover, StatedReplication


class ReferenceTiming:
    """The stated timing of a target that runs the reference app from its topology (local, kind,
    kube): the reference GSLB and agents run with exactly the topology's timings and TTL."""

    topology: Topology

    def stated_timing(self, *, prefer_observed_ttl: bool = False) -> StatedTiming:
        """The topology's timings: the reference GSLB and agents run with exactly these."""
        del prefer_observed_ttl  # the GSLB answers with the topology's TTL
        return from_topology(self.topology, f"topology {self.topology.name!r}")

    def timing_contradiction(self) -> str | None:
        """None: the reference GSLB answers with the topology's TTL (it is configured from it)."""
        return None


def app_topology(topology: Topology) -> AppTopology:
    """What the reference app's components need of *topology* (its layout and primary region resolved)."""
    return AppTopology(
        name=topology.name,
        zone=topology.zone,
        service=topology.service,
        primary_region=topology.primary_region,
        layout=topology.layout,
        timing=AppTiming.model_validate(topology.timing.model_dump()),
        control_plane=AppControlPlane(state=topology.control_plane.state,
                                      broadcast_delay=topology.control_plane.broadcast_delay),
        defects=AppDefects.model_validate(topology.defects.model_dump(exclude={"store_unreplicated"})),
        state=app_state(topology),
    )


def app_state(topology: Topology) -> AppState | None:
    """The store the app writes to: one replica per region (at most 3) for ``sync``, one on
    the primary region's node for ``none``; the ``store_unreplicated`` defect keeps one, in
    memory, whatever is stated."""
    state = topology.state
    if state is None:
        return None
    quorum = min(3, len(topology.regions))
    if topology.defects.store_unreplicated:
        return AppState(replicas=1, storage="memory", placement=topology.primary_region, queue_replicas=quorum)
    if state.replication == "none":
        return AppState(replicas=1, storage="file", placement=topology.primary_region, mode="none",
                        queue_replicas=quorum)
    if state.replication == "async":
        lag = float(state.max_lag or 0.5)
        return AppState(replicas=1, storage="file", mode="async", primary=topology.primary_region,
                        replication_interval=min(0.1, lag / 2), queue_replicas=quorum)
    return AppState(replicas=quorum, storage="file", queue_replicas=quorum)


def stated_replication(topology: Topology) -> StatedReplication | None:
    """What the reference app's configuration states of its state layer: the replication mode and
    lag from ``state:``; for ``async``, the store controller's failover, checked with the
    topology's own ``timing`` (it probes the primary as the GSLB probes gateways) and its lease and
    announcement constants; for ``sync``, nats-server's Raft election (the stream's replicas elect a
    new leader); and how long its store clients stay on a frozen node. None: no state
    layer."""
    state = topology.state
    if state is None:
        return None
    t = topology.timing
    failover = None
    if state.replication == "async":
        lease, announce = storetiming.LEASE, storetiming.ANNOUNCE_EVERY
        failover = StatedFailover(probe_interval=t.probe_interval, probe_timeout=t.probe_timeout, fall=t.fall,
                                  lease=lease, announce=announce, nodes=len(topology.regions),
                                  source=f"topology {topology.name!r}: timing, and the reference store controller's "
                                         f"{lease:g} s lease and {announce:g} s announcements")
    election = None
    if state.replication == "sync":
        lo, hi = storetiming.RAFT_ELECTION_TIMEOUT
        election = StatedElection(timeout_min=lo, timeout_max=hi, heartbeat=storetiming.RAFT_HEARTBEAT,
                                  campaign_max=storetiming.RAFT_CAMPAIGN_MAX,
                                  source=f"nats-server's Raft defaults: election timeout {lo:g}-{hi:g} s, heartbeat "
                                         f"{storetiming.RAFT_HEARTBEAT:g} s, a new vote round within "
                                         f"{storetiming.RAFT_CAMPAIGN_MAX:g} s")
    return StatedReplication(state.replication, state.max_lag, failover=failover, election=election,
                             dead_connection=storetiming.DEAD_CONNECTION)
