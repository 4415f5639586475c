"""Capacity headroom (R9) and stale-snapshot alarm checks (R6)."""

from __future__ import annotations

from collections.abc import Mapping

from gameday.model.timeline import AlarmObs, RequestRec, UtilObs
from gameday.verdicts.measure import Check
from gameday.verdicts.ratios import bad_ratio_above
from gameday.verdicts.stats import FALSE_FAILURE, one_per_second, probability, sign_test, sign_test_min_samples


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
                     unobservable: tuple[str, ...] = (), steady_from: float | None = None) -> Check:
    """During the drill: no surviving region above the utilisation limit, and overload
    responses (503/429) within the SLO ratio; both decided on their counts with a
    false-failure probability of at most :data:`~gameday.verdicts.stats.FALSE_FAILURE`
    (:mod:`gameday.verdicts.stats`).

    Utilisation: a sign test over the region's one-second samples (at least 1 s apart) from
    *steady_from* (when the clients had moved: client recovery; default *start*) to *end*:
    above the limit in ``k`` of ``n`` seconds fails when ``P(Binomial(n, 1/2) >= k) <= FALSE_FAILURE``
    (10 of 10, 15 of 16, ...). A 1 s burst is one sample; a region overloaded for real is above
    in nearly every second. With too few samples to decide, the detail says so.

    Overload: ``k`` rejected of ``n`` requests fails when ``P(Binomial(n, overload_ratio) >= k)
    <= FALSE_FAILURE``.

    *unobservable*: survivors the target has no utilisation source for. Their utilisation is
    not applicable (said in the detail), not a failure and not a pass; the overload ratio,
    measured by the clients, still counts for them."""
    problems = []
    notes = []
    na = [r for r in survivors if r in unobservable]
    survivors = tuple(r for r in survivors if r not in unobservable)
    steady = start if steady_from is None else max(start, min(steady_from, end))
    need = sign_test_min_samples()
    for region in survivors:
        obs = sorted((u for u in util if u.region == region and start <= u.t <= end), key=lambda u: u.t)
        if not obs:
            problems.append(f"no utilisation observed for region {region}")
            continue
        late = [u for u in obs if u.t >= steady]
        samples = [late[i] for i in one_per_second([u.t for u in late])]
        above = [u for u in samples if u.utilisation > utilisation_limit]
        if not above:
            continue
        tail = sign_test(len(above), len(samples))
        peak = max(above, key=lambda u: u.utilisation)
        seen = (f"region {region} above {utilisation_limit:.0%} in {len(above)} of {len(samples)} one-second "
                f"samples from t{steady - start:+.1f} s (peak {peak.utilisation:.0%} at t{peak.t - start:+.1f} s)")
        if tail <= FALSE_FAILURE:
            problems.append(f"{seen}: overloaded, P(Binomial({len(samples)}, 1/2) >= {len(above)}) = "
                            f"{probability(tail)} <= {FALSE_FAILURE:g} (false-failure probability)")
        elif len(samples) < need:
            notes.append(f"{seen}: too few samples to decide ({need} needed at false-failure probability "
                         f"{FALSE_FAILURE:g})")
        else:
            notes.append(f"{seen}: not sustained, P = {probability(tail)} > {FALSE_FAILURE:g}")
    reqs = [r for r in requests if start <= r.t <= end]
    test = bad_ratio_above(reqs, _overload, overload_ratio)
    ratio = test.ratio
    if test.shown:
        problems.append(f"{test.bad} of {test.n} requests ({ratio:.2%}) were rejected as overloaded "
                        f"(503/429), SLO {overload_ratio:.2%}: {test.bound} <= {FALSE_FAILURE:g} "
                        "(false-failure probability)")
    peaks = {r: max((u.utilisation for u in util if u.region == r and start <= u.t <= end), default=0.0)
             for r in survivors}
    unseen = f"utilisation n/a for {', '.join(na)}: no utilisation source" if na else ""
    if problems:
        detail = "; ".join([*problems, unseen] if unseen else problems)
    else:
        shown_peaks = ("peak utilisation " + ", ".join(f"{r} {p:.0%}" for r, p in peaks.items())) if peaks else ""
        overload = f"overload {ratio:.2%}" + ("" if ratio <= overload_ratio else
                                               f" (not shown above {overload_ratio:.2%}: {test.bound})")
        detail = "; ".join(p for p in (shown_peaks, *notes, unseen, overload) if p)
    return Check("dynamic_headroom", not problems, detail)


def _overload(r: RequestRec) -> bool:
    return r.overload


def stale_alarms(alarms: list[AlarmObs], start: float, end: float, role_prefix: str = "proxy") -> list[AlarmObs]:
    """Stale-snapshot alarm events raised by nodes named ``<role_prefix>-*`` in [start, end]."""
    return [a for a in alarms if a.event == "stale_snapshot" and a.node.startswith(role_prefix)
            and start <= a.t <= end]
