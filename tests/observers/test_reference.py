"""The reference app described like any federation: its URLs (ReferenceEndpoints, from the
targets that run it) and the sources built from them, every field path named."""

from __future__ import annotations

from pathlib import Path

import pytest

from gameday.model.parts import Endpoints
from gameday.model.topology import load_topology
from gameday.observers.reference import (
    ReferenceEndpoints,
    RunsReferenceApp,
    reference_endpoints_of,
    reference_sources,
)
from gameday.observers.sources import HttpJsonNode, HttpJsonUtilisation, HttpJsonVersion, NatsVersionFeed
from gameday.targets.local import LocalTarget

EP = Endpoints(dns_server=("127.0.0.1", 5353), fqdn="app.test.", gateway_port=8080)
REF = ReferenceEndpoints(
    entry_nodes={"gateway-a": "http://127.0.1.1:1/status", "edge": "http://127.0.2.1:2/status"},
    control_plane="http://127.0.0.1:3/status",
    utilisation={"a": ["http://127.0.1.1:4/status", "http://127.0.1.1:5/status"]},
    nats_url="nats://127.0.0.1:4222", broadcast_subject="gd.x.snapshot.version",
    node_regions={"edge": "b"}, extra={"regional_control_planes": {"a": "http://127.0.1.1:6/status"}},
)


def test_reference_sources_name_the_apps_fields() -> None:
    s = reference_sources(EP, REF, ())
    gw, edge = s.entry_nodes
    assert isinstance(gw, HttpJsonNode) and (gw.name, gw.region) == ("gateway-a", "a")
    assert (gw.version_path, gw.routable_path, gw.stale_path) == ("version", "routable_regions", "stale")
    assert edge.region == "b"  # node_regions where the name does not say
    assert isinstance(s.control_plane, HttpJsonVersion) and s.control_plane.field == "version"
    util = s.utilisation["a"]
    assert all(isinstance(u, HttpJsonUtilisation) for u in util)
    assert [u.url for u in util] == REF.utilisation["a"]  # type: ignore[attr-defined]
    assert {(u.capacity_path, u.utilisation_path, u.rejected_path) for u in util} \
        == {("capacity_rps", "utilisation", "rejected_total")}  # type: ignore[attr-defined]
    assert isinstance(s.broadcast, NatsVersionFeed)
    assert (s.broadcast.url, s.broadcast.subject, s.broadcast.field) == (REF.nats_url, REF.broadcast_subject, "version")
    assert set(s.regional_control_planes) == {"a"}
    assert any(line.startswith("control plane broadcast: NATS") for line in s.describe())


def test_no_bus_no_feed_and_nothing_exposed_is_the_default() -> None:
    s = reference_sources(EP, ReferenceEndpoints(), ())
    assert s.entry_nodes == () and s.control_plane is None and s.broadcast is None and s.utilisation == {}
    assert ReferenceEndpoints().proxy_calls() == {}


def test_proxy_calls_and_siblings() -> None:
    ref = ReferenceEndpoints(entry_nodes={"proxy-a": "http://h:1/status", "proxy-b": "http://h:2/status",
                                          "gateway-a": "http://h:3/status"})
    assert ref.proxy_calls(skip_regions=("b",)) == {"a": "http://h:1/call/work"}
    assert ReferenceEndpoints.sibling("http://h:1/status", "/metrics") == "http://h:1/metrics"


def test_the_local_target_runs_the_reference_app_and_a_client_needs_none_of_it(tmp_path: Path) -> None:
    target = LocalTarget(load_topology(), tmp_path)  # planned, not started: the URLs are known
    assert isinstance(target, RunsReferenceApp)
    ref = reference_endpoints_of(target)
    assert ref is not None and ref.control_plane and ref.gslb and ref.snapshot and ref.nats_url
    assert {ref.node_region(n) for n in ref.entry_nodes} == {r.name for r in target.regions()}
    assert reference_endpoints_of(object()) is None
    sources = target.sources()
    assert sources.broadcast is not None and [n.name for n in sources.entry_nodes] == list(ref.entry_nodes)


def test_a_field_that_moved_says_where_it_went() -> None:
    with pytest.raises(AttributeError, match=r"Endpoints.entry_nodes is the reference app's.*reference_endpoints_of"):
        EP.entry_nodes  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'nonsense'"):
        EP.nonsense  # type: ignore[attr-defined]  # noqa: B018
