"""Fixtures of the report tests: the Allure command line and Debian's chromium (installed by
``install-report-tools.sh`` when missing, under a file lock shared by xdist workers; the
tests skip, saying why, only where they cannot be installed), and a headless browser."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

TOOLS_SCRIPT = Path(__file__).with_name("install-report-tools.sh")

# The browser tests share one drill and one browser: one xdist worker runs them all.
REPORT_GROUP = pytest.mark.xdist_group("report")


@pytest.fixture(scope="session")
def report_tools(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The Allure command line and chromium are installed (else the test is skipped, with the
    installer's reason)."""
    if subprocess.run([str(TOOLS_SCRIPT), "--check"], check=False).returncode == 0:
        return
    # The parent of the base temp dir is shared by every xdist worker of the run.
    with FileLock(str(tmp_path_factory.getbasetemp().parent / "report-tools.lock"), timeout=900):
        r = subprocess.run([str(TOOLS_SCRIPT)], capture_output=True, text=True, timeout=900, check=False)
    if r.returncode != 0:
        pytest.skip(f"the report tools (allure-commandline, chromium) cannot be installed: {r.stderr.strip()[-600:]}")


@pytest.fixture(scope="module")
def browser(report_tools: None) -> Iterator[object]:
    """Headless Debian chromium driven by playwright (no browser download: its executable)."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    assert chromium, "install-report-tools.sh reported chromium installed, but it is not on PATH"
    with sync_playwright() as p:
        # --no-sandbox: chromium refuses to run its sandbox as root (CI runs as root).
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def gameday(*args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the ``gameday`` command as a user does (its console script's module, this Python)."""
    return subprocess.run([sys.executable, "-m", "gameday.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, **(env or {})})
