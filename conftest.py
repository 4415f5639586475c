"""Repository-level pytest configuration.

The gameday plugin itself is loaded through its ``pytest11`` entry point (installed
with the package), so nothing needs registering here; this file marks the rootdir so
``pytest suites/`` and ``pytest tests/`` share one configuration.
"""

from __future__ import annotations

import os
import sys

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Write and reuse bytecode in this run and every process it starts, as ``make test`` does.

    These machines set PYTHONDONTWRITEBYTECODE=1, under which every Python process the tests
    start (each pytester run, every component, every locust; xdist workers start after this)
    compiles everything it imports again, and every pytest among them re-runs its assertion
    rewriting of every gameday module (the plugin is an entry point, so all of it is
    rewritten). The Makefile unexports the variable; a direct ``pytest tests`` or ``pytest
    suites`` gets the same from here.
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
