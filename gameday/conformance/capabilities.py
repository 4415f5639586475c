"""Checks that need an optional target capability skip, saying why, where it is absent.

``require(federation, Reconcilable, "R3 needs a full reconciliation pass")`` returns the
federation (typed as the capability) or skips the test with
``target mine cannot reconcile: R3 needs a full reconciliation pass``: a rule that could not
be checked is never reported as passed.
"""

from __future__ import annotations

from typing import TypeVar

import pytest

from gameday.interfaces import CAPABILITIES

C = TypeVar("C")


def require(federation: object, capability: type[C], why: str) -> C:
    """*federation* as *capability*, or skip the calling test with the reason.

    Raises:
        pytest.skip.Exception: the target lacks *capability*.
    """
    if isinstance(federation, capability):
        return federation
    name = getattr(federation, "name", type(federation).__name__)
    pytest.skip(f"target {name} cannot {CAPABILITIES.get(capability, capability.__name__)}: {why}")
