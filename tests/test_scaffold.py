"""``gameday init``: what it writes, what it never overwrites, and the config it adds.

(The scaffolded project running for real, from an installed wheel, is in
``tests/packaging/test_distribution.py``.)
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from gameday.cli.scaffold import init
from gameday.errors import ConfigError
from gameday.model.topology import load_topology

FILES = ["drills/topology.yaml", "drills/test_gateway_drill.py", "drills/test_conformance.py", "conftest.py"]


def _init(root: Path, **kw: object) -> list[str]:
    lines: list[str] = []
    init(root, say=lines.append, **kw)  # type: ignore[arg-type]
    return lines


def test_init_writes_a_runnable_project_and_says_so(tmp_path: Path) -> None:
    lines = _init(tmp_path)
    for rel in FILES:
        assert (tmp_path / rel).is_file()
        assert f"wrote    {tmp_path / rel}" in lines
    topo = load_topology(tmp_path / "drills" / "topology.yaml")  # valid, and the default's regions
    assert [r.name for r in topo.regions] == ["a", "b", "c"]
    assert (tmp_path / "drills" / "topology.yaml").read_text().startswith("# The federation this project's")
    ini = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert ini["addopts"] == "-p no:locust"
    assert ini["gameday_topology"] == "drills/topology.yaml" and ini["testpaths"] == ["drills"]
    compile((tmp_path / "drills" / "test_conformance.py").read_text(), "test_conformance.py", "exec")


def test_init_never_overwrites_without_force_and_never_a_conftest(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("# the team's own\n")
    _init(tmp_path)
    (tmp_path / "drills" / "test_gateway_drill.py").write_text("# edited by the team\n")
    lines = _init(tmp_path)
    assert (tmp_path / "drills" / "test_gateway_drill.py").read_text() == "# edited by the team\n"
    assert any("kept" in x and "test_gateway_drill.py" in x and "--force overwrites it" in x for x in lines)
    lines = _init(tmp_path, force=True)
    assert "@pytest.mark.gameday" in (tmp_path / "drills" / "test_gateway_drill.py").read_text()
    assert (tmp_path / "conftest.py").read_text() == "# the team's own\n"  # not even with --force
    assert any("kept" in x and "conftest.py" in x for x in lines)


def test_init_appends_to_a_pyproject_without_the_section_and_prints_for_one_with_it(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "pyproject.toml").write_text('[project]\nname = "team"\n')
    lines = _init(a)
    data = tomllib.loads((a / "pyproject.toml").read_text())
    assert data["project"]["name"] == "team" and data["tool"]["pytest"]["ini_options"]["addopts"] == "-p no:locust"
    assert any(x.startswith("appended") for x in lines)

    original = '[tool.pytest.ini_options]\naddopts = "-q"\n'
    (b / "pyproject.toml").write_text(original)
    lines = _init(b)
    assert (b / "pyproject.toml").read_text() == original
    said = "\n".join(lines)
    assert "add these lines to it" in said and 'addopts = "-p no:locust"' in said


def test_init_ci_github_writes_a_scheduled_workflow_that_always_restores(tmp_path: Path) -> None:
    _init(tmp_path, ci="github")
    wf = yaml.safe_load((tmp_path / ".github" / "workflows" / "gameday.yml").read_text())
    on = wf[True]  # YAML 1.1 reads the key `on` as true
    assert on["schedule"][0]["cron"] and "workflow_dispatch" in on
    assert wf["concurrency"]["group"] == "gameday"
    steps = wf["jobs"]["gameday"]["steps"]
    restore = next(s for s in steps if "gameday restore" in s.get("run", ""))
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert restore["if"] == "always()" and upload["if"] == "always()"


def test_init_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a directory"):
        init(tmp_path / "missing", say=lambda s: None)
    with pytest.raises(ConfigError, match="expected one of github"):
        init(tmp_path, ci="gitlab", say=lambda s: None)
    r = subprocess.run([sys.executable, "-m", "gameday.cli", "init", "--ci", "gitlab"], cwd=tmp_path,
                       capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "invalid choice: 'gitlab'" in r.stderr
    assert not list(tmp_path.iterdir())
