"""The test suite's xdist groups hold: `make test` runs with ``--dist loadgroup`` so that tests
that must not run beside each other (two 12-region federations, the foreign federation's
shared Debian services, the packaging builds) share one worker. pytest 9.2 broke that
silently (pytest-xdist#1386): every group mark was ignored and nothing failed. This runs
the same options on a throwaway suite and checks that one group ran on one worker."""

from __future__ import annotations

import re

import pytest

GROUPED = """
import os, time, pytest
pytestmark = pytest.mark.xdist_group("together")

@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    time.sleep(0.05)
    print("WORKER", os.environ["PYTEST_XDIST_WORKER"])
"""
LOOSE = """
import time, pytest

@pytest.mark.parametrize("i", range(6))
def test_loose(i):
    time.sleep(0.05)
"""


def test_a_group_runs_on_one_worker_with_the_make_test_options(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider -p no:randomly\n")
    pytester.makepyfile(test_grouped=GROUPED, test_loose=LOOSE)
    result = pytester.runpytest_subprocess("-n", "3", "--dist", "loadgroup", "--reruns", "1", "--only-rerun",
                                           "HarnessStarved", "-v", timeout=120)
    result.assert_outcomes(passed=12)
    workers = set(re.findall(r"\[(gw\d+)\] \[ *\d+%\] PASSED test_grouped\.py", result.stdout.str()))
    assert len(workers) == 1, f"the group ran on {sorted(workers)}:\n{result.stdout.str()}"
