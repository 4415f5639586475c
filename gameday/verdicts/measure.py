"""The measurements of DESIGN.md §4, computed from a :class:`Timeline`.

Each returns a :class:`Figure`: a value in seconds (None when the event was never
observed), the resolution it is known to (+/-), and a sentence saying how it was found.
Pure functions: no I/O, no clocks.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from gameday.model.timeline import CpObs, NodeObs, RequestRec, Timeline
from gameday.verdicts.ratios import bad_ratio_above, clients_named
from gameday.verdicts.stats import FALSE_FAILURE, p50_p99, probability, ratio_above

Definition = Literal["entry-node versions", "routable sets", "dns answers"]
"""How switchover was measured (DESIGN.md §7): the §4 definition where every surviving entry
node reports its route version and routable regions; from their routable sets where they
report no version; from the GSLB's answers (and served-by headers) where no entry node says
where it routes."""


@dataclass(frozen=True)
class Figure:
    """A measured duration."""

    name: str
    value: float | None
    resolution: float
    detail: str = ""
    definition: str = ""
    """Which definition of the figure was used, where there is more than one (switchover)."""
    limited_by: str | None = None
    """The source whose poll gap set the resolution (an entry node, ``dns``), if known."""

    def __str__(self) -> str:
        if self.value is None:
            return f"{self.name}: not reached ({self.detail})"
        return f"{self.name}: {self.value:.2f} s ± {self.resolution:.2f} s"

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "value_s": self.value, "resolution_s": self.resolution,
                                  "detail": self.detail}
        if self.definition:
            out["definition"] = self.definition
        if self.limited_by is not None:
            out["limited_by"] = self.limited_by
        return out


def _rel(t: float, t_fault: float) -> str:
    return f"t{t - t_fault:+.1f} s"


def switchover(
    nodes: list[NodeObs],
    cp: list[CpObs],
    failed: str,
    survivors: Iterable[str],
    *,
    t_fault: float,
    until: float,
) -> Figure:
    """First instant after *t_fault* at which every surviving entry node reports a route
    version that excludes *failed*, minus *t_fault*.

    Resolution: the longest gap, among the nodes, between the last observation that
    still included *failed* and the first that excluded it (the switch happened
    somewhere in that gap).
    """
    survivors = sorted(set(survivors))
    latest: dict[str, NodeObs] = {}
    last_including: dict[str, float] = {}
    first_excluding: dict[str, float] = {}
    definition: Definition = "entry-node versions"
    for o in sorted(nodes, key=lambda o: o.t):
        if o.t > until:
            break
        if not o.ok or o.node not in survivors or o.routable is None:
            continue
        if o.version is None:
            definition = "routable sets"
        latest[o.node] = o
        if failed in o.routable:
            # When the poll was sent: the node still routed to the region at some instant
            # between sending and the answer, so the switch came after the send.
            last_including[o.node] = o.sent or o.t
            first_excluding.pop(o.node, None)
        else:
            first_excluding.setdefault(o.node, o.t)
        if o.t < t_fault:
            continue
        if len(latest) == len(survivors) and all(failed not in (latest[n].routable or ()) for n in survivors):
            # Each node switched somewhere between its last poll still including the region
            # and its first poll without it.
            gaps = {n: first_excluding[n] - last_including[n] for n in survivors if n in last_including}
            widest = max(gaps, key=lambda n: gaps[n]) if gaps else None
            versions = sorted({v for n in survivors if (v := latest[n].version) is not None})
            shown = f" (versions {versions})" if definition == "entry-node versions" else " (no versions reported)"
            return Figure(
                "switchover", o.t - t_fault, gaps[widest] if widest is not None else 0.0,
                f"all {len(survivors)} surviving entry nodes exclude region {failed} "
                f"at {_rel(o.t, t_fault)}{shown}", definition=definition, limited_by=widest,
            )
    # Never reached: say who is behind, by which version, and when the new version was published.
    behind = []
    for n in survivors:
        seen = latest.get(n)
        if seen is None:
            behind.append(f"{n} never answered")
        elif failed in (seen.routable or ()):
            by = f" by v{seen.version}" if seen.version is not None else ""
            behind.append(f"{n} still routes to {failed}{by} at {_rel(seen.t, t_fault)}")
    v_at_fault = max((c.version for c in cp if c.t <= t_fault and c.version is not None), default=None)
    published = next((c for c in sorted(cp, key=lambda c: c.t)
                      if c.t > t_fault and c.version is not None and v_at_fault is not None
                      and c.version > v_at_fault), None)
    pub = (f"; v{published.version} published at {_rel(published.t, t_fault)}" if published
           else "; the control plane published no new version" if cp else "")
    return Figure("switchover", None, 0.0, "; ".join(behind) + pub, definition=definition)


def switchover_definition(nodes: list[NodeObs], survivors: Iterable[str]) -> Definition:
    """Which switchover definition the observations allow: entry-node routes (with or
    without versions) when every surviving node that answered reported where it routes,
    else the GSLB's answers."""
    names = set(survivors)
    answered = [o for o in nodes if o.ok and o.node in names]
    if not names or not answered or any(o.routable is None for o in answered):
        return "dns answers"
    return "entry-node versions" if all(o.version is not None for o in answered) else "routable sets"


def switchover_from_dns(tl: Timeline, failed: str, t_fault: float, until: float) -> Figure:
    """Switchover where no entry node says where it routes: the first instant after which
    the GSLB no longer answers with *failed* and no client request is served by it (where
    requests name the region that served them), minus *t_fault*."""
    dns = dns_convergence(tl, failed, t_fault, until)
    served = [r for r in tl.requests if t_fault <= r.t <= until and r.region is not None]
    definition = "dns answers"
    if dns.value is None:
        return replace(dns, name="switchover", definition=definition)
    by_failed = [r for r in served if r.region == failed]
    if not by_failed or by_failed[-1].t + by_failed[-1].latency <= t_fault + dns.value:
        how = "; no request served by it after that" if served else ""
        return replace(dns, name="switchover", definition=definition, detail=dns.detail + how, limited_by="dns")
    last = by_failed[-1]
    after = [r for r in served if r.t > last.t]
    if not after:
        return Figure("switchover", None, 0.0, f"region {failed} still served the last request "
                      f"at {_rel(last.t, t_fault)}", definition=definition)
    end = after[0].t + after[0].latency
    return Figure("switchover", end - t_fault, end - last.t,
                  f"{dns.detail}; last request served by region {failed} sent at {_rel(last.t, t_fault)}",
                  definition=definition, limited_by="requests")


def dns_convergence(tl: Timeline, failed: str, t_fault: float, until: float) -> Figure:
    """First instant after which the GSLB no longer answers with *failed*, minus *t_fault*."""
    obs = [d for d in tl.dns if t_fault <= d.t <= until and d.ok]
    if not obs:
        return Figure("dns_convergence", None, 0.0, "no DNS answer observed after the fault")
    last_with = None
    for i, d in enumerate(obs):
        if failed in d.regions:
            last_with = i
    if last_with is None:
        return Figure("dns_convergence", obs[0].t - t_fault, obs[0].t - t_fault,
                      f"no answer named region {failed} after the fault", limited_by="dns")
    if last_with == len(obs) - 1:
        return Figure("dns_convergence", None, 0.0,
                      f"the GSLB still answered with region {failed} at {_rel(obs[-1].t, t_fault)}")
    conv = obs[last_with + 1]
    return Figure("dns_convergence", conv.t - t_fault, conv.t - obs[last_with].t,
                  f"last answer with region {failed} at {_rel(obs[last_with].t, t_fault)}", limited_by="dns")


def error_ratio(reqs: list[RequestRec]) -> float:
    return sum(r.failed for r in reqs) / len(reqs) if reqs else 0.0


def _windows(reqs: list[RequestRec], t_fault: float, until: float, window: float,
             step: float) -> Iterable[tuple[float, int, int, int]]:
    """(start, first, end, errors) of each *window*-second window from *t_fault*, *step* apart:
    its requests are ``reqs[first:end]``."""
    lo = hi = 0
    errors = 0
    s = t_fault
    while s + window <= until + 1e-9:
        while hi < len(reqs) and reqs[hi].t < s + window:
            errors += reqs[hi].failed
            hi += 1
        while lo < hi and reqs[lo].t < s:
            errors -= reqs[lo].failed
            lo += 1
        if hi > lo:
            yield s, lo, hi, errors
        s += step


def _failed(r: RequestRec) -> bool:
    return r.failed


def client_recovery(
    requests: list[RequestRec], t_fault: float, until: float, *, window: float, slo: float, step: float = 0.1,
    clock_uncertainty: float = 0.0, final: bool = True,
) -> Figure:
    """Start of the first *window*-second window after *t_fault* whose client error ratio
    is within *slo*, minus *t_fault*. Requests are sorted by send time.

    Where no window's ratio is within *slo*, the counts decide, in two steps:

    1. **When**: the first window whose errors, counted as independent requests, do not show the
       ratio above *slo* (``P(Binomial(n, slo) >= k) > FALSE_FAILURE``) counts as recovered, and
       the detail says so: 7 errors of 600 (1.2 %) in every window are noise around 1 %, not
       clients that never recovered. (Only then: a window within *slo* keeps the figure's §4
       meaning, not moved earlier by a window still holding the outage's last errors.)
    2. **Whether**, with *final* (the observation is over): where every window's requests show
       the ratio above *slo*, the last window is judged again with the client as the unit
       (:mod:`gameday.verdicts.ratios`), since one client's requests fail together and counting
       them as independent fails a healthy federation more often than stated. Not shown above
       that way, the clients recovered by its start (the detail says so); shown above, they did
       not. So a healthy federation fails "clients did not recover" with probability at most
       :data:`~gameday.verdicts.stats.FALSE_FAILURE` whatever the clustering. The client unit is
       not used for step 1: it has too little power to place the recovery in time (the outage's
       own first 10 s window, 27 errors of 601 requests from 189 clients, is not shown above
       1 % that way, which would put every recovery at 0 s).

    *final* False (the drill still observing): step 2 waits, so a drill goes on observing for a
    window within *slo* rather than ending on the outage's own window.

    *clock_uncertainty*: how far request send times may be off the harness's clock (records
    of load workers on other machines, put on it by an offset measured at connect time);
    added to the figure's resolution."""
    reqs = [r for r in requests if t_fault <= r.t <= until]
    if not reqs:
        return Figure("client_recovery", None, 0.0, "no client requests recorded after the fault")
    clocks = (f"; resolution includes ±{clock_uncertainty:.2g} s of remote load workers' clock "
              "offsets" if clock_uncertainty > 0 else "")
    worst = 0.0
    first_noise: tuple[float, int, int, float] | None = None
    last: tuple[float, int, int] | None = None
    for s, lo, hi, errors in _windows(reqs, t_fault, until, window, step):
        n = hi - lo
        ratio = errors / n
        worst = max(worst, ratio)
        last = (s, lo, hi)
        if ratio <= slo:
            return Figure("client_recovery", s - t_fault, step + clock_uncertainty,
                          f"{n} requests in [{_rel(s, t_fault)}, {_rel(s + window, t_fault)}], "
                          f"error ratio {ratio:.3%} <= {slo:.2%}{clocks}")
        if first_noise is None:
            above, tail = ratio_above(errors, n, slo)
            if not above:
                first_noise = (s, n, errors, tail)
    if first_noise is not None:
        s, n, errors, tail = first_noise
        return Figure("client_recovery", s - t_fault, step + clock_uncertainty,
                      f"{n} requests in [{_rel(s, t_fault)}, {_rel(s + window, t_fault)}], error ratio "
                      f"{errors / n:.3%}: over {slo:.2%} in every window, but not shown above it "
                      f"(P(Binomial({n}, {slo:g}) >= {errors}) = {probability(tail)} > {FALSE_FAILURE:g}, "
                      f"the false-failure probability){clocks}")
    if last is None:
        # Observed for less than one window (an aborted drill): say what was seen, not a
        # "worst window" of windows that never were.
        failed = sum(r.failed for r in reqs)
        return Figure("client_recovery", None, 0.0,
                      f"observed only until {_rel(until, t_fault)}, shorter than one {window:g} s window: no "
                      f"window to judge; {failed} of {len(reqs)} requests sent after the fault failed "
                      f"({failed / len(reqs):.1%}){clocks}")
    s, lo, hi = last
    shown = f"[{_rel(s, t_fault)}, {_rel(s + window, t_fault)}]"
    if final and clients_named(reqs[lo:hi]):
        test = bad_ratio_above(reqs[lo:hi], _failed, slo)
        if not test.shown:
            return Figure("client_recovery", s - t_fault, step + clock_uncertainty,
                          f"{test.n} requests in {shown}, the last window, error ratio {test.ratio:.3%}: every "
                          f"window's requests show it over {slo:.2%}, but its clients' errors cluster and do not "
                          f"({test.bound} > {FALSE_FAILURE:g}, the false-failure probability){clocks}")
        judged_by = f"the last window {shown} also with its clients as the unit: {test.bound}"
    else:
        judged_by = "binomial bound on its request counts"
    return Figure("client_recovery", None, 0.0,
                  f"no {window:g} s window after the fault had an error ratio <= {slo:.2%} "
                  f"(worst window {worst:.1%}; observed until {_rel(until, t_fault)}; every window shown above "
                  f"it at false-failure probability <= {FALSE_FAILURE:g}, {judged_by})")


def read_latency(requests: Iterable[RequestRec], lo: float, hi: float) -> dict[str, object] | None:
    """p50/p99 of the client requests sent in ``[lo, hi]`` that were served (neither a transport
    error nor a 5xx; the checklist's "latency during the switchover"), and how many were and were
    not; None when no request was served in it."""
    sent = [r for r in requests if lo <= r.t <= hi]
    q = p50_p99([r.latency for r in sent if not r.failed])
    if q is None:
        return None
    return {"p50_s": round(q[0], 4), "p99_s": round(q[1], 4), "n": q[2], "failed": len(sent) - q[2],
            "from_s": 0.0, "to_s": round(hi - lo, 3)}


@dataclass(frozen=True)
class Check:
    """A pass/fail verdict with its explanation (or, ``applicable`` False, why it has no input)."""

    name: str
    passed: bool
    detail: str
    applicable: bool = True
    """False: the verdict had no input (``detail`` says ``n/a: <reason>``); never a pass."""


def version_check(tl: Timeline, t_fault: float, t_restore: float | None, until: float,
                  require_increments: bool = True, *, regional: str | None = None,
                  t_call: float | None = None) -> Check:
    """The control-plane version never decreases, increases for the fault and again for
    the restore (unless *require_increments* is False), and every entry node's version
    sequence is monotonic.

    Args:
        t_call: the injection call's start. The fault may take effect anywhere during the
            call (a stopped gateway refuses its health checks at the signal, and its exit,
            when the call returns, can come a second later on a busy machine), so an
            increase seen after the call started counts for the fault.
        regional: judge that region's own control plane (:attr:`Timeline.regional_cp`, the
            regional layout of R14: a fault on the region's instances moves its regional
            version) instead of the global one.
    """
    # Version 0 is "no state loaded yet" (a control plane answering while it starts): not a
    # reading. An ephemeral control plane is still caught: it rebuilds to a lower version.
    if regional is None:
        cp = [c for c in sorted(tl.cp, key=lambda c: c.t) if c.version and c.t <= until]
        what = "control-plane version"
    else:
        cp = [CpObs(o.t, o.version, "poll") for o in sorted(tl.regional_cp, key=lambda o: o.t)
              if o.region == regional and o.version and o.t <= until]
        what = f"regional control-plane version of {regional}"
    problems: list[str] = []
    # Polled versions and broadcast versions are separate sequences: a delayed broadcast
    # legitimately trails the control plane's own version.
    for source in sorted({c.source for c in cp}):
        seq = [c for c in cp if c.source == source]
        for a, b in itertools.pairwise(seq):
            if a.version is not None and b.version is not None and b.version < a.version:
                problems.append(f"{what} ({source}) went back from v{a.version} to "
                                f"v{b.version} at {_rel(b.t, t_fault)}")
                break
    start = t_fault if t_call is None else min(t_call, t_fault)
    before = max((c.version for c in cp if c.t <= start and c.version is not None), default=None)
    end_fault = t_restore if t_restore is not None else until
    during = [c.version for c in cp if start < c.t <= end_fault and c.version is not None]
    if before is None:
        problems.append(f"no {what} observed before the fault")
    elif require_increments and (not during or max(during) <= before):
        problems.append(f"{what} did not increase for the fault (stayed at v{before} "
                        f"until {_rel(end_fault, t_fault)})")
    if t_restore is not None and require_increments:
        at_restore = max((c.version for c in cp if c.t <= t_restore and c.version is not None), default=None)
        after = [c.version for c in cp if c.t > t_restore and c.version is not None]
        if at_restore is not None and (not after or max(after) <= at_restore):
            problems.append(f"{what} did not increase for the restore (stayed at "
                            f"v{at_restore} until {_rel(until, t_fault)})")
    per_node: dict[str, NodeObs] = {}
    for o in sorted(tl.nodes, key=lambda o: o.t):
        # Version 0 means "no snapshot yet": a restarted node (the gateway a drill stopped)
        # starts there before its first pull. Any other step back is a regression.
        if not o.ok or not o.version or o.t > until:
            continue
        prev = per_node.get(o.node)
        if prev is not None and prev.version is not None and o.version < prev.version:
            problems.append(f"{o.node} went back from v{prev.version} to v{o.version} at {_rel(o.t, t_fault)}")
        per_node[o.node] = o
    versions = [c.version for c in cp if c.version is not None]
    summary = f"v{versions[0]} -> v{max(versions)}" if versions else "no versions"
    if regional is not None:
        summary += f" (region {regional}'s regional version)"
    return Check("versions", not problems, "; ".join(problems) if problems else f"monotonic, {summary}")
