"""R6: a proxy cut off from the broadcasts raises the stale-snapshot alarm (a structured log
line and a metric) once ``stale_after`` passes, while versions move on without it, and
clears it when it hears the broadcasts again and catches up. Nobody else alarms."""

from __future__ import annotations

import json
import time

import pytest

from gameday.conformance.capabilities import require
from gameday.conformance.wait import wait_until
from gameday.interfaces import HasAlarmLines, Reconcilable


def _alarm_events(lines):
    """``(monotonic time, node, event)`` of the stale-snapshot lines among *lines*."""
    out = []
    for node, line in lines:
        if '"stale_snapshot' not in line:
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if d.get("event") in ("stale_snapshot", "stale_snapshot_cleared"):
            out.append((float(d.get("mono", 0.0)), node, d["event"]))
    return out


@pytest.mark.conformance("R6", "a proxy cut off from broadcasts raises the stale alarm, and clears it after")
def test_r6_stale_alarm_fires_when_cut_off_and_clears_after(drill, view, federation, timing, converge_s,
                                                            settled):
    reconcilable = require(federation, Reconcilable, "R6 moves versions on with a full reconciliation pass")
    logs = require(federation, HasAlarmLines, "R6 reads the proxy's stale-snapshot log lines")
    region = drill.pick_region()
    node = f"proxy-{region}"
    status_url = view.entry_node(node)
    other = drill.pick_region()
    with drill.fault("proxy_cut_off", region) as cut:
        t_cut = cut.window.t_fault
        # Versions move on without the proxy: a slow-state change folded in by a full pass.
        with drill.fault("region_labels", other, labels={"gameday-r6": "moved-on"}):
            reconcilable.reconcile()
            v_moved = view.cp_version()
            st = wait_until(lambda: ((s := view.get_json(status_url)).get("stale") is True, s),
                            timing.stale_after + converge_s, f"{node} to report stale after being cut off "
                            f"for stale_after = {timing.stale_after:g} s")
            t_alarm = time.monotonic()
            metric = view.metrics(status_url).value("gameday_stale_snapshot", node=node)
            others_stale = {n: s.get("stale") for n, s in view.nodes().items() if s and s.get("stale") and n != node}
    # Silence counts from the last broadcast heard, up to a heartbeat period before the cut.
    earliest = timing.stale_after - 2 * timing.heartbeat_interval
    assert t_alarm - t_cut >= earliest, (
        f"expected {node}'s alarm no sooner than stale_after = {timing.stale_after:g} s after its last broadcast "
        f"(>= t+{earliest:g} s after the cut); it was stale at t+{t_alarm - t_cut:.1f} s")
    assert st.get("version", 0) < v_moved, (f"expected {node} to lag the control plane (v{v_moved}) while cut off; "
                                           f"it reported v{st.get('version')}")
    assert metric == 1, f"expected gameday_stale_snapshot{{node=\"{node}\"}} = 1 while stale; /metrics says {metric}"
    assert not others_stale, f"expected only {node} to be stale; also stale: {others_stale}"
    v_now = view.cp_version()
    wait_until(lambda: ((s := view.get_json(status_url)).get("stale") is False and s.get("version") >= v_now, s),
               converge_s, f"{node} to catch up with v{v_now} and clear the alarm once it hears broadcasts again")
    cleared_metric = view.metrics(status_url).value("gameday_stale_snapshot", node=node)
    assert cleared_metric == 0, (f"expected gameday_stale_snapshot{{node=\"{node}\"}} = 0 after catching up, "
                                 f"got {cleared_metric}")
    # The drill's observers collected the lines up to its end; the target has the rest.
    events = [(a.t, a.node, a.event) for a in cut.result.timeline.copy().alarms]
    events += _alarm_events(list(logs.alarm_lines()))
    mine = sorted((e for e in events if e[1] == node), key=lambda e: e[0])
    raised = [e for e in mine if e[2] == "stale_snapshot" and e[0] >= t_cut]
    assert raised, (f"expected a structured stale_snapshot log line from {node} after the cut (t+0 at "
                    f"{t_cut:.1f}); its alarm lines: {[(round(e[0] - t_cut, 1), e[2]) for e in mine]}")
    cleared = [e for e in mine if e[2] == "stale_snapshot_cleared" and e[0] > raised[0][0]]
    lines = [(round(e[0] - t_cut, 1), e[2]) for e in mine]
    assert cleared, (f"expected a stale_snapshot_cleared log line from {node} after its alarm at "
                     f"t+{raised[0][0] - t_cut:.1f} s; its alarm lines (t after the cut, event): {lines}")
    strangers = sorted({e[1] for e in events if e[1] != node and e[2] == "stale_snapshot" and e[0] >= t_cut})
    assert not strangers, f"expected only {node} to alarm; {strangers} raised stale-snapshot alarms too"
