"""Is a ratio of bad requests shown above its limit? The unit decided by what the load says.

gameday's own load names each request's client (:attr:`~gameday.model.timeline.RequestRec.client`):
the clients are independent, their requests are not (a client holding a dead region's address
fails until its cache expires), so the clients are the unit (:func:`~gameday.verdicts.stats.units_above`).
A load generator that names no client leaves only the requests, judged as independent by the exact
binomial tail (:func:`~gameday.verdicts.stats.ratio_above`); the verdict's detail says which.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gameday.model.timeline import RequestRec
from gameday.verdicts.stats import FALSE_FAILURE, probability, ratio_above, units_above


@dataclass(frozen=True)
class RatioTest:
    """The outcome of :func:`bad_ratio_above`."""

    shown: bool
    """The ratio is shown above the limit at false-failure probability :data:`FALSE_FAILURE`."""
    tail: float
    """The (bound on the) probability of counts this high from a federation within the limit."""
    bad: int
    n: int
    bound: str
    """The bound and its unit, as the verdicts print it: ``P(Binomial(600, 0.01) >= 12) = 0.0041``
    or ``Chernoff-Hoeffding over 187 clients' shares (mean 2.4%) <= 0.0041``."""

    @property
    def ratio(self) -> float:
        return self.bad / self.n if self.n else 0.0


def clients_named(reqs: Sequence[RequestRec]) -> bool:
    """Every request names its client: the client can be the unit."""
    return bool(reqs) and all(r.client is not None for r in reqs)


def bad_ratio_above(reqs: Sequence[RequestRec], is_bad: Callable[[RequestRec], bool], limit: float,
                    delta: float = FALSE_FAILURE) -> RatioTest:
    """Do the requests *reqs*, *is_bad* of them bad, show the bad ratio above *limit*?"""
    bad = sum(1 for r in reqs if is_bad(r))
    n = len(reqs)
    if clients_named(reqs):
        per: dict[str | None, list[int]] = defaultdict(lambda: [0, 0])
        for r in reqs:
            c = per[r.client]
            c[0] += is_bad(r)
            c[1] += 1
        shown, tail, mean = units_above([(b, of) for b, of in per.values()], limit, delta)
        return RatioTest(shown, tail, bad, n, f"Chernoff-Hoeffding over {len(per)} clients' shares "
                                              f"(mean {mean:.2%}) <= {probability(tail)}")
    shown, tail = ratio_above(bad, n, limit, delta)
    return RatioTest(shown, tail, bad, n, f"P(Binomial({n}, {limit:g}) >= {bad}) = {probability(tail)}")
