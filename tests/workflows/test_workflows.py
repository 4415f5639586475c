"""The GitHub workflows (.github/workflows) pass actionlint, with shellcheck on every ``run:``
block, without a single warning; and actionlint does fail a broken workflow here (the
negative control: so a clean result means the checks ran, not that none did)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.workflows.tooling import ROOT, WORKFLOWS, actionlint, ensure_shellcheck

BROKEN = """\
name: broken
on:
  push:
    branch: main
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v5
        with:
          fetch-dept: 1
      - run: echo ${{ github.event.pull_request.title }}
      - run: |
          files=$(ls *.txt)
          cat $files
      - run: echo "${{ steps.nosuch.outputs.x }}"
"""


@pytest.fixture(scope="module")
def shellcheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The parent of the base temp dir is shared by every xdist worker of the run.
    return ensure_shellcheck(tmp_path_factory.getbasetemp().parent)


def _workflows() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml"))


def _load(name: str) -> dict[Any, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{name} is not a mapping"
    return data


def test_both_workflows_exist() -> None:
    assert [p.name for p in _workflows()] == ["ci.yml", "gameday.yml"]


def test_workflows_pass_actionlint_without_a_warning(shellcheck: Path) -> None:
    lint = actionlint(*_workflows(), shellcheck=shellcheck)
    assert lint.returncode == 0 and lint.output == "", lint.output


def test_actionlint_fails_a_broken_workflow(tmp_path: Path, shellcheck: Path) -> None:
    """Each class of mistake is reported: a mistyped key, an unknown action input, script
    injection, a shellcheck finding in a run block, a reference to a step that does not exist."""
    wf = tmp_path / ".github" / "workflows" / "broken.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(BROKEN, encoding="utf-8")
    lint = actionlint(wf, shellcheck=shellcheck)
    assert lint.returncode == 1, lint.output
    for expected in ('"branch"', '"fetch-dept"', "potentially untrusted", "shellcheck reported issue",
                     "SC2086", '"nosuch"'):
        assert expected in lint.output, f"actionlint did not report {expected}:\n{lint.output}"


def test_the_scaffolded_workflow_passes_actionlint(tmp_path: Path, shellcheck: Path) -> None:
    """``gameday init --ci github`` writes a workflow into the user's project: it lints clean too."""
    from gameday.cli.scaffold import init

    init(tmp_path, ci="github", say=lambda line: None)
    lint = actionlint(tmp_path / ".github" / "workflows" / "gameday.yml", shellcheck=shellcheck)
    assert lint.returncode == 0 and lint.output == "", lint.output


def missing_package_lines(ci_run: str, ci: dict[Any, Any]) -> list[str]:
    """The lines of .ci/run that install Debian packages which no step of ci.yml installs."""
    runs = "\n".join(s.get("run", "") for s in ci["jobs"]["test"]["steps"]).splitlines()
    missing = []
    for line in ci_run.splitlines():
        if "debian-packages.sh" not in line or line.lstrip().startswith("#"):
            continue
        words = shlex.split(line)
        pkgs = next((w.split("=", 1)[1] for w in words if w.startswith("GAMEDAY_FOREIGN_PACKAGES=")), None)
        same = f"GAMEDAY_FOREIGN_PACKAGES={pkgs}" if pkgs is not None else None
        installs = [r for r in runs if "debian-packages.sh" in r]
        if not any(same in r if same is not None else "GAMEDAY_FOREIGN_PACKAGES" not in r for r in installs):
            missing.append(line)
    return missing


def test_ci_installs_every_debian_package_ci_run_installs() -> None:
    """ci.yml runs ``make test`` after the same package scripts .ci/run calls (one list each)."""
    ci_run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci = _load("ci.yml")
    assert "debian-packages.sh" in ci_run, ".ci/run installs no Debian packages? (the check would pass vacuously)"
    assert missing_package_lines(ci_run, ci) == []
    runs = "\n".join(s.get("run", "") for s in ci["jobs"]["test"]["steps"])
    assert re.search(r"(?m)^make test$", runs), "ci.yml does not run the README's test command (make test)"
    on = ci.get("on", ci.get(True))  # YAML 1.1 reads a bare `on` as True
    assert {"push", "pull_request"} <= set(on)


def test_a_package_line_ci_yml_lacks_is_found() -> None:
    ci = _load("ci.yml")
    for step in ci["jobs"]["test"]["steps"]:
        if "run" in step:
            step["run"] = "\n".join(r for r in step["run"].splitlines() if "prometheus" not in r)
    line = "GAMEDAY_FOREIGN_PACKAGES=prometheus tests/foreign/debian-packages.sh"
    assert missing_package_lines(f"#!/bin/sh\n{line}\ntests/foreign/debian-packages.sh\n", ci) == [line]


MUST_ALWAYS = ("restore", "Delete the clusters", "Report", "history", "Upload")


def steps_skipped_after_a_failure(wf: dict[Any, Any]) -> list[str]:
    """Cleanup and upload steps after the first suite that would not run once a suite failed."""
    steps = wf["jobs"]["gameday"]["steps"]
    names = [s.get("name", s.get("uses", "")) for s in steps]
    suites = names.index("Game-day suites")
    return [s.get("name", "") for s in steps[suites + 1:]
            if any(w in s.get("name", "") for w in MUST_ALWAYS) and "always()" not in str(s.get("if", ""))]


def test_nightly_always_restores_and_deletes_after_the_suites() -> None:
    """After the first step that can break the federation, every cleanup and upload step runs
    whatever happened before it (``always()``), and one nightly run goes at a time."""
    wf = _load("gameday.yml")
    assert wf["concurrency"]["cancel-in-progress"] is False and wf["concurrency"]["group"]
    assert steps_skipped_after_a_failure(wf) == []
    text = (WORKFLOWS / "gameday.yml").read_text(encoding="utf-8")
    assert "gameday restore" in text and "kind delete cluster" in text and "gameday report" in text
    assert "sha256sum --check" in text and re.search(r"KIND_SHA256: [0-9a-f]{64}\n", text)
    assert "restore-keys: gameday-history-" in text  # the trend grows across nights
    uses = re.findall(r"uses: (\S+)", text + (WORKFLOWS / "ci.yml").read_text(encoding="utf-8"))
    assert uses and all(re.search(r"@(v\d+|[0-9a-f]{40})$", u) for u in uses), f"unpinned actions: {uses}"


def test_a_restore_step_without_always_is_found() -> None:
    wf = _load("gameday.yml")
    step = next(s for s in wf["jobs"]["gameday"]["steps"] if "gameday restore" in s.get("run", ""))
    del step["if"]
    assert steps_skipped_after_a_failure(wf) == [step["name"]]


def test_nightly_creates_every_cluster_of_the_kind_topology() -> None:
    """The clusters the workflow creates and deletes are exactly the kind configs under
    clusters/kind/ (one per region plus global): a region added there is drilled too."""
    from gameday.model.topology import load_topology

    topo = load_topology(ROOT / "clusters" / "kind" / "topology.yaml")
    clusters = ["global", *(r.name for r in topo.regions)]  # the kind target's: the global tier's, then one a region
    text = (WORKFLOWS / "gameday.yml").read_text(encoding="utf-8")
    loops = re.findall(r"for c in ([a-z0-9 ]+); do", text)
    assert len(loops) == 3, loops  # create, load the image, delete
    for loop in loops:
        assert loop.split() == clusters, f"workflow clusters {loop!r} != {clusters}"
    for c in clusters:
        assert (ROOT / "clusters" / "kind" / f"{c}.yaml").is_file()


def test_the_python_the_nightly_runs_names_the_image_the_kind_target_loads() -> None:
    """The workflow's inline ``python -c`` (the image tag it builds) runs here and prints the
    tag the kind target expects (a moved module would fail the night, not the review)."""
    import subprocess
    import sys

    from gameday.targets.k8s.objects import APP_IMAGE

    text = (WORKFLOWS / "gameday.yml").read_text(encoding="utf-8")
    snippets = re.findall(r'python -c "([^"]+)"', text)
    assert snippets, "no inline python in gameday.yml"
    for code in snippets:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, f"{code!r} fails: {r.stderr[-500:]}"
        assert r.stdout.strip() == APP_IMAGE
