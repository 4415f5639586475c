"""Capacity headroom (R9) and stale-snapshot alarm checks (R6)."""

from __future__ import annotations

from collections.abc import Mapping

from gameday.timeline import AlarmObs, RequestRec, UtilObs
from gameday.verdicts.measure import Check


def static_headroom(capacity: Mapping[str, float], offered: float, margin: float,
                    without: tuple[str, ...] = ()) -> Check:
    """Before the drill: for every region r, capacity(all but r) >= offered x (1 + margin).

    *without* names regions already out (N-2 planning): they count as lost too.
    """
    need = offered * (1 + margin)
    problems = []
    for r in capacity:
        if r in without:
            continue
        rest = sum(c for name, c in capacity.items() if name != r and name not in without)
        if rest < need:
            lost = ", ".join((*without, r))
            problems.append(
                f"without {lost} the others have {rest:g} req/s for {offered:g} req/s x (1 + {margin:g}) "
                f"= {need:g} req/s"
            )
    detail = "; ".join(problems) if problems else (
        f"every N-{len(without) + 1} set keeps >= {need:g} req/s (offered {offered:g} x (1 + {margin:g}))")
    return Check("static_headroom", not problems, detail)


def dynamic_headroom(util: list[UtilObs], requests: list[RequestRec], survivors: tuple[str, ...], *,
                     start: float, end: float, utilisation_limit: float, overload_ratio: float,
                     unobservable: tuple[str, ...] = ()) -> Check:
    """During the drill: no surviving region above the utilisation limit, and overload
    responses (503/429) within the SLO ratio.

    *unobservable*: survivors the target has no utilisation source for. Their utilisation is
    not applicable (said in the detail), not a failure and not a pass; the overload ratio,
    measured by the clients, still counts for them."""
    problems = []
    na = [r for r in survivors if r in unobservable]
    survivors = tuple(r for r in survivors if r not in unobservable)
    for region in survivors:
        obs = [u for u in util if u.region == region and start <= u.t <= end]
        if not obs:
            problems.append(f"no utilisation observed for region {region}")
            continue
        peak = max(obs, key=lambda u: u.utilisation)
        if peak.utilisation > utilisation_limit:
            problems.append(f"region {region} at {peak.utilisation:.0%} utilisation at t{peak.t - start:+.1f} s "
                            f"(limit {utilisation_limit:.0%})")
    reqs = [r for r in requests if start <= r.t <= end]
    over = sum(r.overload for r in reqs)
    ratio = over / len(reqs) if reqs else 0.0
    if ratio > overload_ratio:
        problems.append(f"{over} of {len(reqs)} requests ({ratio:.2%}) were rejected as overloaded "
                        f"(503/429), SLO {overload_ratio:.2%}")
    peaks = {r: max((u.utilisation for u in util if u.region == r and start <= u.t <= end), default=0.0)
             for r in survivors}
    unseen = f"utilisation n/a for {', '.join(na)}: no utilisation source" if na else ""
    if problems:
        detail = "; ".join([*problems, unseen] if unseen else problems)
    else:
        shown = ("peak utilisation " + ", ".join(f"{r} {p:.0%}" for r, p in peaks.items())) if peaks else ""
        detail = "; ".join(p for p in (shown, unseen, f"overload {ratio:.2%}") if p)
    return Check("dynamic_headroom", not problems, detail)


def stale_alarms(alarms: list[AlarmObs], start: float, end: float, role_prefix: str = "proxy") -> list[AlarmObs]:
    """Stale-snapshot alarm events raised by nodes named ``<role_prefix>-*`` in [start, end]."""
    return [a for a in alarms if a.event == "stale_snapshot" and a.node.startswith(role_prefix)
            and start <= a.t <= end]
