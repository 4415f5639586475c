"""Distribution-free bounds for checking answer shares (R8, R10).

A GSLB that answers each query with one region picked at random with probability
``p`` gives, over ``n`` independent queries, an observed share whose deviation from the
mean of the ``p`` s is bounded by Hoeffding's inequality (it holds for independent
Bernoulli trials with *different* ``p`` s too, which a weight ramp produces)::

    P(|share - mean p| >= eps) <= 2 exp(-2 n eps^2)

With a union bound over ``k`` simultaneous checks, every check holds except with
probability at most ``delta`` when ``eps = sqrt(ln(2 k / delta) / (2 n))``. No normal
approximation is involved, so the stated false-failure probability is an upper bound.
"""

from __future__ import annotations

import math

FALSE_FAILURE = 1e-6
"""Probability, at most, that a share check fails a GSLB that answers exactly as specified."""


def hoeffding_epsilon(n: int, delta: float = FALSE_FAILURE, checks: int = 1) -> float:
    """The tolerance on an observed share of *n* answers so that *checks* simultaneous
    checks all pass, except with probability at most *delta*, when the GSLB is correct.

    Raises:
        ValueError: *n* < 1, *delta* outside (0, 1), or *checks* < 1.
    """
    if n < 1 or not 0 < delta < 1 or checks < 1:
        raise ValueError(f"need n >= 1, 0 < delta < 1, checks >= 1; got n={n}, delta={delta}, "
                         f"checks={checks}")
    return math.sqrt(math.log(2 * checks / delta) / (2 * n))


def queries_needed(eps: float, delta: float = FALSE_FAILURE, checks: int = 1) -> int:
    """How many answers make :func:`hoeffding_epsilon` at most *eps*."""
    if not 0 < eps < 1:
        raise ValueError(f"need 0 < eps < 1, got {eps}")
    return math.ceil(math.log(2 * checks / delta) / (2 * eps * eps))
