"""Version monotonicity over a drill's timeline (R5)."""

from __future__ import annotations

from gameday.model.timeline import Timeline


def regressions(tl: Timeline, t_ref: float) -> list[str]:
    """Every step back of a version on *tl*: the control plane's polled and broadcast
    sequences (each on its own), and every entry node's reported version. A node
    reporting version 0 after a higher one counts too (it lost its snapshot).

    A control plane reporting version 0 is skipped: a restarted control plane answers
    ``/status`` with 0 ("no snapshot loaded yet") for a moment before its stored state is
    loaded, and routes nobody by it. One that comes back with a lower version after that
    (state lost on restart) is a regression.

    Times in the lines are relative to *t_ref* (e.g. the first fault).
    """
    out: list[str] = []
    cp = sorted((c for c in tl.cp if c.version is not None), key=lambda c: c.t)
    for source in sorted({c.source for c in cp}):
        last: int | None = None
        for c in cp:
            if c.source != source or not c.version:
                continue
            if last is not None and c.version < last:
                out.append(f"control plane ({source}) went back from v{last} to v{c.version} "
                           f"at t{c.t - t_ref:+.2f} s")
            last = c.version if last is None else max(last, c.version)
    seen: dict[str, tuple[int, float]] = {}
    for o in sorted(tl.nodes, key=lambda o: o.t):
        if not o.ok or o.version is None:
            continue
        prev = seen.get(o.node)
        if prev is not None and o.version < prev[0]:
            out.append(f"{o.node} went back from v{prev[0]} (t{prev[1] - t_ref:+.2f} s) to v{o.version} "
                       f"at t{o.t - t_ref:+.2f} s")
        if prev is None or o.version >= prev[0]:
            seen[o.node] = (o.version, o.t)
    return out


def highest(tl: Timeline) -> dict[str, int]:
    """The highest version each source reached on *tl* (``controlplane`` and each node)."""
    out: dict[str, int] = {}
    for c in tl.cp:
        if c.version is not None:
            out["controlplane"] = max(out.get("controlplane", 0), c.version)
    for o in tl.nodes:
        if o.ok and o.version is not None:
            out[o.node] = max(out.get(o.node, 0), o.version)
    return out
