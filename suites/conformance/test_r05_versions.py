"""R5: the global version increases monotonically, everywhere, and every entry node reports
the version it routes by.

Observed at 10 Hz across a routing change (a region out and back) and a restart of the
control plane: the control plane's version and every entry node's version never step
back - a control plane that loses its state on restart would restart from 0 - and at
the end every entry node answers requests with the version its /status reports, the
control plane's.
"""

from __future__ import annotations

import pytest

from gameday.conformance.versions import highest, regressions


@pytest.mark.conformance("R5", "versions are monotonic everywhere, across a change and a control-plane restart")
def test_r5_versions_monotonic_across_a_change_and_a_restart(drill, view, timing, converge_s, settled):
    region = drill.pick_region()
    others = [r for r in view.names if r != region]
    with drill.fault("gateway_unready", region) as change:
        view.wait_converged(converge_s, regions=others)
    with drill.fault("control_plane_down") as restart:
        # Down long enough for every node to have heard the last broadcast before it.
        drill.observe(restart, max(1.0, 2 * timing.heartbeat_interval))
    v_end = view.wait_converged(converge_s)
    t_ref = change.window.t_fault
    problems = []
    for res in (change.result, restart.result):
        problems += regressions(res.timeline.copy(), t_ref)
    assert not problems, "expected versions never to step back; " + "; ".join(problems[:6])
    before_restart = highest(change.result.timeline.copy())
    assert change.result.versions().passed, f"expected the change to move the version: {change.result.versions()}"
    peak = max(before_restart.values())
    assert v_end >= peak, (f"expected the control plane to continue from v{peak} (reached before its restart); "
                           f"after it every entry node converged on v{v_end}")
    for node, url in view.entry_urls().items():
        status = view.get_json(view.entry_node(node))
        reply = view.request_served(url)  # up to 3 tries: one can spend its budget on a busy machine
        assert (reply.status, reply.route_version, status.get("version")) == (200, v_end, v_end), (
            f"expected {node} to route by the version it reports (v{status.get('version')}) and the control "
            f"plane's (v{v_end}); a request through it: {reply}")
