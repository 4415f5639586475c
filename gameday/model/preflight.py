"""The checks a drill passes before anything is injected, and the plan a dry run prints.

Pure: no I/O, no clocks, no target. :class:`gameday.drill.Drill` calls these at the top
of ``fault()`` and turns a refusal into :class:`~gameday.errors.DrillRefused` before the
observer starts, the ledger is written or the target is touched. Each check returns the
arithmetic that passed, so a dry run can show why the drill would be allowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gameday.errors import ConfigError, DrillRefused
from gameday.model.parts import RegionInfo
from gameday.model.topology import Timing
from gameday.runtime.settings import SLO


@dataclass(frozen=True)
class HealthChecks:
    """How a federation's health checks detect a failed gateway, where it states all three."""

    fall: int
    probe_interval: float
    probe_timeout: float

    @property
    def detection(self) -> float:
        """Seconds until a failed gateway is noticed at the latest: ``fall`` probes one
        ``probe_interval`` apart, the last one waiting ``probe_timeout``."""
        return self.fall * self.probe_interval + self.probe_timeout

    @classmethod
    def stated(cls, fall: int | None, probe_interval: float | None,
               probe_timeout: float | None) -> HealthChecks | None:
        """The checks from stated values; None where any is unstated (detection unknown)."""
        if fall is None or probe_interval is None or probe_timeout is None:
            return None
        return cls(fall, probe_interval, probe_timeout)


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


def check_clients_can_move(timing: HealthChecks | None, dns_ttl: float, switchover_limit: float, *,
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


def check_verdict_timings(timing: Timing | None, slo: SLO, *, offered: float, where: str) -> None:
    """The topology's timings that feed a verdict must leave it able to fail.

    * ``stale_after`` below the switchover limit: a proxy lagging the broadcast for the
      whole limit has already failed the switchover; an alarm that comes only later lies
      outside the drill, so "no stale-snapshot alarms" could not fail.
    * The recovery window must hold enough requests to tell an error ratio: at least
      ``1 / error_ratio`` at the offered load (one failed request is then resolvable at the
      SLO). A shorter one passes on a window of a few lucky successes while errors go on.

    Checked elsewhere: detection + DNS TTL against the switchover limit (:func:`check_clients_can_move`,
    per drill), ``heartbeat_interval`` < ``region_timeout`` and ``stale_after`` >
    ``heartbeat_interval`` (the topology model), the TTL's cap (:data:`gameday.model.topology.MAX_DNS_TTL`).

    Args:
        timing: the timings of a federation gameday runs; None for a profile's federation,
            whose stale detection is its own (only the recovery window is checked).
        where: the topology or profile file, for messages.
        offered: the session's offered load, requests/s.

    Raises:
        ConfigError: naming the file, the field, the value and the limit it serves.
    """
    if timing is not None and timing.stale_after >= slo.switchover_limit:
        raise ConfigError(
            f"{where}: timing.stale_after: got {timing.stale_after:g} s, expected less than the switchover limit "
            f"{slo.switchover_limit:g} s (--gameday-switchover-limit): a proxy lagging the broadcast that long has "
            "already failed the switchover, and its stale-snapshot alarm would come after the drill, so 'no "
            "stale-snapshot alarms' could never fail; lower timing.stale_after (it must stay above "
            f"heartbeat_interval, {timing.heartbeat_interval:g} s)", source=where, field="timing.stale_after")
    if slo.error_ratio > 0 and offered * slo.recovery_window * slo.error_ratio < 1:
        need = 1 / (offered * slo.error_ratio)
        raise ConfigError(
            f"--gameday-recovery-window: got {slo.recovery_window:g} s, expected at least {need:.3g} s at "
            f"{offered:g} req/s offered ({where}, load.rate, or --gameday-rate) and an error-ratio SLO of "
            f"{slo.error_ratio:g}: a window must hold 1 / {slo.error_ratio:g} = {1 / slo.error_ratio:g} requests "
            f"for one failed request to count at that ratio; {offered * slo.recovery_window:.3g} would let a "
            "window of a few lucky successes pass while clients still fail", field="recovery-window")


def dry_run_plan(*, action: str, seed: int, round_index: int, checks: Sequence[str], nodes: Sequence[str],
                 regions: Sequence[str], baseline: float, ledger: str, inject: str, revert: str,
                 restore_timeout: float, control_plane: bool = True, prediction: Sequence[str] = ()) -> list[str]:
    """The lines a dry run prints: what passed, the prediction (DESIGN.md §8; its lines as
    :meth:`gameday.verdicts.predict.Prediction.lines` gives them), then the drill's phases in order.

    A part the federation does not declare (no entry nodes, no control plane: a profile may
    leave them out) is said to be absent, with what stands in for it, never "answers"."""
    everywhere = ", ".join(regions)
    routes = (f"{', '.join(nodes)} route to {everywhere}" if nodes else
              f"no entry nodes declared: the GSLB answers {everywhere}")
    cp = "the control plane answers" if control_plane else "no control plane declared (versions are n/a)"
    back = (f"every entry node routes to {everywhere} again" if nodes else
            f"the GSLB answers {everywhere} again (no entry nodes declared)")
    return [
        f"dry run of {action} (seed {seed}, round {round_index + 1}): nothing was injected",
        *(f"  passed: {c}" for c in checks),
        "  passed: the federation is healthy",
        *(f"  {line}" for line in prediction),
        f"  1. steady state for {baseline:g} s: {routes}; {cp}",
        f"  2. record the fault in the ledger {ledger}",
        f"  3. inject {action}: {inject}",
        "  4. observe (the test's with-block)",
        f"  5. revert (the exact inverse): {revert}; remove the ledger entry",
        f"  6. wait up to {restore_timeout:g} s until {back}",
    ]
