"""tox.ini parses (tox's own loader) and its six envs run what they say, with tools that exist;
a tox.ini tox cannot load is reported as such (the negative control)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.workflows.tooling import ROOT, venv_tool

ENVS = {
    "py311": "pytest -n 2 --dist loadgroup --reruns 1 --only-rerun HarnessStarved tests",
    "lint": "ruff check gameday tests suites bench docs conftest.py",
    "types": "mypy",
    "suites": "pytest suites",
    "kind": "pytest suites --gameday-target kind",
    "drill": "gameday drill",
}


def tox_commands(ini: Path) -> dict[str, list[str]]:
    """Env -> its commands, as tox itself reads *ini*. Raises ValueError when tox cannot."""
    r = subprocess.run([str(venv_tool("tox")), "-c", str(ini), "config", "-e", "ALL", "-k", "commands"],
                       capture_output=True, text=True, timeout=120, check=False, cwd=ini.parent)
    if r.returncode != 0 or "HandledError" in r.stdout:
        raise ValueError(f"tox cannot load {ini}: {(r.stdout + r.stderr).strip()[-500:]}")
    out: dict[str, list[str]] = {}
    env = None
    for line in r.stdout.splitlines():
        if m := re.fullmatch(r"\[testenv:(.+)\]", line):
            env = m.group(1)
            out[env] = []
        elif env is not None and line.strip() and line.strip() != "commands =":
            out[env].append(line.strip().removeprefix("commands = "))
    return {e: c for e, c in out.items() if not e.startswith(".")}  # .pkg: tox's own packaging env


def test_tox_lists_the_six_envs() -> None:
    r = subprocess.run([str(venv_tool("tox")), "-a"], capture_output=True, text=True, timeout=120,
                       check=True, cwd=ROOT)
    assert set(r.stdout.split()) == set(ENVS), r.stdout


def test_each_tox_env_runs_what_it_says_with_tools_that_are_installed() -> None:
    commands = tox_commands(ROOT / "tox.ini")
    assert set(commands) == set(ENVS)
    for env, expected in ENVS.items():
        assert any(c.startswith(expected) for c in commands[env]), f"tox -e {env}: {commands[env]}"
        for c in commands[env]:
            tool = shlex.split(c)[0]
            venv_tool(tool)  # raises when the env would fail with "command not found"


def test_a_tox_ini_tox_cannot_load_is_refused(tmp_path: Path) -> None:
    ini = tmp_path / "tox.ini"
    ini.write_text("[tox\nenv_list = py311\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"tox cannot load .*tox\.ini"):
        tox_commands(ini)


def test_a_tox_env_whose_tool_is_not_installed_is_caught() -> None:
    with pytest.raises(FileNotFoundError, match="lint-import is not installed"):
        venv_tool("lint-import")
