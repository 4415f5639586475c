"""What one control-plane process is responsible for: the global tier, or one region's
control plane in the regional layout (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass

from gameday.fedapp.spec import Endpoint, FederationSpec
from gameday.fedapp.wire import (
    SNAPSHOT_KEY,
    broadcast_subject,
    diff_subject,
    events_stream,
    events_subject,
    heartbeat_subject,
    is_regional_key,
    regional_broadcast_subject,
    regional_diff_subject,
    regional_events_stream,
    regional_events_subject,
    regional_snapshot_key,
)

CONSUMER = "cp"
"""Durable name of the control plane's pull consumer on the events stream."""


@dataclass(frozen=True)
class Scope:
    """What one control-plane process is responsible for (see the package docstring)."""

    name: str
    """``global`` or the region's name."""
    region: str | None
    """The region of a regional control plane; None for the global tier."""
    endpoint: Endpoint
    kv_key: str
    stream: str
    stream_subjects: str
    """The stream's subjects (a wildcard over every region)."""
    consume: str
    """The subject the durable consumer takes (filter)."""
    durable: str
    broadcast: str
    diff: str
    heartbeats: str
    """Agents' heartbeats listened to (liveness, and the re-sync of a restarted agent)."""
    regions: tuple[str, ...]
    """Agents asked for their state on a reconciliation pass."""
    layout: str
    liveness: bool
    """Marks regions alive from heartbeats (the global tier)."""
    slow: bool
    """Runs the slow state of R3 (the global tier)."""

    def owns(self, key: str) -> bool:
        """Whether a health key from an agent's state belongs in this snapshot."""
        if self.layout == "global":
            return True
        return is_regional_key(key) if self.region is not None else not is_regional_key(key)


def scope_for(spec: FederationSpec, region: str | None = None) -> Scope:
    """The scope of the control plane of *region* (regional layout), or of the global tier.

    Raises:
        ValueError: *region* is given but the layout is global or the region unknown.
    """
    run = spec.run_id
    layout = spec.topology.layout
    if region is None:
        return Scope(name="global", region=None, endpoint=spec.control_plane, kv_key=SNAPSHOT_KEY,
                     stream=events_stream(run), stream_subjects=events_subject(run, "*"),
                     consume=events_subject(run, "*"), durable=CONSUMER, broadcast=broadcast_subject(run),
                     diff=diff_subject(run), heartbeats=heartbeat_subject(run, "*"),
                     regions=tuple(r.name for r in spec.regions), layout=layout, liveness=True, slow=True)
    ep = spec.region(region).control_plane
    if layout != "regional" or ep is None:
        raise ValueError(f"controlplane --region {region}: the topology's control-plane layout is {layout!r}; "
                         "regional control planes exist only in the 'regional' layout")
    return Scope(name=region, region=region, endpoint=ep, kv_key=regional_snapshot_key(region),
                 stream=regional_events_stream(run), stream_subjects=regional_events_subject(run, "*"),
                 consume=regional_events_subject(run, region), durable=f"{CONSUMER}-{region}",
                 broadcast=regional_broadcast_subject(run, region), diff=regional_diff_subject(run, region),
                 heartbeats=heartbeat_subject(run, region), regions=(region,), layout=layout,
                 liveness=False, slow=False)
