"""``gameday init``: scaffold game days in a team's own repository.

Writes, under the project directory (never over an existing file unless ``force``):

- ``drills/topology.yaml``: the default topology, with comments, to edit;
- ``drills/test_gateway_drill.py``: one game day (the README's example);
- ``drills/test_conformance.py``: a selection of the shipped conformance checks;
- ``conftest.py``: only if the project has none;
- the ``[tool.pytest.ini_options]`` lines gameday needs, into ``pyproject.toml`` (created,
  or the section appended when it has none; an existing section is never edited: the
  lines to add are printed instead);
- with ``ci="github"``: ``.github/workflows/gameday.yml``, a nightly game day.

It prints one line per file: written, kept (exists), or what to do by hand.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gameday.errors import ConfigError
from gameday.runtime.resources import clusters_dir
from gameday.version import __version__

CI_CHOICES = ("github",)

_TOPOLOGY_HEADER = """\
# The federation this project's game days run on: edit regions, weights, capacities and
# timings here. It starts as gameday's default (the embedded `local` target, three regions).
# Every field is documented in gameday.model.topology; units are seconds and requests/s.
# Validate it with: gameday up --topology drills/topology.yaml --seconds 0
"""

_DRILL = '''\
"""A game day: disable a randomly chosen region gateway under load and judge the switchover.

Run: pytest drills/test_gateway_drill.py   (the seed is printed; reproduce with --gameday-seed N)
"""

import pytest


@pytest.mark.gameday
def test_random_gateway_outage(drill, load):
    region = drill.pick_region()                 # seeded, recorded
    with drill.fault("gateway_down", region) as fault:
        result = drill.observe_switchover(fault)
    result.assert_switchover_under()             # 180 s unless configured
    result.assert_versions_incremented()
    result.assert_headroom()
    result.assert_no_stale_snapshot_alarms()
    result.assert_as_predicted()                 # as fast as the federation's own timing says
'''

_CONFORMANCE = '''\
"""Conformance rules (gameday's R1-R14) this project checks, selected from the shipped suite.

These two change nothing. Import more checks from gameday.suites.conformance (each module is
one rule; R12, for one, asks the federation's own release mechanism for a new app version and
watches it go region by region), or run the whole suite, self-restoring drills included:

    pytest --pyargs gameday.suites.conformance -m conformance
"""

from gameday.suites.conformance.test_r08_dns_weights import test_r8_dns_answers_follow_static_weights
from gameday.suites.conformance.test_r09_capacity import test_r9_static_n_minus_1_capacity

__all__ = [
    "test_r8_dns_answers_follow_static_weights",
    "test_r9_static_n_minus_1_capacity",
]
'''

_CONFTEST = '''\
"""pytest configuration of this project.

gameday's plugin loads by itself (installed with the package: fixtures federation, load,
drill, slo, topology, view; markers gameday and conformance; options in the `gameday`
group of `pytest --help`). Put this project's own fixtures and hooks here.
"""
'''

_INI_LINES = """\
# locust's own pytest plugin (fixtures `session`, option -H) is not used by gameday and
# clashes with other plugins' names: keep it off.
addopts = "-p no:locust"
testpaths = ["drills"]
gameday_topology = "drills/topology.yaml"
# gameday_target = "local"          # local (embedded), kind, kube
# gameday_reports = "reports"       # run data, ledger, figures
# gameday_switchover_limit = "180"  # seconds
"""

_WORKFLOW = """\
# A nightly game day on the embedded local federation (written by `gameday init --ci github`).
name: gameday

on:
  schedule:
    - cron: "17 3 * * *"
  workflow_dispatch:
    inputs:
      seed:
        description: "seed of the region pick (empty: random, printed in the log)"
        required: false
        default: ""

concurrency:
  group: gameday
  cancel-in-progress: false

jobs:
  gameday:
    runs-on: ubuntu-latest
    timeout-minutes: 60
    env:
      GAMEDAY_SEED: ${{{{ inputs.seed }}}}
    steps:
      - uses: actions/checkout@v5
      - uses: actions/setup-python@v6
        with:
          python-version: "3.11"
      - name: Install
        run: python -m pip install "gameday=={version}"
      - name: Game day
        run: python -m pytest --junitxml=reports/junit.xml --alluredir=reports/allure-results
      - name: Restore whatever a cancelled run left broken
        if: always()
        run: gameday restore --reports reports
      - name: Upload reports
        if: always()
        uses: actions/upload-artifact@v6
        with:
          name: gameday-reports
          path: reports/
"""


@dataclass(frozen=True)
class Planned:
    """One file ``init`` writes: its path and how to produce its content."""

    path: Path
    content: Callable[[], str]
    only_if_absent: bool = False
    """Written only when missing, even with ``force`` (a project's own conftest.py)."""


def _topology() -> str:
    text = (clusters_dir() / "local.yaml").read_text(encoding="utf-8")
    return _TOPOLOGY_HEADER + "\n".join(line for line in text.splitlines()
                                        if not line.startswith("# The default topology")) + "\n"


def plan(root: Path, ci: str | None) -> list[Planned]:
    files = [
        Planned(root / "drills" / "topology.yaml", _topology),
        Planned(root / "drills" / "test_gateway_drill.py", lambda: _DRILL),
        Planned(root / "drills" / "test_conformance.py", lambda: _CONFORMANCE),
        Planned(root / "conftest.py", lambda: _CONFTEST, only_if_absent=True),
    ]
    if ci == "github":
        files.append(Planned(root / ".github" / "workflows" / "gameday.yml",
                             lambda: _WORKFLOW.format(version=__version__)))
    return files


_SECTION = re.compile(r"^\[tool\.pytest\.ini_options\]\s*$", re.MULTILINE)


def _pyproject(root: Path, say: Callable[[str], None]) -> None:
    path = root / "pyproject.toml"
    section = "[tool.pytest.ini_options]\n" + _INI_LINES
    if not path.exists():
        path.write_text(section, encoding="utf-8")
        say(f"wrote    {path}  ([tool.pytest.ini_options] for gameday)")
        return
    text = path.read_text(encoding="utf-8")
    if _SECTION.search(text):
        indented = "".join("    " + line + "\n" for line in _INI_LINES.splitlines())
        say(f"kept     {path}: it has a [tool.pytest.ini_options] section already; add these lines to it:\n"
            + indented.rstrip("\n"))
        return
    with path.open("a", encoding="utf-8") as fh:
        fh.write(("\n" if text and not text.endswith("\n\n") else "") + section)
    say(f"appended {path}  ([tool.pytest.ini_options] for gameday)")


def init(root: Path, *, force: bool = False, ci: str | None = None, say: Callable[[str], None] = print) -> int:
    """Scaffold *root*; returns the number of files written or changed.

    Raises:
        ConfigError: *root* is not a directory, or *ci* is unknown.
    """
    if ci is not None and ci not in CI_CHOICES:
        raise ConfigError(f"gameday init --ci: got {ci!r}, expected one of {', '.join(CI_CHOICES)}")
    if not root.is_dir():
        raise ConfigError(f"gameday init: {root} is not a directory")
    written = 0
    for f in plan(root, ci):
        if f.path.exists() and (f.only_if_absent or not force):
            say(f"kept     {f.path} (exists{'' if f.only_if_absent else '; --force overwrites it'})")
            continue
        f.path.parent.mkdir(parents=True, exist_ok=True)
        f.path.write_text(f.content(), encoding="utf-8")
        say(f"wrote    {f.path}")
        written += 1
    _pyproject(root, say)
    say("next: pytest drills   (a real game day on the embedded local federation; reports under reports/)")
    return written
