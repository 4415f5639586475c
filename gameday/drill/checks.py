"""The checks a drill makes before anything is touched, and its dry run.

- :meth:`DrillChecks.capacity`: the regions left carry the offered load with the margin
  (N-1, N-2, ...);
- :meth:`DrillChecks.timing`: the stated timing lets clients move within the switchover limit;
- :meth:`DrillChecks.prediction`: the windows the federation's own timing predicts (DESIGN.md
  §8), and the refusal of a stated TTL the federation contradicts;
- :meth:`DrillChecks.dry_run`: the plan printed, the test skipped, nothing injected.

Each refuses with :class:`~gameday.errors.DrillRefused`, whose message holds the arithmetic.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from typing import Any

import pytest

from gameday.drill.context import DrillContext
from gameday.errors import DrillRefused
from gameday.faults import Fault
from gameday.interfaces import FaultPlanner, RecordsCalls, StatesTiming
from gameday.model import preflight
from gameday.observers.sources import Sources
from gameday.verdicts.predict import Prediction, predict, unpredicted

log = logging.getLogger(__name__)


class DrillChecks:
    """One drill's checks before it injects (see the module)."""

    def __init__(self, ctx: DrillContext) -> None:
        self.ctx = ctx

    def capacity(self, *out: str, action: str | None = None) -> str:
        """Refuse a drill that takes the regions *out* away when the rest could not carry the
        offered load with the margin; the arithmetic that passed, for the dry-run plan.

        Raises:
            DrillRefused: with the capacity arithmetic in the message.
        """
        c = self.ctx
        return preflight.check_capacity(c.regions, out, offered=c.offered, margin=c.margin, action=action)

    def timing(self, action: str | None = None) -> str:
        """Refuse a drill whose clients could not have moved within the switchover limit
        (detection + DNS TTL > ``--gameday-switchover-limit``); see :mod:`gameday.model.preflight`.

        Raises:
            DrillRefused: with the arithmetic and what to change.
        """
        # Detection as the target states it (StatesTiming): an external target only where its
        # profile states all of fall, probe_interval and probe_timeout; else unknown (0 s).
        target = self.ctx.target
        checks = None
        if isinstance(target, StatesTiming):
            st = target.stated_timing()
            checks = preflight.HealthChecks.stated(st.fall, st.probe_interval, st.probe_timeout)
        return preflight.check_clients_can_move(checks, self.ctx.dns_ttl, self.ctx.slo.switchover_limit,
                                                action=action)

    def prediction(self, fault: Fault, action: str, *, entry_nodes_route: bool) -> Prediction:
        """The windows the federation's own timing predicts for *fault* (DESIGN.md §8).

        Asked after the target's health check (an external target reads the DNS server's TTL
        there) and before anything is injected.

        Raises:
            DrillRefused: the federation contradicts its stated timing (the TTL in its answers)
                and ``--gameday-accept-observed-ttl`` is not set; nothing was injected.
        """
        target, settings = self.ctx.target, self.ctx.settings
        if not isinstance(target, StatesTiming):
            return unpredicted(fault.name, f"the {target.name} target states no failover timing")
        contradiction = target.timing_contradiction()
        if contradiction is not None and not settings.accept_observed_ttl:
            raise DrillRefused(f"refusing {action}: {contradiction}. Correct the stated value, or drill with "
                               "--gameday-accept-observed-ttl (ini gameday_accept_observed_ttl, env "
                               "GAMEDAY_ACCEPT_OBSERVED_TTL) to judge with the observed one; nothing was injected")
        timing = target.stated_timing(prefer_observed_ttl=settings.accept_observed_ttl)
        if self.ctx.load is not None:
            timing = replace(timing, request=self.ctx.load.timeout)
        out = predict(timing, fault.name, fault.gateway_check_fails, entry_nodes_route=entry_nodes_route)
        if contradiction is not None:
            log.warning("%s; judging with the observed TTL (--gameday-accept-observed-ttl)", contradiction)
        return out

    def dry_run(self, kind: str, region: str | None, params: dict[str, Any], *, checks: list[str],
                lost: tuple[str, ...], baseline: float, restore_timeout: float) -> None:
        """Print the drill's plan and skip the test: nothing is injected, nothing recorded.

        Raises:
            pytest.skip.Exception: always, with the plan as the reason.
            DrillRefused: the target cannot plan without acting (it would inject for real).
        """
        c = self.ctx
        target = c.target
        action = f"{kind} {region or ''}".strip()
        if isinstance(target, FaultPlanner):
            inject, revert = target.plan_fault(kind, region, params)
        elif isinstance(target, RecordsCalls) and target.dry_run:
            # kind/kube in dry-run print and record every API call and make none.
            target.inject(kind, region, dict(params))
            target.revert(kind, region, dict(params))
            inject = revert = "the API calls printed above as 'gameday dry-run: ...'"
        else:
            raise DrillRefused(f"refusing {action}: --gameday-dry-run, but the {target.name} target cannot "
                               "plan a fault without injecting it; nothing was injected")
        target.check_health(timeout=15)  # read-only: a dry run says whether the drill could start
        # What the drill would observe: its sources, made but never read (nothing is polled).
        sources = target.sources()
        # The same prediction (and the same refusal of a contradicted TTL) as the drill's.
        prediction = self.prediction(c.faults[kind], action, entry_nodes_route=entry_nodes_route(sources)).lines() \
            if region is not None and region in lost else []
        plan = preflight.dry_run_plan(
            action=action, seed=c.settings.seed, round_index=c.round, checks=checks,
            nodes=sorted(n.name for n in sources.entry_nodes if n.region not in lost), regions=c.region_names,
            baseline=baseline, ledger=str(c.ledger.path), inject=inject, revert=revert,
            restore_timeout=restore_timeout, control_plane=sources.control_plane is not None, prediction=prediction)
        for line in plan:
            log.info("%s", line)
            print(f"gameday dry-run: {line}", file=sys.stderr)
        # Reported at the test's location, as a skip marker is, not at this line: the
        # user's test is what was skipped. (_use_item_location: pytest >= 6.2, what
        # pytest's own skip marks use.)
        raise pytest.skip.Exception("\n".join(plan), _use_item_location=True)


def entry_nodes_route(sources: Sources) -> bool:
    """Whether the prediction may count on the entry nodes' routes (any entry-node source that
    does not say it reads none): the drill and its dry run judge alike."""
    return any(getattr(n, "routable", "") is not None for n in sources.entry_nodes)
