"""What the parts of one test's drill share: its collaborators (:class:`DrillContext`), a fault
request as checked (:class:`FaultRequest`) and a fault in effect (:class:`ActiveFault`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gameday.faults import Fault, Ledger
from gameday.faults.model import FaultTable
from gameday.interfaces import RegionInfo, Target
from gameday.load.generator import LoadGenerator
from gameday.model.timeline import FaultWindow
from gameday.observers.observer import Observer
from gameday.reports.steps import Steps
from gameday.runtime.interrupts import Interrupts
from gameday.runtime.settings import SLO, Settings
from gameday.verdicts.result import DrillResult


@dataclass(frozen=True, kw_only=True)
class DrillContext:
    """One test's drill, as every part of it sees it: set once, when the drill is made."""

    target: Target
    settings: Settings
    ledger: Ledger
    regions: tuple[RegionInfo, ...]
    """The target's regions, in topology order."""
    faults: FaultTable
    """The faults this drill may inject: the target's own (:class:`~gameday.interfaces.HasFaults`)
    and the built-ins."""
    offered: float
    margin: float
    load: LoadGenerator | None
    progress: Callable[[str], None]
    """The live line."""
    round: int
    seed_key: str
    dns_ttl: float
    steps: Steps
    """Where the drill's phases and verdicts go as steps (the Allure report's)."""
    interrupts: Interrupts
    """The process's signal policy: no fault is injected once a signal has arrived."""
    skip_unavailable_faults: bool
    """A conformance check skips (not applicable, with the reason) where the target cannot do
    the fault it needs; a drill asking for such a fault is misconfigured and errors."""
    on_result: Callable[[DrillResult], object] | None
    on_block_end: Callable[[FaultWindow], object] | None
    """Called the moment a fault's block ends (before its figures are summed up and the fault
    is reverted): the session shields the revert from a signal from here on."""

    @property
    def slo(self) -> SLO:
        return self.settings.slo

    @property
    def region_names(self) -> list[str]:
        return [r.name for r in self.regions]


@dataclass(frozen=True)
class FaultRequest:
    """One :meth:`~gameday.drill.Drill.fault` call, as checked before anything is touched."""

    kind: str
    region: str | None
    params: dict[str, Any]
    """The fault's parameters (one dict throughout: the target may record in it what its revert needs)."""
    fk: Fault
    plan: tuple[str, str] | None
    """(action, inverse) as the target plans them (:class:`~gameday.interfaces.FaultPlanner`), None otherwise."""
    parent: ActiveFault | None
    """The enclosing fault of a nested one."""
    already_lost: tuple[str, ...]
    lost: tuple[str, ...]

    @property
    def label(self) -> str:
        """``gateway_down b``."""
        return f"{self.kind} {self.region or ''}".strip()

    @property
    def takes_region_out(self) -> bool:
        """Whether this fault loses a region its enclosing faults had not."""
        return len(self.lost) > len(self.already_lost)


@dataclass
class ActiveFault:
    """A fault in effect: its window on the timeline and the result being recorded."""

    window: FaultWindow
    result: DrillResult
    observer: Observer
    """What records it (an enclosing fault's, for a nested one)."""
    ledger_id: str
    reverted: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def region(self) -> str | None:
        return self.window.region

    @property
    def label(self) -> str:
        return f"{self.window.kind} {self.window.region or ''}".rstrip()
