"""A drill's phases as report steps, and the figures each step shows (pure: no I/O).

The drill opens one step per phase (steady state, inject, observe, restore) through a
:class:`Steps` reporter; :mod:`gameday.reports.allure_attach` renders them as Allure steps,
:class:`NoSteps` records nothing. A phase's title is filled in when the phase ends, with
the figures measured in it (:func:`baseline_facts`, :func:`observe_facts`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from gameday.model.timeline import latest_per_node

if TYPE_CHECKING:
    from gameday.model.timeline import Timeline
    from gameday.verdicts.result import DrillResult, Verdict


@dataclass
class StepRecord:
    """One phase step while it runs: the drill may retitle it and add parameters."""

    title: str
    params: dict[str, str] = field(default_factory=dict)


class Steps(Protocol):
    """Where a drill's steps go."""

    def phase(self, title: str) -> AbstractContextManager[StepRecord]:
        """A step for the block: failed when the block raises, titled from the record at its end."""
        ...

    def verdict(self, v: Verdict, exc: BaseException | None) -> None:
        """One step per verdict, failed with *exc* when the verdict failed."""
        ...


class NoSteps:
    """Steps that go nowhere (no report is being written)."""

    @contextmanager
    def phase(self, title: str) -> Iterator[StepRecord]:
        yield StepRecord(title)

    def verdict(self, v: Verdict, exc: BaseException | None) -> None:
        return None


def verdict_title(v: Verdict) -> str:
    """``verdict switchover: PASS 2.31 s ± 0.10 s (limit 180 s)``."""
    head = {"pass": "PASS", "fail": "FAIL", "n/a": "N/A", "inconclusive": "INCONCLUSIVE"}[v.outcome]
    fig = " ".join(p for p in (v.figure, v.resolution) if p)
    judged = ", ".join(p for p in (f"limit {v.limit}" if v.limit else "",
                                   f"false-failure probability <= {v.false_failure}" if v.false_failure else "") if p)
    text = f"verdict {v.name}: {head}" + (f" {fig}" if fig else "") + (f" ({judged})" if judged else "")
    if v.outcome == "n/a":
        text += f": {v.detail}"
    if v.outcome == "inconclusive":
        text += ": harness starved"
    return text


def _share(counts: dict[str, int]) -> str:
    total = sum(counts.values())
    if not total:
        return "-"
    return ", ".join(f"{k} {n / total:.0%}" for k, n in sorted(counts.items()))


def baseline_facts(tl: Timeline, start: float, end: float, regions: list[str]) -> dict[str, str]:
    """The steady state seen in ``[start, end]``: served rate and where, client errors,
    entry nodes routing to every region, the control-plane version, GSLB answer shares."""
    span = max(end - start, 1e-6)
    reqs = [r for r in tl.requests if start <= r.t <= end]
    served: dict[str, int] = {}
    for r in reqs:
        if not r.failed and r.region:
            served[r.region] = served.get(r.region, 0) + 1
    failed = sum(r.failed for r in reqs)
    latest = latest_per_node(tl.nodes, since=start, until=end)
    full = sum(1 for o in latest.values() if o.ok and (o.routable is None or set(regions) <= set(o.routable)))
    cp = [c.version for c in tl.cp if start <= c.t <= end and c.version is not None]
    answers: dict[str, int] = {}
    for d in tl.dns:
        if d.ok and start <= d.t <= end:
            for a in d.answers or d.regions:
                answers[a] = answers.get(a, 0) + 1
    return {
        "duration": f"{span:.1f} s",
        "served": f"{sum(served.values()) / span:.1f} req/s ({_share(served)})" if reqs else "no load attached",
        "client errors": f"{failed / len(reqs):.1%} of {len(reqs)}" if reqs else "-",
        "entry nodes routing to every region": f"{full}/{len(latest)}",
        "control-plane version": f"v{cp[-1]}" if cp else "-",
        "GSLB answer share": _share(answers),
    }


def baseline_title(facts: dict[str, str]) -> str:
    return (f"steady state: {facts['duration']}, served {facts['served']}, client errors {facts['client errors']}, "
            f"entry nodes {facts['entry nodes routing to every region']} routing to every region, "
            f"control plane {facts['control-plane version']}")


def _at(v: float | None, res: float | None) -> str:
    return "not reached" if v is None else f"t+{v:.2f} s" + (f" ± {res:.2f} s" if res is not None else "")


def observe_facts(res: DrillResult) -> dict[str, str]:
    """The instants the drill measured, relative to the fault (when it removed a region)."""
    out = {"injection uncertainty": f"{res.fault.injection_uncertainty * 1000:.0f} ms"}
    if not res.removes_region:
        return out
    for name, f in (("switchover", res.switchover()), ("DNS convergence", res.dns_convergence()),
                    ("client recovery", res.client_recovery())):
        out[name] = _at(f.value, f.resolution)
    return out


def observe_title(facts: dict[str, str]) -> str:
    shown = [f"{k} {facts[k]}" for k in ("switchover", "DNS convergence", "client recovery") if k in facts]
    return "observe: " + (", ".join(shown) if shown else "no region removed: no switchover to measure")


def restore_facts(res: DrillResult) -> dict[str, str]:
    w = res.fault
    out: dict[str, str] = {}
    if w.t_revert is not None:
        out["reverted"] = f"t+{w.t_revert - w.t_fault:.2f} s"
        if w.t_revert_call is not None:
            out["revert call"] = f"{(w.t_revert - w.t_revert_call) * 1000:.0f} ms"
    out["steady state again"] = f"t+{w.t_restored - w.t_fault:.2f} s" if w.t_restored is not None else "not seen"
    if w.aborted:
        out["aborted"] = w.aborted
    return out


def restore_title(facts: dict[str, str]) -> str:
    return (f"restore: reverted {facts.get('reverted', 'not reverted')}, steady state again "
            f"{facts['steady state again']}" + (f" (aborted: {facts['aborted']})" if "aborted" in facts else ""))
