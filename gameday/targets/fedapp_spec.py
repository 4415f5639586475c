"""The reference app's view of a topology, built by the targets that deploy it (local, kind, kube).

The app owns its spec types (:mod:`gameday.fedapp.spec`) and imports nothing of the harness;
this is the one place the harness's validated :class:`~gameday.model.topology.Topology` is turned
into them. Fields only the harness uses (kubeconfig contexts, the offered load) stay behind.
"""

from __future__ import annotations

from gameday.fedapp.spec import AppControlPlane, AppDefects, AppTiming, AppTopology
from gameday.model.topology import Topology


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
        defects=AppDefects.model_validate(topology.defects.model_dump()),
    )
