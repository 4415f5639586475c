"""What a target gives the observer: :class:`Sources`, the bundle of every role's sources."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gameday.observers.sources.alarms import AlarmSource
from gameday.observers.sources.checks import CheckTimeoutSource
from gameday.observers.sources.dns import DnsSource
from gameday.observers.sources.entry_nodes import EntryNodeSource
from gameday.observers.sources.state import StateSource
from gameday.observers.sources.utilisation import UtilisationSource
from gameday.observers.sources.versions import VersionFeed, VersionSource


@dataclass(frozen=True)
class Sources:
    """Everything the observer polls, as a target describes its federation."""

    entry_nodes: tuple[EntryNodeSource, ...]
    dns: DnsSource
    control_plane: VersionSource | None = None
    """None: the version verdict is not applicable."""
    alarms: tuple[AlarmSource, ...] = ()
    """Empty: the alarm verdict is not applicable."""
    utilisation: Mapping[str, tuple[UtilisationSource, ...]] = field(default_factory=dict)
    """Region -> one source per app instance; optional (empty: the headroom verdict judges
    only the static N-1 arithmetic), read at a lower rate."""
    regional_control_planes: Mapping[str, VersionSource] = field(default_factory=dict)
    """Region -> its own control plane's version (the regional layout, R14); read at the
    utilisation rate. The version verdict of a fault on a region's instances reads it."""
    broadcast: VersionFeed | None = None
    """The control plane's version as it announces it, where the harness may listen (the
    local target's bus); None: the version is polled only."""
    check_timeouts: CheckTimeoutSource | None = None
    """The federation's own timed-out health checks per region, read at the utilisation rate;
    None: only the observer's own rates tell a starved harness (gameday.verdicts.harness)."""
    state: StateSource | None = None
    """The federation's write path and read-back (DESIGN.md section 9): the drill writes at
    :attr:`write_rate` while it observes and reads the writes back after the restore; None: the
    federation declares no state layer and the state verdicts are not applicable."""
    write_rate: float = 5.0
    writers: int = 8
    """Writer clients, each with its own DNS cache (:class:`gameday.observers.writes.Writer`)."""
    """Writes per second (a state layer only)."""
    task_rate: float = 0.0
    """Tasks per second added to the background workers' queue (a state source that is also a
    :class:`~gameday.observers.sources.state.TaskQueue`); 0: none, the duplicates verdict is n/a."""
    write_ttl_hint: float = 5.0
    """The DNS TTL the writer clients' first answers are aged over (their caches expire apart)."""

    def describe(self) -> list[str]:
        """One line per source, for the report."""
        lines = [f"entry node {n.name} (region {n.region}): {n.describe()}" for n in self.entry_nodes]
        lines.append(f"dns: {self.dns.describe()}")
        lines.append("control plane: " + (self.control_plane.describe() if self.control_plane
                                          else "none (version verdict not applicable)"))
        if self.broadcast is not None:
            lines.append(f"control plane broadcast: {self.broadcast.describe()}")
        lines += [f"regional control plane {r}: {s.describe()}" for r, s in self.regional_control_planes.items()]
        lines += [f"utilisation {r}: {s.describe()}" for r, srcs in self.utilisation.items() for s in srcs]
        lines += [f"alarms: {a.describe()}" for a in self.alarms] or ["alarms: none (alarm verdict not applicable)"]
        if self.check_timeouts is not None:
            lines.append(f"the federation's check timeouts: {self.check_timeouts.describe()}")
        lines.append(f"state: {self.state.describe()} at {self.write_rate:g}/s" if self.state is not None
                     else "state: none (state verdicts not applicable)")
        return lines
