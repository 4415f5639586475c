"""Statistical verdicts that state their false-failure probability (as R8's share checks do,
:mod:`gameday.conformance.stats`).

A drill sees a few hundred requests and a dozen one-second utilisation samples: an observed
ratio a little over its limit is often noise. The drill's statistical verdicts therefore fail
only when the counts show the limit exceeded with a false-failure probability of at most
:data:`FALSE_FAILURE`, and say that probability beside the verdict:

- **a ratio of requests** (client recovery's error ratio per window, headroom's overload
  responses): ``k`` bad of ``n`` requests. Under the worst case a healthy federation allows
  (each request bad with probability exactly the limit ``p0``, independently), ``k`` or more
  bad requests happen with probability ``P(Binomial(n, p0) >= k)``, computed exactly (no
  normal approximation). The ratio is shown above the limit when that tail is at most
  :data:`FALSE_FAILURE`: a healthy federation is then failed at most that often.
- **a ratio of clients' requests** (the same verdicts, where the load names each request's
  client, as gameday's own does): a client's requests are not independent. One that holds a dead
  region's address fails every request until its cache expires, so the errors come in clusters
  and the binomial bound above, counting requests, fails a healthy federation more often than it
  says. The client is the unit instead: each client's share of bad requests ``x_c = k_c / n_c``
  is in [0, 1] with mean at most ``p0`` under the worst healthy case, and the clients are
  independent, so by the Chernoff-Hoeffding bound ``P(sum x_c >= x) <= exp(-m KL(x/m || p0))``
  over the ``m`` clients, whatever the correlation inside each client (:func:`units_above`).
- **utilisation per second** (headroom): a sign test. ``k`` of ``n`` one-second samples (at
  least 1 s apart) above the limit; a region whose typical second is within the limit (median
  at or below it) has each sample above with probability at most 1/2, so ``k`` or more above
  happen with probability at most ``P(Binomial(n, 1/2) >= k)``. A burst that a CPU stall
  releases into one second (seen once: 81 % against 80 % on a healthy federation) moves one
  sample; a region overloaded for real is above in nearly every second. Distribution-free but
  for one assumption: the samples are independent. With fewer than
  :func:`sign_test_min_samples` samples (10 at 1e-3) no count can decide, and the verdict says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

FALSE_FAILURE = 1e-3
"""At most this probability that one statistical verdict fails a healthy federation in one
drill. 1e-3 rather than R8's 1e-6: a drill has ~10 per-second samples, and the sign test
needs 20 samples all above the limit to decide at 1e-6 (10 at 1e-3)."""


def binomial_tail(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``, exact (summed in log space).

    Raises:
        ValueError: *n* < 0 or *p* outside [0, 1].
    """
    if n < 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"need n >= 0 and 0 <= p <= 1; got n={n}, p={p}")
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p == 0.0:
        return 0.0
    if p == 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k, n + 1):
        term = math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
        total += term
        if i > n * p and term < total * 1e-17:  # past the mode the terms only shrink
            break
    return min(1.0, total)


def ratio_above(k: int, n: int, limit: float, delta: float = FALSE_FAILURE) -> tuple[bool, float]:
    """Do *k* bad of *n* requests show the ratio above *limit*, failing a federation whose true
    ratio is within it with probability at most *delta*?

    Returns:
        (shown above, the tail probability ``P(Binomial(n, limit) >= k)``; 1.0 when the
        observed ratio is within the limit).
    """
    if n == 0 or k <= limit * n:
        return False, 1.0
    tail = binomial_tail(k, n, limit)
    return tail <= delta, tail


def kl_bernoulli(q: float, p: float) -> float:
    """The Kullback-Leibler divergence ``KL(Bernoulli(q) || Bernoulli(p))``, in nats."""
    def term(a: float, b: float) -> float:
        return 0.0 if a == 0.0 else a * math.log(a / b)
    return term(q, p) + term(1.0 - q, 1.0 - p)


def hoeffding_tail(mean: float, m: int, p: float) -> float:
    """Chernoff-Hoeffding: an upper bound on ``P(sum >= m * mean)`` for the sum of *m*
    independent variables in [0, 1], each with expectation at most *p*; 1.0 when *mean* <= *p*."""
    if m <= 0 or mean <= p:
        return 1.0
    if p <= 0.0:
        return 0.0
    if mean >= 1.0:
        return p ** m
    return min(1.0, math.exp(-m * kl_bernoulli(mean, p)))


def units_above(units: Sequence[tuple[int, int]], limit: float,
                delta: float = FALSE_FAILURE) -> tuple[bool, float, float]:
    """Do the ``(bad, of)`` counts of independent *units* (clients), whose own requests may
    fail together, show the ratio of bad requests above *limit*, failing a federation whose
    every request is bad with probability at most *limit* at most *delta* of the time?

    The statistic is the mean of the units' own shares (a unit with 3 requests, 2 bad, counts
    2/3); :func:`hoeffding_tail` bounds its tail without assuming anything inside a unit.

    Returns:
        (shown above, the bound on the tail probability, the mean share).
    """
    shares = [bad / of for bad, of in units if of > 0]
    if not shares:
        return False, 1.0, 0.0
    mean = sum(shares) / len(shares)
    tail = hoeffding_tail(mean, len(shares), limit)
    return tail <= delta, tail, mean


def sign_test_min_samples(delta: float = FALSE_FAILURE) -> int:
    """The fewest samples with which a sign test can decide at *delta* (all above: 2^-n <= delta)."""
    return math.ceil(math.log2(1.0 / delta))


def sign_test(above: int, n: int) -> float:
    """``P(Binomial(n, 1/2) >= above)``: how often a region whose typical second is within the
    limit shows *above* of *n* independent one-second samples above it."""
    return binomial_tail(above, n, 0.5)


def one_per_second(times: Sequence[float], spacing: float = 1.0) -> list[int]:
    """Indices of *times* (ascending) kept at least *spacing* seconds apart, from the first:
    samples of a 1 s count read every 0.5 s overlap; these do not."""
    keep: list[int] = []
    last = -math.inf
    for i, t in enumerate(times):
        if t - last >= spacing - 1e-9:
            keep.append(i)
            last = t
    return keep


def p50_p99(values: Sequence[float]) -> tuple[float, float, int] | None:
    """``(p50, p99, n)`` of *values* (nearest rank, no interpolation); None when empty."""
    ordered = sorted(values)
    if not ordered:
        return None

    def q(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]

    return q(0.5), q(0.99), len(ordered)


def probability(p: float) -> str:
    """A probability as the verdicts print it: ``0.23``, ``4.1e-5``, ``0`` (below 1e-300)."""
    if p <= 0.0:
        return "0"
    return f"{p:.2g}" if p >= 0.01 else f"{p:.2g}".replace("e-0", "e-")
