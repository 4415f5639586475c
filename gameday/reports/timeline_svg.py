"""A drill's timeline as a self-contained SVG (no plotting library needed).

Lanes, top to bottom: the control-plane version; one lane per entry node showing
whether it still routes to the failed region (red) or not (green) with its version;
the share of GSLB answers naming the failed region; the client error ratio per
0.5 s; phase marks (fault, revert, restored) as vertical lines across all lanes.
"""

from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gameday.verdicts.result import DrillResult

W, LEFT, RIGHT, LANE, TOP = 980, 150, 20, 22, 50


def render_timeline_svg(res: DrillResult) -> str:
    tl = res.timeline.copy()
    w = res.fault
    t0 = tl.t0
    # the latest sample of any lane (the last node bar is 0.1 s wide), not just the last list entry
    t_end = max([w.t_restored or 0.0, w.t_revert or 0.0, *(o.t + 0.1 for o in tl.nodes),
                 *(d.t + 0.1 for d in tl.dns), t0 + 1.0])
    span = max(t_end - t0, 1e-3)
    plot_w = W - LEFT - RIGHT

    def x(t: float) -> float:
        return LEFT + (min(max(t, t0), t_end) - t0) / span * plot_w

    failed = w.region
    nodes = sorted({o.node for o in tl.nodes})
    lanes = ["control plane", *nodes, "DNS answers", "client errors"]
    height = TOP + LANE * len(lanes) + 52
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{height}" fill="#fff"/>',
        f'<text x="10" y="18" font-size="13" font-weight="bold">{escape(w.kind)} '
        f'{escape(failed or "")} - seed {res.seed}, round {res.round + 1}</text>',
    ]
    for i, name in enumerate(lanes):
        y = TOP + i * LANE
        out.append(f'<text x="10" y="{y + 15}">{escape(name)}</text>')
        out.append(f'<rect x="{LEFT}" y="{y + 2}" width="{plot_w}" height="{LANE - 4}" fill="#f4f4f4"/>')
    # control-plane version steps
    y = TOP
    last_v = None
    label_end = -1.0  # right edge of the last version label; closer ones are skipped, not overprinted
    for c in sorted(tl.cp, key=lambda c: c.t):
        if c.version is not None and c.version != last_v and c.source == "poll":
            out.append(f'<line x1="{x(c.t):.1f}" y1="{y + 2}" x2="{x(c.t):.1f}" y2="{y + LANE - 2}" stroke="#333">'
                       f'<title>v{c.version} at t{c.t - w.t_fault:+.1f}s</title></line>')
            if x(c.t) + 2 >= label_end:
                out.append(f'<text x="{x(c.t) + 2:.1f}" y="{y + 14}" font-size="10">v{c.version}</text>')
                label_end = x(c.t) + 2 + 7 * (len(str(c.version)) + 1)
            last_v = c.version
    # entry nodes
    for i, node in enumerate(nodes, start=1):
        y = TOP + i * LANE
        obs = [o for o in tl.nodes if o.node == node]
        t_back = w.t_revert if w.t_revert is not None else t_end
        for a, b in zip(obs, [*obs[1:], None], strict=True):
            t_next = b.t if b is not None else a.t + 0.1
            in_fault = w.t_fault <= a.t < t_back
            if not a.ok:
                color = "#999"
            elif failed is not None and failed in (a.routable or ()):
                color = "#d9534f" if in_fault else "#8fb3de"  # should have switched / normal
            elif failed is None and a.stale:
                color = "#f0ad4e"
            else:
                color = "#5cb85c" if in_fault or failed is None else "#f0ad4e"
            out.append(f'<rect x="{x(a.t):.1f}" y="{y + 4}" width="{max(x(t_next) - x(a.t), 0.5):.1f}" '
                       f'height="{LANE - 8}" fill="{color}"/>')
    # DNS share of the failed region
    y = TOP + (len(nodes) + 1) * LANE
    t_back_dns = w.t_revert if w.t_revert is not None else t_end
    for d in tl.dns:
        if failed is not None and d.ok and failed in d.regions:
            color = "#d9534f" if w.t_fault <= d.t < t_back_dns else "#8fb3de"
            out.append(f'<rect x="{x(d.t):.1f}" y="{y + 4}" width="1.5" height="{LANE - 8}" fill="{color}"/>')
    # client error ratio per 0.5 s bucket
    y = TOP + (len(nodes) + 2) * LANE
    buckets: dict[int, list[bool]] = {}
    for r in tl.requests:
        if r.t >= t0:
            buckets.setdefault(int((r.t - t0) / 0.5), []).append(r.failed)
    peak = (0.0, t0)
    for k, fails in buckets.items():
        ratio = sum(fails) / len(fails)
        h = (LANE - 6) * ratio
        x0 = x(t0 + k * 0.5)
        bar_w = min(x(t0 + 0.5) - x(t0) - 0.5, LEFT + plot_w - x0)
        if bar_w <= 0:
            continue
        out.append(f'<rect x="{x0:.1f}" y="{y + LANE - 3 - h:.1f}" '
                   f'width="{max(bar_w, 0.5):.1f}" height="{h:.1f}" fill="#d9534f"/>')
        peak = max(peak, (ratio, t0 + k * 0.5))
    if peak[0] > 0:
        out.append(f'<text x="{W - RIGHT - 2}" y="{y + 14}" font-size="10" fill="#d9534f" text-anchor="end">'
                   f'peak {peak[0]:.0%} at t{peak[1] - w.t_fault:+.1f}s</text>')
    # phase marks
    bottom = TOP + LANE * len(lanes)
    shown = [m for m in tl.marks if m.label in ("fault", "revert", "restored", "stop_condition")]
    for i, m in enumerate(shown):
        if True:  # labels alternate between two rows so neighbouring marks stay readable
            label_y = TOP - 8 - (i % 2) * 12
            color = {"fault": "#d9534f", "revert": "#0275d8", "restored": "#5cb85c"}.get(m.label, "#f0ad4e")
            out.append(f'<line x1="{x(m.t):.1f}" y1="{TOP - 6}" x2="{x(m.t):.1f}" y2="{bottom}" '
                       f'stroke="{color}" stroke-dasharray="4,3"/>')
            anchor = "end" if x(m.t) > W - 160 else "start"
            dx = -3 if anchor == "end" else 3
            out.append(f'<text x="{x(m.t) + dx:.1f}" y="{label_y}" fill="{color}" text-anchor="{anchor}">'
                       f'{escape(m.label)} t{m.t - w.t_fault:+.1f}s</text>')
    for alarm in tl.alarms:
        if alarm.event == "stale_snapshot":
            out.append(f'<circle cx="{x(alarm.t):.1f}" cy="{bottom + 8}" r="4" fill="#f0ad4e">'
                       f'<title>{escape(alarm.node)} stale snapshot</title></circle>')
    # time axis
    # seconds relative to the fault, like the phase marks and the verdict details (t+0.6 s)
    step = 10 if span > 60 else 5 if span > 15 else 1
    for k in range(math.ceil((t0 - w.t_fault) / step) * step, math.floor(t_end - w.t_fault) + 1, step):
        tx = x(w.t_fault + k)
        out.append(f'<line x1="{tx:.1f}" y1="{bottom}" x2="{tx:.1f}" y2="{bottom + 4}" stroke="#999"/>')
        out.append(f'<text x="{tx:.1f}" y="{bottom + 24}" font-size="10" text-anchor="middle">t{k:+d}s</text>')
    out.append(f'<text x="{LEFT}" y="{height - 14}" font-size="10" fill="#555">blue: routes to / answers with '
               f'{escape(failed or "-")} (normal); red: still does during the fault; green: excludes it</text>')
    out.append(f'<text x="{LEFT}" y="{height - 3}" font-size="10" fill="#555">grey: no answer; orange: stale, '
               'or excluded outside the fault; orange dot: stale-snapshot alarm; client errors: ratio per 0.5 s'
               '</text>')
    out.append("</svg>")
    return "\n".join(out)
