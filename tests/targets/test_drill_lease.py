"""The planned cross-machine drill lock (:mod:`gameday.targets.k8s.lease`), offline.

The Lease it writes is valid against the real schemas in strict mode (the manifests' check),
and the rule for taking it over is leader election's: free when absent, unheld, ours, or not
renewed for its duration; never when it lacks a duration or a time.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone

import kubernetes_validate
import pytest

from gameday.targets.k8s import lease as ls
from gameday.targets.k8s import objects as o

NOW = datetime(2026, 12, 1, 15, 30, 0, 123456, tzinfo=UTC)
ME, OTHER = "laptop-a/pid 4242 (worker main)", "laptop-b/pid 77 (worker gw1)"


@pytest.mark.parametrize("version", [o.SCHEMA_VERSION, "1.37.0"])
def test_the_lease_validates_strictly(version: str) -> None:
    obj = ls.taken(ME, NOW)
    kubernetes_validate.validate(obj, version, strict=True)
    kubernetes_validate.validate(ls.renewed(obj, NOW + timedelta(seconds=20)), version, strict=True)
    bad = copy.deepcopy(obj)
    bad["spec"]["holder"] = ME  # misspelt: strict mode is what catches it
    with pytest.raises(kubernetes_validate.ValidationError, match="holder"):
        kubernetes_validate.validate(bad, version, strict=True)


def test_times_are_micro_times_in_utc() -> None:
    obj = ls.taken(ME, NOW.astimezone(timezone(timedelta(hours=2))))
    assert obj["spec"]["acquireTime"] == obj["spec"]["renewTime"] == "2026-12-01T15:30:00.123456Z"
    assert obj["metadata"] == {"name": "gameday-drill-lock", "namespace": o.NAMESPACE,
                               "labels": {o.LABEL_MANAGED_BY: o.MANAGED_BY}}
    assert ls.parse_micro_time("2026-12-01T15:30:00.123456Z") == NOW
    assert ls.parse_micro_time("2026-12-01T15:30:00Z") == NOW.replace(microsecond=0)
    with pytest.raises(ValueError, match="timezone-aware"):
        ls.micro_time(datetime(2026, 12, 1))  # a naive time
    renewed = ls.renewed(obj, NOW + timedelta(seconds=20))
    assert renewed["spec"]["acquireTime"] == obj["spec"]["acquireTime"]
    assert renewed["spec"]["renewTime"] == "2026-12-01T15:30:20.123456Z"


def test_who_may_take_it() -> None:
    held = ls.taken(OTHER, NOW)
    assert ls.may_take(None, ME, NOW)
    assert ls.may_take(held, OTHER, NOW)  # its own (a renewal, or a retry after a lost reply)
    assert not ls.may_take(held, ME, NOW)
    assert not ls.may_take(held, ME, NOW + timedelta(seconds=ls.LEASE_DURATION_S))  # just not expired
    assert ls.may_take(held, ME, NOW + timedelta(seconds=ls.LEASE_DURATION_S + 1))  # its holder stopped renewing
    renewed = ls.renewed(held, NOW + timedelta(seconds=50))
    assert not ls.may_take(renewed, ME, NOW + timedelta(seconds=ls.LEASE_DURATION_S + 1))  # it renewed in time
    released = {**held, "spec": {**held["spec"], "holderIdentity": ""}}
    assert ls.may_take(released, ME, NOW)
    by_hand = {**held, "spec": {"holderIdentity": OTHER}}  # no duration, no time: never expires
    assert not ls.may_take(by_hand, ME, NOW + timedelta(days=30))
    with pytest.raises(ValueError, match="needs a holder"):
        ls.taken("", NOW)
