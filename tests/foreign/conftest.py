"""Fixtures for the foreign federation (Debian nginx + PowerDNS, see ``federation.py``).

The packages are installed by the fixture itself when missing (root: apt-get through
``debian-packages.sh``, under a file lock shared by xdist workers, since two apt-gets
would fight over dpkg's lock); the tests skip, saying why, only where they cannot be.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from tests.foreign.federation import PACKAGES_SCRIPT, ForeignFederation
from tests.foreign.processes import processes_under

# Every test of this directory runs in one xdist worker (`--dist loadgroup`): they share
# the module's federation, and two federations at once would only compete for the 2 cores.
FOREIGN_GROUP = pytest.mark.xdist_group("foreign")


def _ensure_packages(lock_dir: Path) -> None:
    if subprocess.run([str(PACKAGES_SCRIPT), "--check"], check=False).returncode == 0:
        return
    with FileLock(str(lock_dir / "foreign-debian-packages.lock"), timeout=600):
        r = subprocess.run([str(PACKAGES_SCRIPT)], capture_output=True, text=True, timeout=600, check=False)
    if r.returncode != 0:
        # The script says why: not root, or apt-get's own last lines.
        pytest.skip(f"the foreign federation's Debian packages cannot be installed: {r.stderr.strip()[-600:]}")


@pytest.fixture(scope="module")
def foreign_federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForeignFederation]:
    """A running foreign federation for one test module; every process is stopped at the end."""
    # The parent of the base temp dir is shared by every xdist worker of the run.
    _ensure_packages(tmp_path_factory.getbasetemp().parent)
    root = tmp_path_factory.mktemp("foreign")
    fed = ForeignFederation.plan(root)
    try:
        fed.start()
        yield fed
    finally:
        fed.stop()
        left = processes_under(root)
        assert not left, f"processes outlived the foreign federation in {root}: {left}"


@pytest.fixture
def foreign(foreign_federation: ForeignFederation) -> Iterator[ForeignFederation]:
    """The module's foreign federation, steady before the test and healed after it (a failed
    test may leave a gateway down; the next test starts from a whole federation)."""
    foreign_federation.wait_steady()
    try:
        yield foreign_federation
    finally:
        foreign_federation.heal()
