"""The federation control plane: consume agents' events, keep the versioned global snapshot.

One global process (HTTP on ``spec.control_plane``). It

* consumes health-change events from JetStream (durable pull consumer ``cp``, explicit
  ack) and applies them with :meth:`Snapshot.apply_event` (duplicates and stale events
  are no-ops, R5);
* marks regions alive/not alive from the agents' heartbeats (``region_timeout``);
* runs the slow full reconciliation (R3): on start, on a NATS reconnect, when an agent
  with a new epoch is first heard (that region only), every ``reconcile_interval`` and on
  ``POST /admin/reconcile``; it asks every agent for its full state and is the only path
  on which slow state (quotas, labels) changes; on a label conflict the primary wins;
* announces every new version on the broadcast subject after ``broadcast_delay`` and
  re-announces the last announced version every ``heartbeat_interval`` (R4);
* answers diff requests from the snapshot *as announced* (so a delayed broadcast cannot
  be bypassed by a puller).

State modes (``topology.control_plane.state``):

``durable``
    The snapshot lives in the JetStream KV bucket (key ``global``); every change is
    written with compare-and-set on the KV revision. On a CAS conflict (another replica
    wrote) the control plane reloads, re-applies and retries, so replicas cannot fork
    the version. A restart resumes from the stored version.
``ephemeral``
    Memory only, version 0 on every start: a real misconfiguration, kept on purpose
    for the negative controls (the version regresses after a restart).

Layouts (``topology.layout``, R14):

``global``
    The one process above, for everything.
``regional``
    One control plane per region (``--region``; HTTP on the region's ``control_plane``
    endpoint) consumes only its region's instance events (``gd.<run>.revents.<r>``,
    consumer ``cp-<r>``), keeps the regional snapshot under KV key ``region.<r>`` (the
    same CAS discipline) and broadcasts and serves diffs on the region's own subjects.
    When the region's count of healthy instances goes from 0 to more or back it publishes
    ``region/<r>/serving`` on the global events subject: the one regional fact that
    changes global routing. The global tier consumes the global subject only (gateway
    health, ``serving``), marks regions alive, runs the slow reconciliation and never
    holds an instance entry. Each process is described by a :class:`Scope`.

Fault hooks (``POST /admin/fault``): ``{"broadcast_delay": D}`` and the readiness
fault of :class:`~gameday.fedapp.common.ReadyzFault`.

The parts, one module each: :mod:`.scope` (what a process is responsible for),
:mod:`.bus` (the shared run state and the JetStream set-up), :mod:`.store` (the snapshot
and compare-and-set), :mod:`.consumer` (events in), :mod:`.reconciler` (R3),
:mod:`.liveness` (heartbeats), :mod:`.broadcaster` (R4 and diffs), :mod:`.serving` (the
regional ``serving`` fact), :mod:`.http` (status, metrics, admin) and :mod:`.plane` (the
assembly and the process's life cycle).
"""

from __future__ import annotations

from gameday.fedapp.controlplane.bus import BUS_ERRORS, Runtime, ensure_jetstream
from gameday.fedapp.controlplane.plane import ControlPlane, serve
from gameday.fedapp.controlplane.scope import CONSUMER, Scope, scope_for

__all__ = ["BUS_ERRORS", "CONSUMER", "ControlPlane", "Runtime", "Scope", "ensure_jetstream", "scope_for", "serve"]
