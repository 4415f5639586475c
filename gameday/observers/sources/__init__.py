"""Observation sources: where the observer reads a federation from, one observation at a time.

A federation is known to the harness only through what it exposes (DESIGN.md §7): an entry
node's route version and routable regions over HTTP JSON, the control plane's version over
HTTP JSON or Prometheus, the GSLB's answers over DNS, stale-snapshot alarms in a log file or
a command's output. Each kind is one small protocol whose one method takes one observation
now; the observer polls them on one monotonic clock and stamps each answer when it arrived.
The reference app is described with the same built-in sources as any other federation.

Protocols: :class:`EntryNodeSource`, :class:`VersionSource`, :class:`DnsSource`,
:class:`AlarmSource`, :class:`UtilisationSource` (polled) and :class:`VersionFeed` (push: the
control plane's version as it announces it). Built-ins: :class:`HttpJsonNode`,
:class:`HttpJsonVersion`, :class:`PrometheusVersion`, :class:`MetricsVersion`, :class:`UdpDns`,
:class:`LogFileAlarms`, :class:`CommandAlarms`, :class:`LineFeedAlarms`,
:class:`HttpJsonUtilisation`, :class:`NatsVersionFeed`. What a target gives the observer:
:class:`Sources`.

A source never raises for a federation that does not answer: "it did not answer" is an
observation (``NodeReading(ok=False)``, a ``None`` version or utilisation,
``DnsReading(ok=False)``, a feed that stays silent). Why the last read failed is kept in the
built-ins' ``last_error`` for the report.

One module per role; each holds its reading, its protocol (the seam) and its built-ins:

- ``entry_nodes``: role entry node (:class:`EntryNodeSource`, :class:`HttpJsonNode`).
- ``versions``: role version, polled and pushed (:class:`VersionSource`, :class:`VersionFeed`,
  :class:`HttpJsonVersion`, :class:`PrometheusVersion`, :class:`MetricsVersion`, :class:`NatsVersionFeed`).
- ``utilisation``: role utilisation (:class:`UtilisationSource`, :class:`HttpJsonUtilisation`).
- ``alarms``: role alarms (:class:`AlarmSource`, :class:`LogFileAlarms`, :class:`CommandAlarms`,
  :class:`LineFeedAlarms`).
- ``dns``: role DNS (:class:`DnsSource`, :class:`UdpDns`).
- ``state``: role state, the write path and read-back (:class:`StateSource`, :class:`HttpState`).
- ``checks``: role check timeouts (:class:`CheckTimeoutSource`, :class:`HttpJsonCheckTimeouts`).
- ``bundle``: :class:`Sources`, what a target gives the observer (one field per role).
- ``_common``: what they share: :data:`HttpClient`, :func:`fetch`, dotted field paths,
  :class:`Closeable`.

To add a source kind, open the module of its role here: its protocol is what the new source
implements, and its built-ins are the examples to follow. Then make a profile able to name it
in :mod:`gameday.observers.kinds` (``SOURCE_KINDS``; its roles: entry node, version, alarms).
Import from this package, not from its modules: every name is re-exported here.
"""

from __future__ import annotations

from gameday.observers.sources._common import Closeable, HttpClient, fetch
from gameday.observers.sources.alarms import (
    ALARM_EVENTS,
    AlarmEvent,
    AlarmEventKind,
    AlarmSource,
    CommandAlarms,
    LineFeedAlarms,
    LogFileAlarms,
)
from gameday.observers.sources.bundle import Sources
from gameday.observers.sources.checks import CheckTimeoutSource, HttpJsonCheckTimeouts
from gameday.observers.sources.dns import DnsReading, DnsSource, UdpDns
from gameday.observers.sources.entry_nodes import EntryNodeSource, HttpJsonNode, NodeReading
from gameday.observers.sources.state import (
    HttpState,
    LookupAnswer,
    ProcessedAnswer,
    StateSource,
    TaskQueue,
    WriteAnswer,
)
from gameday.observers.sources.utilisation import HttpJsonUtilisation, UtilisationReading, UtilisationSource
from gameday.observers.sources.versions import (
    HttpJsonVersion,
    MetricsVersion,
    NatsVersionFeed,
    PrometheusVersion,
    VersionFeed,
    VersionSource,
    log,
)
from gameday.verdicts.state import StatedReplication

__all__ = [
    "ALARM_EVENTS",
    "AlarmEvent",
    "AlarmEventKind",
    "AlarmSource",
    "CheckTimeoutSource",
    "Closeable",
    "CommandAlarms",
    "DnsReading",
    "DnsSource",
    "EntryNodeSource",
    "HttpClient",
    "HttpJsonCheckTimeouts",
    "HttpJsonNode",
    "HttpJsonUtilisation",
    "HttpJsonVersion",
    "HttpState",
    "LineFeedAlarms",
    "LogFileAlarms",
    "LookupAnswer",
    "MetricsVersion",
    "NatsVersionFeed",
    "NodeReading",
    "ProcessedAnswer",
    "PrometheusVersion",
    "Sources",
    "StateSource",
    "StatedReplication",
    "TaskQueue",
    "UdpDns",
    "UtilisationReading",
    "UtilisationSource",
    "VersionFeed",
    "VersionSource",
    "WriteAnswer",
    "fetch",
    "log",
]
