"""The install step's contract (``debian-packages.sh``), which .ci/run and the fixture share.

Only the paths that need no network are run here: installed packages are a silent no-op,
and a user who is not root gets exit 2 and a one-line reason (the fixture's skip reason).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.foreign.federation import PACKAGES_SCRIPT


def _run(*args: str, env: dict[str, str] | None = None, user: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env or {})}
    if user is None:
        return subprocess.run([str(PACKAGES_SCRIPT), *args], capture_output=True, text=True, timeout=60,
                              check=False, env=env)
    # The script on stdin, from /: the other user may not be able to read the checkout.
    return subprocess.run(["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "bash", "-s", "--",
                           *args], input=PACKAGES_SCRIPT.read_text(), capture_output=True, text=True, timeout=60,
                          check=False, env=env, cwd="/")


def test_a_package_that_is_missing_is_reported_by_check_and_not_root_is_a_reason() -> None:
    missing = {"GAMEDAY_FOREIGN_PACKAGES": "gd-no-such-package"}
    assert _run("--check", env=missing).returncode == 1
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the script as another user")
    r = _run(env=missing, user=65534)  # nobody
    assert r.returncode == 2
    assert r.stderr.strip() == "not root: cannot install gd-no-such-package (apt-get needs root)", r.stderr


def test_installed_packages_are_a_quiet_no_op() -> None:
    if _run("--check").returncode != 0:
        pytest.skip("the foreign federation's packages are not installed here")
    r = _run()
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
