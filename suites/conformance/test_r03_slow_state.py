"""R3: slow state (labels, quotas) reaches the global snapshot only on the full pass, and on
a conflict the designated primary region wins - no auto-merge.

A non-primary region's labels are changed (one label to a value that conflicts with the
primary's, one new label). Near-real-time state would arrive within a few probe
intervals; the slow state must not, until the full reconciliation pass runs.
"""

from __future__ import annotations

import time

import pytest

from gameday.conformance.capabilities import require
from gameday.conformance.wait import sample_for
from gameday.interfaces import Reconcilable

MARK = "gameday-r3"
"""A label only the changed region carries: shows the pass really picked the change up."""


def _slow(snap, key):
    return snap.get("entries", {}).get(key) or {}


@pytest.mark.conformance("R3", "slow state is reconciled only on the full pass; the primary wins a conflict")
def test_r3_labels_reach_the_snapshot_only_on_the_full_pass(drill, view, federation, topology, timing, settled):
    reconcilable = require(federation, Reconcilable, "R3 needs a full reconciliation pass on demand")
    primary = topology.primary_region
    before = view.snapshot()
    merged_before = _slow(before, "slow/merged")
    primary_labels = _slow(before, f"slow/{primary}").get("labels") or {}
    assert primary_labels, (f"expected the global snapshot to hold the primary region {primary}'s labels under "
                            f"slow/{primary} before the check; it has {sorted(before.get('entries', {}))}")
    region = drill.pick_region(exclude=(primary,))
    key = sorted(primary_labels)[0]
    ours = dict(_slow(before, f"slow/{region}").get("labels") or {})
    token = f"seed{drill.settings.seed}"
    changed = {**ours, key: f"{primary_labels[key]}-{region}", MARK: token}
    # Near-real-time changes (health) travel within this; slow state must not.
    window = max(2.0, 2 * timing.heartbeat_interval + (timing.fall + timing.rise) * timing.probe_interval)
    with drill.fault("region_labels", region, labels=changed) as fault:
        passes_before = view.cp()["reconcile"]
        samples = sample_for(lambda: (view.snapshot(), view.cp()["reconcile"]), window, interval=0.2)
        early = [(t, s) for t, (s, rec) in samples if rec.get("passes") == passes_before.get("passes")
                 and rec.get("region_syncs") == passes_before.get("region_syncs")]
        leaked = [(t, s) for t, s in early if (_slow(s, f"slow/{region}").get("labels") or {}) != ours]
        assert not leaked, (
            f"expected region {region}'s new labels to stay out of the global snapshot until a full "
            f"reconciliation pass; at t+{leaked[0][0] - fault.window.t_fault:.2f} s (no pass had run) slow/{region} "
            f"already holds {_slow(leaked[0][1], f'slow/{region}').get('labels')}")
        v_pre = view.cp_version()
        t_pass = time.monotonic()
        report = reconcilable.reconcile()
        after = view.snapshot()
    assert sorted(report.get("replied", [])) == sorted(view.names), (
        f"expected every region's agent to answer the full pass; replied {report.get('replied')}, "
        f"missing {report.get('missing')}")
    got = _slow(after, f"slow/{region}").get("labels") or {}
    assert got == changed, (f"expected the full pass (t+{t_pass - fault.window.t_fault:.1f} s) to bring region "
                            f"{region}'s labels into slow/{region}: expected {changed}, seen {got}")
    assert int(after["version"]) > v_pre, (f"expected the full pass to bump the global version past v{v_pre} "
                                          f"(slow state changed); it is v{after['version']}")
    merged = _slow(after, "slow/merged")
    labels = merged.get("labels") or {}
    assert labels.get(key) == primary_labels[key], (
        f"expected the primary {primary} to win the conflict on label {key!r} "
        f"({primary}: {primary_labels[key]!r}, {region}: {changed[key]!r}); merged labels have {labels.get(key)!r}")
    conflict = next((c for c in merged.get("conflicts", []) if c.get("key") == key), None)
    assert (conflict or {}).get("winner") == primary, (
        f"expected the conflict on {key!r} to be recorded with winner {primary} (no auto-merge); "
        f"merged conflicts: {merged.get('conflicts')}")
    assert labels.get(MARK) == token, (f"expected the label {MARK}={token} that only {region} carries in the merged "
                                       f"labels after the full pass; merged labels: {labels}")
    restored = _slow(view.snapshot(), "slow/merged")
    assert restored == merged_before, (f"expected the revert (old labels + full pass) to restore the merged labels "
                                       f"{merged_before}; seen {restored}")
