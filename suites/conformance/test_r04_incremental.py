"""R4: the incremental path. A change reaches every entry node (and the GSLB) as a diff
pulled since its version - never as a full copy - and a diff is much smaller than the
full snapshot."""

from __future__ import annotations

import pytest

DIFF_SHARE = 0.5
"""A diff must be at most this fraction of the full snapshot's size (one changed key of
a few dozen is a few percent)."""


def _pulls(metrics, node):
    out = {}
    for kind in ("diff", "full"):
        out[f"{kind}_pulls"] = metrics.value("gameday_snapshot_pulls_total", node=node, kind=kind)
        out[f"{kind}_bytes"] = metrics.value("gameday_snapshot_pulled_bytes_total", node=node, kind=kind)
    missing = [k for k, v in out.items() if v is None]
    assert not missing, (f"{node}: /metrics lacks gameday_snapshot_pulls_total / gameday_snapshot_pulled_bytes_total "
                         f"for {missing}; R4 cannot be judged without them")
    return out


def _all_pulls(view):
    out = {n: _pulls(m, n) for n, m in view.node_metrics().items()}
    if view.ep.gslb:
        out["gslb"] = _pulls(view.metrics(view.ep.gslb), "gslb")
    return out


@pytest.mark.conformance("R4", "a change reaches every entry node as a diff, far smaller than the snapshot")
def test_r4_a_change_reaches_every_entry_node_as_a_diff(drill, view, converge_s, settled):
    region = drill.pick_region()
    others = [r for r in view.names if r != region]
    before = _all_pulls(view)
    v0 = view.cp_version()
    with drill.fault("gateway_unready", region):
        v1 = view.wait_converged(converge_s, regions=others)
    v2 = view.wait_converged(converge_s)
    after = _all_pulls(view)
    full_bytes = int(view.cp()["full_snapshot_bytes"])
    assert v0 < v1 < v2, f"expected the version to move for the change and its revert: v{v0} -> v{v1} -> v{v2}"
    for node, a in after.items():
        b = before[node]
        d = {k: a[k] - b[k] for k in a}
        assert d["full_pulls"] == 0, (f"expected {node} to follow v{v0} -> v{v2} with diffs only; it pulled the full "
                                      f"snapshot {d['full_pulls']:g} time(s) ({d['full_bytes']:g} bytes)")
        assert d["diff_pulls"] >= 2, (f"expected {node} to pull at least one diff for the change (v{v1}) and one for "
                                      f"the revert (v{v2}); it pulled {d['diff_pulls']:g}")
        per_diff = d["diff_bytes"] / d["diff_pulls"]
        assert per_diff <= DIFF_SHARE * full_bytes, (
            f"expected {node}'s diffs to be at most {DIFF_SHARE:.0%} of the full snapshot ({full_bytes} bytes); "
            f"they averaged {per_diff:.0f} bytes over {d['diff_pulls']:g} pulls")
