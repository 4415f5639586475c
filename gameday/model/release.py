"""Region-by-region releases (R12): the order, its rule, and running it step by step.

The article's rule: update the standby region first, verify, then the next; the
designated primary goes last. :func:`plan_release` is that order as a pure function of
the topology: every region but the primary by ascending weight (the region carrying the
least traffic is the standby and goes first; ties by name), then the primary.
:func:`check_release_order` judges any plan - including one a kube target computes its
own way - against the rule, and :func:`run_release` executes a plan, verifying each
region before the next is touched and stopping at the first failed verification::

    plan = target.release_plan()
    assert not check_release_order(plan, target.regions(), primary)
    steps = run_release(plan, target.rollout_region, verify=my_health_check)
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gameday.model.parts import RegionInfo


def plan_release(regions: Sequence[RegionInfo], primary: str) -> list[str]:
    """The release order: non-primary regions by ascending weight (ties by name), primary last.

    Args:
        regions: the topology's regions (``target.regions()``).
        primary: the designated primary region (must be one of *regions*).

    Raises:
        ValueError: *primary* is not one of *regions*.
    """
    names = [r.name for r in regions]
    if primary not in names:
        raise ValueError(f"primary region {primary!r} is not in the topology ({', '.join(names)})")
    others = sorted((r for r in regions if r.name != primary), key=lambda r: (r.weight, r.name))
    return [r.name for r in others] + [primary]


def check_release_order(plan: Sequence[str], regions: Sequence[RegionInfo], primary: str) -> list[str]:
    """Everything wrong with *plan* under R12; an empty list means it follows the rule.

    The rule: every region exactly once; the primary last; before it, the other regions
    from the lowest weight up (a standby first), so that a bad release meets the least
    traffic first and the primary only after every other region verified it.
    """
    names = [r.name for r in regions]
    weight = {r.name: r.weight for r in regions}
    problems: list[str] = []
    missing = [n for n in names if n not in plan]
    unknown = [n for n in plan if n not in weight]
    twice = sorted({n for n in plan if list(plan).count(n) > 1})
    if missing:
        problems.append(f"regions never released: {missing}")
    if unknown:
        problems.append(f"regions not in the topology: {unknown}")
    if twice:
        problems.append(f"regions released more than once: {twice}")
    if problems:
        return problems
    if len(plan) > 1 and plan[-1] != primary:
        problems.append(f"the primary {primary!r} must be released last, plan ends with {plan[-1]!r} "
                        f"(position of {primary!r}: {list(plan).index(primary) + 1} of {len(plan)})")
    rest = [n for n in plan if n != primary]
    for a, b in itertools.pairwise(rest):
        if weight[b] < weight[a]:
            problems.append(f"{a!r} (weight {weight[a]:g}) is released before {b!r} (weight {weight[b]:g}): "
                            "lower-weight (standby) regions go first")
    return problems


@dataclass(frozen=True)
class ReleaseStep:
    """One region of a release, on the harness's monotonic clock (seconds)."""

    region: str
    started: float
    rolled: float
    """When the rollout of the region returned (its instances are ready again)."""
    verified: float
    """When the verification of the region passed (the next step starts after this)."""


def run_release(
    plan: Sequence[str],
    rollout: Callable[[str], None],
    verify: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
) -> list[ReleaseStep]:
    """Roll out *plan* region by region, verifying each region before the next.

    Args:
        plan: region names in release order.
        rollout: updates one region and returns when its instances are ready.
        verify: raises ``AssertionError`` (saying expected, seen, where) if the region or
            the federation is not healthy after the step.
        clock: the monotonic clock the steps are stamped with.

    Returns:
        The steps, in order.

    Raises:
        AssertionError: a verification failed; the release stopped there and the message
            names the step, the regions already released and those left untouched.
    """
    steps: list[ReleaseStep] = []
    for i, region in enumerate(plan):
        started = clock()
        rollout(region)
        rolled = clock()
        try:
            verify(region)
        except AssertionError as exc:
            done = [s.region for s in steps]
            raise AssertionError(
                f"release halted at step {i + 1}/{len(plan)} (region {region}): {exc}; released and "
                f"verified before it: {done or 'none'}; not touched: {list(plan[i + 1:]) or 'none'}"
            ) from exc
        steps.append(ReleaseStep(region, started, rolled, clock()))
    return steps


@dataclass(frozen=True)
class VersionSample:
    """One read of one app instance during a release: the version it served (None: it did not
    answer) and whether it was ready, at *t* (the harness's monotonic clock)."""

    t: float
    region: str
    instance: str
    version: str | None
    ready: bool


@dataclass(frozen=True)
class RegionRollout:
    """When a region's release began (an instance first unready or on the new version) and
    was done (every instance ready on the new version), as observed; None: never seen."""

    region: str
    began: float | None
    done: float | None


def observed_rollout(samples: Sequence[VersionSample], version: str) -> dict[str, RegionRollout]:
    """Each region's rollout of *version*, from the instances' reads only (grouped by *t*: one
    round of reads of every instance shares its time)."""
    rounds: dict[float, list[VersionSample]] = {}
    for s in samples:
        rounds.setdefault(s.t, []).append(s)
    began: dict[str, float] = {}
    done: dict[str, float] = {}
    for t in sorted(rounds):
        by_region: dict[str, list[VersionSample]] = {}
        for s in rounds[t]:
            by_region.setdefault(s.region, []).append(s)
        for region, reads in by_region.items():
            if region not in began and any(s.version == version or not s.ready for s in reads):
                began[region] = t
            if region not in done and all(s.version == version and s.ready for s in reads):
                done[region] = t
    regions = sorted({s.region for s in samples})
    return {r: RegionRollout(r, began.get(r), done.get(r)) for r in regions}


def judge_rollout(rollout: dict[str, RegionRollout], regions: Sequence[RegionInfo], primary: str) -> list[str]:
    """Everything wrong with an observed release under R12 (empty: it followed the rule):
    every region released; a lowest-weight (standby) region first and the primary last; no two
    regions mid-update at once: each region ready on the new version before the next began."""
    weight = {r.name: r.weight for r in regions}
    problems: list[str] = []
    unfinished = [r for r in weight if rollout.get(r) is None or rollout[r].done is None]
    if unfinished:
        problems.append(f"regions never seen serving the new version ready: {unfinished}")
    seen = sorted((ro for ro in rollout.values() if ro.began is not None), key=lambda ro: ro.began or 0.0)
    if not seen:
        return problems or ["no region was ever seen updating"]
    t0 = seen[0].began or 0.0
    order = ", ".join(f"{ro.region} t+{(ro.began or 0) - t0:.2f}-"
                      + ("?" if ro.done is None else f"{ro.done - t0:.2f}") + " s" for ro in seen)
    lightest = min(weight.values())
    if weight.get(seen[0].region) != lightest:
        problems.append(f"the first region updated was {seen[0].region} (weight {weight.get(seen[0].region)}), not a "
                        f"lowest-weight standby (weight {lightest:g}); observed: {order}")
    if len(weight) > 1 and seen[-1].region != primary:
        problems.append(f"the primary {primary} was not the last region updated; observed: {order}")
    for a, b in itertools.pairwise(seen):
        if a.done is None or (b.began or 0.0) < a.done:
            problems.append(f"{b.region} began updating before {a.region} served the new version ready (two regions "
                            f"mid-update at once); observed: {order}")
            break
    return problems
