"""Waiting on conditions with deadlines, never fixed sleeps.

The helpers come in a pair (trio's ``fail_after`` / ``move_on_after``):
:func:`wait_until` raises ``AssertionError`` when the deadline passes (a verdict: the
federation did not get there in time), :func:`sample_for` just stops and returns what
it saw.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    probe: Callable[[], tuple[bool, T]],
    timeout: float,
    what: str,
    interval: float = 0.05,
) -> T:
    """Call *probe* until it returns ``(True, value)``; return that value.

    Args:
        probe: returns ``(done, value)``; *value* is also what the failure message shows.
        timeout: seconds before giving up.
        what: the condition, for the message ("every entry node at the control plane's version").
        interval: seconds between calls.

    Raises:
        AssertionError: *timeout* passed; says what was awaited, for how long, and the
            last value seen.
    """
    t0 = time.monotonic()
    while True:
        done, value = probe()
        if done:
            return value
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"expected {what} within {timeout:.1f} s; last seen: {value}")
        time.sleep(interval)


def sample_for(probe: Callable[[], T], seconds: float, interval: float = 0.1,
               max_samples: int = 10_000) -> list[tuple[float, T]]:
    """Call *probe* every *interval* s for *seconds* s; return ``(monotonic time, value)`` pairs.

    Bounded in count as well as time (*max_samples*) so a fast probe cannot run away.
    """
    out: list[tuple[float, T]] = []
    end = time.monotonic() + seconds
    while len(out) < max_samples:
        value = probe()
        now = time.monotonic()
        out.append((now, value))
        if now >= end:
            break
        time.sleep(min(interval, max(0.0, end - now)))
    return out
