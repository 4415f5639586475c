"""``gameday drill --fault NAME`` runs the suite's drill of that fault (the state layer's too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gameday.cli.main import DRILLS


def _drill(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gameday.cli", "drill", f"--reports={tmp_path / 'reports'}", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("fault", sorted(DRILLS))
def test_each_fault_runs_its_suite_drill(tmp_path: Path, fault: str) -> None:
    out = _drill(tmp_path, f"--fault={fault}", "--collect-only", "-q")  # pytest's: collect, run nothing
    assert out.returncode == 0, out.stdout + out.stderr
    name, func = DRILLS[fault]
    assert f"gameday/{name}::{func}" in out.stdout, out.stdout
    assert "1 test collected" in out.stdout


def test_an_unknown_fault_or_two_choices_are_refused_with_one_line(tmp_path: Path) -> None:
    bad = _drill(tmp_path, "--fault=disk_full")
    assert bad.returncode == 2 and "invalid choice: 'disk_full' (choose from 'gateway_down'" in bad.stderr
    both = _drill(tmp_path, "--fault=store_down", "--test=test_x.py::test_y")
    assert both.returncode != 0 and "--test and --fault: give one" in both.stdout + both.stderr
