"""Property tests of the pure snapshot model (R5: monotonic version, one bump per effective change)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gameday.fedapp.snapshot import Replica, Snapshot, merge_slow
from gameday.fedapp.wire import Event

KEYS = ["region/a/instance/a-1", "region/a/instance/a-2", "region/a/gateway", "region/b/gateway"]
VALUES = [{"healthy": True}, {"healthy": False}, {"healthy": True, "weight": 1}]


@st.composite
def agent_histories(draw: Any) -> list[Event]:
    """Events as agents emit them: per agent (epoch) seq counts up; keys and values arbitrary."""
    events: list[Event] = []
    n_epochs = draw(st.integers(1, 3))
    for epoch in range(1, n_epochs + 1):
        n = draw(st.integers(0, 12))
        for seq in range(1, n + 1):
            events.append(Event(region="a", epoch=epoch * 1000, seq=seq, key=draw(st.sampled_from(KEYS)),
                                value=dict(draw(st.sampled_from(VALUES))), observed_at=0.0))
    return events


@st.composite
def deliveries(draw: Any) -> tuple[list[Event], list[Event]]:
    """(emitted, delivered): the bus duplicates and reorders the emitted events arbitrarily."""
    emitted = draw(agent_histories())
    extra = draw(st.lists(st.sampled_from(emitted), max_size=10)) if emitted else []
    delivered = draw(st.permutations(emitted + extra))
    return emitted, list(delivered)


def newest_per_key(events: list[Event]) -> dict[str, dict[str, Any]]:
    best: dict[str, Event] = {}
    for ev in events:
        cur = best.get(ev.key)
        if cur is None or (ev.epoch, ev.seq) > (cur.epoch, cur.seq):
            best[ev.key] = ev
    return {k: dict(ev.value) for k, ev in best.items()}


@settings(max_examples=300, deadline=None)
@given(deliveries())
def test_version_never_regresses_and_bumps_once_per_effective_change(
    case: tuple[list[Event], list[Event]],
) -> None:
    _, delivered = case
    snap = Snapshot()
    effective = 0
    for ev in delivered:
        before_version, before_entries = snap.version, dict(snap.entries)
        bumped = snap.apply_event(ev)
        changed = snap.entries != before_entries
        # exactly one bump for an effective change, none otherwise
        assert snap.version == before_version + (1 if changed else 0)
        assert bumped == changed
        effective += changed
        # a duplicate delivered right away is always a no-op
        assert snap.apply_event(ev) is False
        assert snap.version == before_version + (1 if changed else 0)
    assert snap.version == effective


@settings(max_examples=300, deadline=None)
@given(deliveries())
def test_duplicated_reordered_delivery_converges_to_newest_value(
    case: tuple[list[Event], list[Event]],
) -> None:
    """Whatever the order and however often each event arrives, every key ends at the value
    of its newest ``(epoch, seq)`` event: a stale event never overwrites a newer one."""
    emitted, delivered = case
    snap = Snapshot()
    for ev in delivered:
        snap.apply_event(ev)
    assert snap.entries == newest_per_key(emitted)
    # In order, once each: the version counts exactly the value changes of the history.
    ordered = Snapshot()
    for ev in sorted(emitted, key=lambda e: (e.epoch, e.seq)):
        ordered.apply_event(ev)
    assert ordered.entries == snap.entries


@settings(max_examples=200, deadline=None)
@given(deliveries(), st.data())
def test_diff_since_brings_any_earlier_replica_to_the_full_snapshot(
    case: tuple[list[Event], list[Event]], data: st.DataObject
) -> None:
    _, delivered = case
    snap = Snapshot()
    history: dict[int, dict[str, dict[str, Any]]] = {0: {}}
    for ev in delivered:
        if snap.apply_event(ev):
            history[snap.version] = {k: dict(v) for k, v in snap.entries.items()}
    since = data.draw(st.sampled_from(sorted(history)))
    replica = Replica(version=since, entries={k: dict(v) for k, v in history[since].items()})
    diff = snap.diff_since(since)
    replica.apply(diff)
    assert replica.version == snap.version
    assert replica.entries == snap.entries
    if 0 < since <= snap.version:
        assert not diff.full
        # only keys that changed after `since` travel
        assert set(diff.entries) == {k for k, at in snap.changed_at.items() if at > since}
    # a replica ahead of the control plane (its version regressed) gets a full copy
    ahead = Replica(version=snap.version + 5, entries={"stale/key": {"x": 1}})
    ahead.apply(snap.diff_since(ahead.version))
    assert ahead.entries == snap.entries
    assert ahead.version == snap.version


@settings(max_examples=200, deadline=None)
@given(deliveries(), st.lists(st.tuples(st.sampled_from([*KEYS, "slow/a"]), st.sampled_from(VALUES)),
                              max_size=8))
def test_json_round_trip_and_set_entry_counts(
    case: tuple[list[Event], list[Event]], sets: list[tuple[str, dict[str, Any]]]
) -> None:
    _, delivered = case
    snap = Snapshot()
    for ev in delivered:
        snap.apply_event(ev)
    for key, value in sets:
        before = snap.version
        changed = snap.entries.get(key) != value
        assert snap.set_entry(key, value) is changed
        assert snap.version == before + changed
    assert Snapshot.from_json(snap.to_json()) == snap
    assert Snapshot.from_json(snap.to_json()).to_json() == snap.to_json()


def test_set_entry_does_not_block_a_later_event() -> None:
    """The reconciliation sets health without marks, so the agent's next event still applies."""
    snap = Snapshot()
    snap.apply_event(Event("a", 5, 9, KEYS[0], {"healthy": True}, 0.0))
    snap.set_entry(KEYS[0], {"healthy": False})
    assert snap.apply_event(Event("a", 5, 10, KEYS[0], {"healthy": True}, 0.0)) is True
    assert snap.entries[KEYS[0]] == {"healthy": True}
    assert snap.version == 3


def test_the_primary_wins_a_label_conflict_and_the_auto_merge_defect_breaks_exactly_that() -> None:
    slow = {"a": {"labels": {"tier": "gold", "zone": "x"}}, "b": {"labels": {"tier": "gold-b", "zone": "x"}},
            "c": {"labels": {"tier": "gold"}}}
    merged = merge_slow(slow, "a")
    assert merged["labels"] == {"tier": "gold", "zone": "x"}
    assert merged["conflicts"] == [{"key": "tier", "values": {"a": "gold", "b": "gold-b", "c": "gold"}, "winner": "a"}]
    broken = merge_slow(slow, "a", auto_merge=True)
    assert broken["labels"] == {"tier": "gold-b", "zone": "x"}  # b overrode the primary; the rest as before
    assert broken["conflicts"][0]["winner"] == "b"
