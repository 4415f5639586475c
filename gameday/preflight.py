"""The checks a drill passes before anything is injected, and the plan a dry run prints.

Pure: no I/O, no clocks, no target. :class:`gameday.drill.Drill` calls these at the top
of ``fault()`` and turns a refusal into :class:`~gameday.errors.DrillRefused` before the
observer starts, the ledger is written or the target is touched. Each check returns the
arithmetic that passed, so a dry run can show why the drill would be allowed.
"""

from __future__ import annotations

from collections.abc import Sequence

from gameday.errors import DrillRefused
from gameday.interfaces import RegionInfo
from gameday.topology import Timing


def check_capacity(regions: Sequence[RegionInfo], out: Sequence[str], *, offered: float, margin: float,
                   action: str | None = None) -> str:
    """The regions outside *out* must carry *offered* req/s x (1 + *margin*) (R9, N-1 and beyond).

    Returns:
        The arithmetic, e.g. ``capacity with a out: b, c would have 80 + 80 = 160 req/s for ...``.

    Raises:
        DrillRefused: with the same arithmetic and "nothing was injected".
    """
    rest = [r for r in regions if r.name not in out]
    need = offered * (1 + margin)
    have = sum(r.capacity for r in rest if r.capacity is not None)
    unknown = [r.name for r in rest if r.capacity is None]
    arithmetic = (f"{', '.join(r.name for r in rest) or 'no region'} would have "
                  + (" + ".join("unknown" if r.capacity is None else f"{r.capacity:g}" for r in rest) or "0")
                  + f" = {have:g}{'+' if unknown else ''} req/s for "
                  f"{offered:g} req/s x (1 + {margin:g}) = {need:g} req/s")
    if unknown and have < need:
        # Unknown is not zero: refusing would be a guess, and so would passing.
        return (f"capacity with {', '.join(out)} out: not checked, capacity of {', '.join(unknown)} unknown "
                f"({arithmetic}); the headroom verdict is not applicable")
    if have < need:
        raise DrillRefused(f"refusing {action or 'the drill'}: with {', '.join(out)} out, {arithmetic}; "
                           "nothing was injected")
    return f"capacity with {', '.join(out)} out: {arithmetic}"


def check_clients_can_move(timing: Timing | None, dns_ttl: float, switchover_limit: float, *,
                           action: str | None = None) -> str:
    """Detection plus the DNS TTL must fit the switchover limit.

    Clients honour the TTL, so none can leave a failed region before the failure is
    detected (``fall`` probes, the last one waiting ``probe_timeout``) and their cached
    answer expires. The topology caps the TTL; the limit can be lowered per run, so the
    sum is checked against the configured limit. *timing* ``None``: detection unknown (0).

    Raises:
        DrillRefused: with the arithmetic and what to change.
    """
    detection = timing.detection if timing is not None else 0.0
    how = (f"detection {timing.fall} x {timing.probe_interval:g} s + {timing.probe_timeout:g} s probe timeout "
           f"= {detection:g} s" if timing is not None
           else "detection time unknown (no health-check timing given; counted as 0 s)")
    need = detection + dns_ttl
    arithmetic = f"{how} + DNS TTL {dns_ttl:g} s = {need:g} s"
    if need > switchover_limit:
        raise DrillRefused(
            f"refusing {action or 'the drill'}: clients honour the DNS TTL, so they cannot all have moved before "
            f"{arithmetic}, above the switchover limit {switchover_limit:g} s (--gameday-switchover-limit); lower "
            "timing.dns_ttl or raise the limit; nothing was injected")
    return f"clients can move within the switchover limit: {arithmetic} <= {switchover_limit:g} s"


def dry_run_plan(*, action: str, seed: int, round_index: int, checks: Sequence[str], nodes: Sequence[str],
                 regions: Sequence[str], baseline: float, ledger: str, inject: str, revert: str,
                 restore_timeout: float, prediction: Sequence[str] = ()) -> list[str]:
    """The lines a dry run prints: what passed, the prediction (DESIGN.md §8; its lines as
    :meth:`gameday.verdicts.predict.Prediction.lines` gives them), then the drill's phases in order."""
    everywhere = ", ".join(regions)
    return [
        f"dry run of {action} (seed {seed}, round {round_index + 1}): nothing was injected",
        *(f"  passed: {c}" for c in checks),
        "  passed: the federation is healthy",
        *(f"  {line}" for line in prediction),
        f"  1. steady state for {baseline:g} s: {', '.join(nodes)} route to {everywhere}; the control plane answers",
        f"  2. record the fault in the ledger {ledger}",
        f"  3. inject {action}: {inject}",
        "  4. observe (the test's with-block)",
        f"  5. revert (the exact inverse): {revert}; remove the ledger entry",
        f"  6. wait up to {restore_timeout:g} s until every entry node routes to {everywhere} again",
    ]
