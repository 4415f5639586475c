"""Helpers shared by the fedapp tests: polling with a deadline and running one async test body."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any

Starter = Callable[..., subprocess.Popen[bytes]]
"""The ``component`` fixture: ``component(role, region=..., instance=...)`` starts a process."""


async def until(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll *pred* (sync or async) every 50 ms until it returns something truthy; fail after *timeout*."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = pred()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last={last!r}")


def run(coro_fn: Callable[[], Awaitable[Any]]) -> None:
    """Run ``coro_fn()`` in a fresh event loop; fail if it takes more than 60 s."""
    asyncio.run(asyncio.wait_for(coro_fn(), timeout=60))
