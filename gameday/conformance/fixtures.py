"""Fixtures of the conformance checks: a read-only view of the session federation and its timings.

The plugin registers this module (``pytest_plugins`` in :mod:`gameday.plugin`), so the
fixtures serve the shipped suite (``gameday.suites.conformance``), a team's own rule
checks, and a selection of the shipped ones imported into a team's test module.

Every check talks to the federation through the target (``federation``) and the public
endpoints it returns (a client's way in, and the reference app's URLs where the target runs
it); the view below wraps those endpoints (HTTP ``/status`` and ``/metrics``, DNS).
Timeouts come from the topology's timings, never from constants.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gameday.conformance.view import FederationView, federation_view
from gameday.model.topology import Timing, Topology
from gameday.observers.reference import reference_endpoints_of


@pytest.fixture(scope="session")
def view(federation: Any) -> Iterator[FederationView]:
    """The session federation seen from outside (statuses, metrics, requests, DNS)."""
    with federation_view(federation.endpoints(), federation.regions(), getattr(federation, "name", ""),
                         reference_endpoints_of(federation)) as v:
        yield v


@pytest.fixture(scope="session")
def timing(topology: Topology) -> Timing:
    """The topology's timings (:class:`gameday.model.topology.Timing`): probe interval, fall, rise, ..."""
    return topology.timing


@pytest.fixture(scope="session")
def converge_s(timing: Timing) -> float:
    """Seconds a healthy federation may take to converge after a change: the probes that
    decide it (fall + rise, each up to interval + timeout), a region timeout, two
    broadcasts, and a generous allowance for a busy machine."""
    t = timing
    return (t.fall + t.rise) * (t.probe_interval + t.probe_timeout) + t.region_timeout \
        + 2 * t.heartbeat_interval + 10.0


@pytest.fixture
def settled(view: FederationView, converge_s: float) -> int | None:
    """Wait until every entry node is at the control plane's version routing to every
    region; return that version (None where the target exposes no control plane)."""
    return view.wait_converged(converge_s)


@pytest.fixture
def full_weight(view: FederationView, timing: Timing, converge_s: float, settled: int | None) -> int | None:
    """:func:`settled`, and the GSLB answering with every region at its full static weight
    (no re-admission ramp left over from an earlier check); return the version."""
    view.wait_dns_settled(converge_s + timing.ramp_seconds)
    return settled
