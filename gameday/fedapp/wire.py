"""The federation's wire contract: NATS subjects, JetStream names, message shapes.

All names are prefixed with the federation's ``run_id`` so that federations never
share state. JSON everywhere; times are Unix seconds (float) on the wire.

Subjects and payloads
---------------------
``gd.<run>.events.<region>``  (JetStream stream ``GD_<run>_EVENTS``)
    A region agent's health *change*, see :class:`Event`. Published only when a
    probed target changes state after the rise/fall thresholds, and once for every
    target when the agent starts. Consumed by the control plane through the durable
    pull consumer ``cp``.

``gd.<run>.heartbeat.<region>``  (core NATS)
    ``{"region": str, "epoch": int, "at": float}`` every ``heartbeat_interval``.
    The control plane marks a region not alive after ``region_timeout`` of silence.

``gd.<run>.snapshot.version``  (core NATS)
    ``{"version": int, "at": float, "heartbeat": bool}``: the control plane's
    broadcast, on every new version (after ``broadcast_delay``) and every
    ``heartbeat_interval`` as a heartbeat carrying the last announced version.

``gd.<run>.snapshot.diff``  (core NATS request/reply)
    request ``{"since": int, "node": str}``; reply :class:`Diff` as JSON:
    ``{"version": int, "full": bool, "entries": {key: value}}`` holding every key
    changed after ``since`` (all keys when ``full``). ``full`` is true when
    ``since`` is 0 or ahead of the control plane (its version regressed).

``gd.<run>.agent.<region>.state``  (core NATS request/reply)
    request ``{}``; reply ``{"region": str, "epoch": int, "slow": {"quota": {...},
    "labels": {...}}, "health": {key: value}}`` - the agent's full current view, used
    by the control plane's start-up sync and its slow full reconciliation (R3).

Regional layout (R14, ``topology.layout == "regional"``)
-------------------------------------------------------
``gd.<run>.revents.<region>``  (JetStream stream ``GD_<run>_REVENTS``)
    The region agent's *instance* health changes (:class:`Event` as above). Consumed only
    by that region's control plane (durable pull consumer ``cp-<region>`` filtered to the
    region's subject): a regional event never reaches another region or the global tier.
    Gateway health stays on ``gd.<run>.events.<region>`` (it changes global routing), and
    so does ``region/<r>/serving``, which the regional control plane publishes when the
    region's count of healthy instances goes from 0 to more or back.

``gd.<run>.region.<region>.snapshot.version`` / ``.diff``  (core NATS)
    The regional control plane's broadcast and diff request/reply, shaped exactly like
    the global ones; followed by the region's own gateway and proxy.

JetStream KV bucket ``GD_<run>_SNAPSHOT``, key ``region.<region>``
    The region's durable regional snapshot, compare-and-set like the global one.

JetStream KV bucket ``GD_<run>_SNAPSHOT``, key ``global``
    The durable snapshot (:meth:`gameday.fedapp.snapshot.Snapshot.to_json`). Written
    with compare-and-set on the KV revision so two control planes cannot fork it.

Snapshot keys (see :mod:`gameday.fedapp.snapshot`)
--------------------------------------------------
``region/<r>/alive``            ``{"alive": bool}``  control plane, from heartbeats
``region/<r>/gateway``          ``{"healthy": bool}``  agent probe of the gateway
``region/<r>/instance/<name>``  ``{"healthy": bool, "weight": int}``  agent probe
``region/<r>/route_rules``      ``{"version": int}``  route-rule version
``region/<r>/serving``          ``{"serving": bool}``  regional layout: the region has a
                                healthy instance (its regional control plane says so)
``slow/<r>``                    ``{"quota": {...}, "labels": {...}}``  full pass only
``slow/merged``                 ``{"labels": {...}, "conflicts": [...]}``  primary wins

HTTP endpoints every component serves
-------------------------------------
``/livez``, ``/readyz``, ``/status`` (JSON), ``/metrics`` (Prometheus text),
``POST /admin/fault`` (JSON body; fault hooks, see each component). Every ``/admin`` call
needs ``Authorization: Bearer <the run's token>`` (:func:`gameday.fedapp.common.admin_guard`).
The admin calls a harness makes are built by :class:`AdminCall`'s builders below (one
definition for every target that drives the reference app).
Entry nodes (gateway, proxy) report in ``/status``: ``version``,
``routable_regions``, ``excluded_regions``, ``snapshot_age_s``,
``last_broadcast_version``, ``stale``, and ``snapshot_scope`` (``global`` or
``regional``) with ``versions: {"global": int, "regional": int | null}``: ``version``
is always the global version (cross-region routing), the regional one drives routing
to the region's own instances in the regional layout.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Json = dict[str, Any]

#: Header set by gateways: ``<region>/<instance>`` that served the request.
SERVED_BY = "X-Served-By"
#: Header set by gateways: the snapshot version the gateway routed by.
ROUTE_VERSION = "X-Route-Version"
#: Header marking a request already forwarded once by a gateway (no second hop).
HOP = "X-Gameday-Hop"


def events_subject(run_id: str, region: str = "*") -> str:
    return f"gd.{run_id}.events.{region}"


def heartbeat_subject(run_id: str, region: str = "*") -> str:
    return f"gd.{run_id}.heartbeat.{region}"


def broadcast_subject(run_id: str) -> str:
    return f"gd.{run_id}.snapshot.version"


def diff_subject(run_id: str) -> str:
    return f"gd.{run_id}.snapshot.diff"


def agent_state_subject(run_id: str, region: str) -> str:
    return f"gd.{run_id}.agent.{region}.state"


def events_stream(run_id: str) -> str:
    return f"GD_{run_id}_EVENTS"


def snapshot_bucket(run_id: str) -> str:
    return f"GD_{run_id}_SNAPSHOT"


SNAPSHOT_KEY = "global"


def regional_events_subject(run_id: str, region: str = "*") -> str:
    return f"gd.{run_id}.revents.{region}"


def regional_events_stream(run_id: str) -> str:
    return f"GD_{run_id}_REVENTS"


def regional_broadcast_subject(run_id: str, region: str) -> str:
    return f"gd.{run_id}.region.{region}.snapshot.version"


def regional_diff_subject(run_id: str, region: str) -> str:
    return f"gd.{run_id}.region.{region}.snapshot.diff"


def regional_snapshot_key(region: str) -> str:
    return f"region.{region}"


def is_regional_key(key: str) -> bool:
    """True for the keys a regional control plane owns in the regional layout (instance health)."""
    return key.startswith("region/") and "/instance/" in key


def instance_key(region: str, instance: str) -> str:
    return f"region/{region}/instance/{instance}"


def gateway_key(region: str) -> str:
    return f"region/{region}/gateway"


def alive_key(region: str) -> str:
    return f"region/{region}/alive"


def serving_key(region: str) -> str:
    return f"region/{region}/serving"


def route_rules_key(region: str) -> str:
    return f"region/{region}/route_rules"


def slow_key(region: str) -> str:
    return f"slow/{region}"


MERGED_SLOW_KEY = "slow/merged"


@dataclass(frozen=True)
class Event:
    """A region agent's report that one key changed.

    ``(epoch, seq)`` orders the events of one agent: ``epoch`` is the agent process's
    start time in ns (a restarted agent has a larger epoch), ``seq`` counts from 1.
    The control plane applies an event only if its ``(epoch, seq)`` is greater than
    the last applied for that key, so duplicates and reordered stale events are no-ops.
    """

    region: str
    epoch: int
    seq: int
    key: str
    value: Json
    observed_at: float
    """Unix time the probe result that caused the event was taken."""

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Event:
        d = json.loads(data)
        return cls(
            region=str(d["region"]),
            epoch=int(d["epoch"]),
            seq=int(d["seq"]),
            key=str(d["key"]),
            value=dict(d["value"]),
            observed_at=float(d["observed_at"]),
        )


@dataclass(frozen=True)
class Diff:
    """The control plane's answer to a diff request."""

    version: int
    full: bool
    entries: dict[str, Json]

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"version": self.version, "full": self.full, "entries": self.entries}, separators=(",", ":")
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Diff:
        d = json.loads(data)
        return cls(version=int(d["version"]), full=bool(d["full"]), entries=dict(d["entries"]))


# -- the admin calls (what a harness POSTs to a component's admin listener) ---------------------
FAULT_PATH = "/admin/fault"
"""Every component's fault hook (:meth:`gameday.fedapp.skeleton.HttpComponent.apply_fault`)."""
SLOW_PATH = "/admin/slow"
"""The agent's slow-state edit (labels, quota)."""
RECONCILE_PATH = "/admin/reconcile"
"""The control plane's full reconciliation pass (R3), run now."""

ReadyzMode = Literal["ok", "fail", "flap"]


@dataclass(frozen=True)
class AdminCall:
    """One admin call: ``POST path`` with the JSON *body* (signed with the run's token)."""

    path: str
    body: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def json(self) -> Json:
        """The body as a fresh dict (safe to hand to an HTTP client or a plan)."""
        return dict(self.body)


def readyz_fault(mode: ReadyzMode, **seconds: float) -> AdminCall:
    """Fail or flap ``/readyz`` (``ok`` ends it). *seconds*: ``seconds`` (a one-off failure
    that long), or ``period`` and ``down`` (a flap)."""
    return AdminCall(FAULT_PATH, {"readyz": mode, **{k: float(v) for k, v in seconds.items()}})


def broadcast_delay(seconds: float) -> AdminCall:
    """Hold each control-plane version broadcast back *seconds* (0 ends it)."""
    return AdminCall(FAULT_PATH, {"broadcast_delay": float(seconds)})


def drop_broadcasts(drop: bool) -> AdminCall:
    """Make an entry node ignore (or hear again) every version broadcast."""
    return AdminCall(FAULT_PATH, {"drop_broadcasts": bool(drop)})


def agent_labels(labels: Mapping[str, str]) -> AdminCall:
    """Replace the region agent's slow-state labels (the snapshot learns them on the next full pass)."""
    return AdminCall(SLOW_PATH, {"labels": dict(labels)})


def reconcile() -> AdminCall:
    """Run the control plane's full reconciliation pass now."""
    return AdminCall(RECONCILE_PATH, {})
