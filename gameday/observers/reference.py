"""The reference app described as observation sources, the way any federation is described.

Its wire contract (``gameday.fedapp.wire``): every gateway and proxy serves ``/status`` with
``version``, ``routable_regions`` and ``stale``; the control plane serves ``/status`` with
``version``; the GSLB answers A queries for the service name; the proxies log JSON lines
whose ``event`` is ``stale_snapshot`` or ``stale_snapshot_cleared``, stamped ``mono`` on the
harness's clock, with the ``reason``. The ``local``, ``kind`` and ``kube`` targets build their
:class:`~gameday.observers.sources.Sources` here, from their :class:`Endpoints`.
"""

from __future__ import annotations

from pathlib import Path

from gameday.observers.sources import (
    AlarmSource,
    HttpJsonNode,
    HttpJsonVersion,
    LogFileAlarms,
    Sources,
    UdpDns,
)
from gameday.parts import Endpoints

DNS_SAMPLES = 16
"""GSLB queries per read: its answers are weighted single addresses, so a 20 % region needs
several samples to be seen."""

EVENT_FIELD, TIME_FIELD, DETAIL_FIELD = "event", "mono", "reason"
"""How the reference app's log lines carry an alarm."""


def reference_sources(ep: Endpoints, alarms: tuple[AlarmSource, ...]) -> Sources:
    """The reference app's sources at *ep*; *alarms* as the target reads its nodes' logs."""
    host, port = ep.dns_server
    return Sources(
        entry_nodes=tuple(HttpJsonNode(name=n, region=ep.node_region(n), url=url)
                          for n, url in ep.entry_nodes.items()),
        dns=UdpDns(server=host, port=port, fqdn=ep.fqdn, samples=DNS_SAMPLES),
        control_plane=HttpJsonVersion(url=ep.control_plane) if ep.control_plane else None,
        alarms=alarms,
        utilisation={r: tuple(urls) for r, urls in ep.utilisation.items()},
        regional_control_planes={r: HttpJsonVersion(url=u)
                                 for r, u in (ep.extra.get("regional_control_planes") or {}).items()},
    )


def log_file_alarms(logdir: Path, nodes: list[str]) -> tuple[AlarmSource, ...]:
    """One :class:`LogFileAlarms` per entry node's ``<logdir>/<node>.log``."""
    return tuple(LogFileAlarms(path=logdir / f"{n}.log", node=n, json_event_field=EVENT_FIELD,
                                time_field=TIME_FIELD, detail_field=DETAIL_FIELD) for n in nodes)
