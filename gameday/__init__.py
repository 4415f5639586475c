"""gameday: failover game days and conformance checks for multi-region federations.

The public API, importable from here (``from gameday import Drill, Target, Fault``):

- the drill and its result: :class:`Drill`, :class:`DrillResult`;
- the target seam: :class:`Target`, :class:`RegionInfo`, :class:`Endpoints`, what the
  target hook is given (:class:`Topology`, :class:`Settings`) and the
  optional capabilities (:class:`Reconcilable`, :class:`Releasable`, :class:`Liveness`,
  :class:`HasFaults`, :class:`FaultPlanner`, :class:`HasAlarmLines`, :class:`HasManifests`,
  :class:`HasSoftware`, :class:`SharedFederation`);
- faults: :class:`Fault`, :class:`Param`, the built-in table :data:`FAULTS`;
- observation sources: :class:`Sources` and the source protocols and built-ins;
- the reference app's own URLs (:class:`ReferenceEndpoints`), where a target runs it;
- the errors (:class:`GamedayError` and its tree, see :mod:`gameday.errors`).

Names are resolved on first use (PEP 562), so importing ``gameday`` (which every
component of the reference app does, through ``gameday.fedapp``) loads nothing heavy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gameday.version import __version__

_EXPORTS: dict[str, str] = {
    # the drill
    "Drill": "gameday.drill", "DrillResult": "gameday.verdicts.result",
    # targets
    "Target": "gameday.interfaces", "RegionInfo": "gameday.interfaces", "Endpoints": "gameday.interfaces",
    "Reconcilable": "gameday.interfaces", "Releasable": "gameday.interfaces",
    "ReleaseMechanism": "gameday.interfaces",
    "Liveness": "gameday.interfaces", "HasFaults": "gameday.interfaces",
    "FaultPlanner": "gameday.interfaces", "HasAlarmLines": "gameday.interfaces",
    "HasManifests": "gameday.interfaces", "HasSoftware": "gameday.interfaces",
    "SharedFederation": "gameday.interfaces",
    # what the target hook (``pytest_gameday_make_target``) is given
    "Topology": "gameday.model.topology", "Settings": "gameday.runtime.settings",
    # faults
    "Fault": "gameday.faults.model", "Param": "gameday.faults.model", "FAULTS": "gameday.faults.catalogue",
    # observation sources
    "Sources": "gameday.observers.sources", "EntryNodeSource": "gameday.observers.sources",
    "VersionSource": "gameday.observers.sources", "DnsSource": "gameday.observers.sources",
    "AlarmSource": "gameday.observers.sources", "NodeReading": "gameday.observers.sources",
    "DnsReading": "gameday.observers.sources", "AlarmEvent": "gameday.observers.sources",
    "HttpJsonNode": "gameday.observers.sources", "HttpJsonVersion": "gameday.observers.sources",
    "PrometheusVersion": "gameday.observers.sources", "MetricsVersion": "gameday.observers.sources",
    "UdpDns": "gameday.observers.sources", "LogFileAlarms": "gameday.observers.sources",
    "CommandAlarms": "gameday.observers.sources", "UtilisationSource": "gameday.observers.sources",
    "UtilisationReading": "gameday.observers.sources", "HttpJsonUtilisation": "gameday.observers.sources",
    "VersionFeed": "gameday.observers.sources", "NatsVersionFeed": "gameday.observers.sources",
    "ReferenceEndpoints": "gameday.observers.reference",
    # load (what the load hook, ``pytest_gameday_make_load``, returns)
    "LoadGenerator": "gameday.load.generator", "RecordedLoad": "gameday.load.generator",
    "RequestRec": "gameday.model.timeline",
    # errors
    **dict.fromkeys((
        "GamedayError", "ConfigError", "TargetError", "TargetUnreachable", "ComponentFailed", "FaultError",
        "RestoreIncomplete", "LoadError", "DrillAborted", "ComponentDied", "LoadCollapsed", "DrillRefused",
        "TransientError", "DrillLockTimeout", "DrillLockError"), "gameday.errors"),
}

# The same names as _EXPORTS (tests/test_public_api.py keeps them in step).
__all__ = [
    "FAULTS",
    "AlarmEvent",
    "AlarmSource",
    "CommandAlarms",
    "ComponentDied",
    "ComponentFailed",
    "ConfigError",
    "DnsReading",
    "DnsSource",
    "Drill",
    "DrillAborted",
    "DrillLockError",
    "DrillLockTimeout",
    "DrillRefused",
    "DrillResult",
    "Endpoints",
    "EntryNodeSource",
    "Fault",
    "FaultError",
    "FaultPlanner",
    "GamedayError",
    "HasAlarmLines",
    "HasFaults",
    "HasManifests",
    "HasSoftware",
    "HttpJsonNode",
    "HttpJsonUtilisation",
    "HttpJsonVersion",
    "Liveness",
    "LoadCollapsed",
    "LoadError",
    "LoadGenerator",
    "LogFileAlarms",
    "MetricsVersion",
    "NatsVersionFeed",
    "NodeReading",
    "Param",
    "PrometheusVersion",
    "Reconcilable",
    "RecordedLoad",
    "ReferenceEndpoints",
    "RegionInfo",
    "Releasable",
    "ReleaseMechanism",
    "RequestRec",
    "RestoreIncomplete",
    "Settings",
    "SharedFederation",
    "Sources",
    "Target",
    "TargetError",
    "TargetUnreachable",
    "Topology",
    "TransientError",
    "UdpDns",
    "UtilisationReading",
    "UtilisationSource",
    "VersionFeed",
    "VersionSource",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gameday' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from gameday.drill import Drill
    from gameday.errors import (
        ComponentDied,
        ComponentFailed,
        ConfigError,
        DrillAborted,
        DrillLockError,
        DrillLockTimeout,
        DrillRefused,
        FaultError,
        GamedayError,
        LoadCollapsed,
        LoadError,
        RestoreIncomplete,
        TargetError,
        TargetUnreachable,
        TransientError,
    )
    from gameday.faults.catalogue import FAULTS
    from gameday.faults.model import Fault, Param
    from gameday.interfaces import (
        Endpoints,
        FaultPlanner,
        HasAlarmLines,
        HasFaults,
        HasManifests,
        HasSoftware,
        Liveness,
        Reconcilable,
        RegionInfo,
        Releasable,
        ReleaseMechanism,
        SharedFederation,
        Target,
    )
    from gameday.model.topology import Topology
    from gameday.observers.reference import ReferenceEndpoints
    from gameday.observers.sources import (
        AlarmEvent,
        AlarmSource,
        CommandAlarms,
        DnsReading,
        DnsSource,
        EntryNodeSource,
        HttpJsonNode,
        HttpJsonUtilisation,
        HttpJsonVersion,
        LogFileAlarms,
        MetricsVersion,
        NatsVersionFeed,
        NodeReading,
        PrometheusVersion,
        Sources,
        UdpDns,
        UtilisationReading,
        UtilisationSource,
        VersionFeed,
        VersionSource,
    )
    from gameday.runtime.settings import Settings
    from gameday.verdicts.result import DrillResult
