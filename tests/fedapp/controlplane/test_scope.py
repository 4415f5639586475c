"""Scopes: the global tier's and a regional control plane's names, and which keys each owns."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gameday.fedapp.controlplane import CONSUMER, scope_for
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import (
    SNAPSHOT_KEY,
    alive_key,
    broadcast_subject,
    gateway_key,
    instance_key,
    regional_broadcast_subject,
    regional_events_subject,
    regional_snapshot_key,
)


def test_the_global_tier_owns_every_key_in_the_global_layout(spec: FederationSpec) -> None:
    s = scope_for(spec)
    assert (s.name, s.region, s.kv_key, s.durable, s.broadcast) == (
        "global", None, SNAPSHOT_KEY, CONSUMER, broadcast_subject(spec.run_id))
    assert s.liveness and s.slow and s.regions == tuple(r.name for r in spec.regions)
    assert s.owns(instance_key("a", "a-1")) and s.owns(gateway_key("a"))
    with pytest.raises(ValueError, match="regional control planes exist only in the 'regional' layout"):
        scope_for(spec, "a")


def test_regional_scopes_split_the_keys(make_spec: Callable[..., FederationSpec]) -> None:
    spec = make_spec(control_plane={"layout": "regional"})
    glob, a = scope_for(spec), scope_for(spec, "a")
    assert (a.name, a.region, a.kv_key, a.durable) == ("a", "a", regional_snapshot_key("a"), f"{CONSUMER}-a")
    assert a.consume == regional_events_subject(spec.run_id, "a")
    assert a.broadcast == regional_broadcast_subject(spec.run_id, "a")
    assert not a.liveness and not a.slow and a.regions == ("a",)
    assert a.owns(instance_key("a", "a-1")) and not a.owns(gateway_key("a"))
    assert glob.owns(gateway_key("a")) and glob.owns(alive_key("a")) and not glob.owns(instance_key("a", "a-1"))
