"""gameday as a distribution: sdist and wheel that ``twine check`` accepts, and a real
install (not the editable one) that works outside this checkout.

The wheel is built once, installed into a fresh virtualenv in a temporary directory far
from the checkout, and used there as a team would: ``gameday drill``, ``gameday init``
followed by ``pytest``, the shipped conformance suite by ``--pyargs``, and the README's
example drill as written.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

import gameday

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("packaging")]


def _run(argv: list[str], cwd: Path, timeout: float = 300, env: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})


def _ok(r: subprocess.CompletedProcess[str]) -> str:
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"{r.args} exited {r.returncode}:\n{out[-6000:]}"
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a snapshot of the source tree: other tests running beside this one write
    # and remove files under the checkout (reports, caches) while the sdist copies it.
    src = tmp_path_factory.mktemp("src") / "gameday"
    caches = shutil.ignore_patterns("*.egg-info", "__pycache__", ".*_cache", ".hypothesis")

    def ignore(directory: str, names: list[str]) -> set[str]:
        top = {".git", ".venv", "reports", "build", "dist"} if Path(directory) == REPO else set()
        return set(caches(directory, names)) | (top & set(names))

    shutil.copytree(REPO, src, ignore=ignore)
    out = tmp_path_factory.mktemp("dist")
    # uv as build's installer of the isolated build environment: the same build, in seconds.
    _ok(_run([sys.executable, "-m", "build", "--installer", "uv", "--outdir", str(out), str(src)], cwd=out,
             timeout=600))
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (whl,) = dist.glob("gameday-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv (outside the checkout) with the wheel and its declared dependencies
    installed from the package index; yields its bin/.

    Installed with uv, which resolves and installs like pip but fetches the ~80 dependencies
    in parallel: about 2 s against pip's 110 s here (spent waiting on the index one package at
    a time), which kept one of CI's two workers idle for most of that."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    bin_dir = env_dir / "bin"
    _ok(_run([sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", str(bin_dir / "python"),
              str(wheel)], cwd=env_dir, timeout=900))
    return bin_dir


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty directory that is not a gameday checkout (nor inside one)."""
    d = tmp_path / "team-project"
    d.mkdir()
    assert not any(p.name == "pyproject.toml" for p in d.parents if (p / "gameday" / "plugin" / "__init__.py").exists())
    return d


def _clean_env(bin_dir: Path) -> dict[str, str]:
    # No PYTHONPATH into the checkout, and the venv's commands first on PATH.
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": "",
            "VIRTUAL_ENV": str(bin_dir.parent)}


def test_the_packages_list_is_complete() -> None:
    """pyproject lists packages explicitly (for the suites/ and clusters/ mapping): none forgotten."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {p.parent.relative_to(REPO).as_posix().replace("/", ".")
               for p in (REPO / "gameday").rglob("__init__.py")}
    mapped = {"gameday.suites", "gameday.suites.conformance", "gameday.suites.gameday", "gameday.clusters"}
    assert listed == on_disk | mapped


def test_sdist_and_wheel_pass_twine_check(dist: Path) -> None:
    files = sorted(str(p) for p in dist.iterdir())
    assert any(f.endswith(".tar.gz") for f in files) and any(f.endswith(".whl") for f in files), files
    out = _ok(_run([sys.executable, "-m", "twine", "check", "--strict", *files], cwd=dist))
    assert out.count("PASSED") == 2, out


def test_the_wheel_carries_suites_topologies_and_types_but_no_tests(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in ("gameday/py.typed", "gameday/clusters/local.yaml", "gameday/clusters/kind/Dockerfile",
                 "gameday/clusters/manifests/a.yaml", "gameday/suites/gameday/test_gateway_outage.py",
                 "gameday/suites/conformance/test_r05_versions.py", "gameday/conformance/fixtures.py"):
        assert must in names, f"{must} missing from {wheel.name}"
    assert not [n for n in names if n.startswith(("tests/", "bench/", "suites/", "clusters/"))]
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert f"Version: {gameday.__version__}" in text
    assert "Description-Content-Type: text/markdown" in text and "Classifier: Framework :: Pytest" in text
    entry_points = zipfile.ZipFile(wheel).read(meta.replace("METADATA", "entry_points.txt")).decode()
    assert "gameday = gameday.cli.main:main" in entry_points and "gameday = gameday.plugin" in entry_points


def test_gameday_drill_runs_outside_a_checkout(installed: Path, project: Path) -> None:
    # (client recovery over 3 s, not the default 10: what is tested is the installed wheel)
    out = _ok(_run([str(installed / "gameday"), "drill", "--seed", "3", "--gameday-recovery-window=3"], cwd=project,
                   env=_clean_env(installed)))
    assert "gameday drill verdicts" in out and "test_random_gateway_outage" in out
    assert str(REPO) not in out.split("gameday drill verdicts")[0].split("rootdir")[-1], out


def _readme_example() -> str:
    section = (REPO / "README.md").read_text().split("## Writing a game day", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_init_then_pytest_runs_the_scaffolded_drill_conformance_and_the_readme_example(
        installed: Path, project: Path) -> None:
    """A team's first hour: ``gameday init``, the README's example drill saved as written next
    to what init wrote, then ``pytest``. (One pytest session, so one federation, for both.)"""
    env = _clean_env(installed)
    out = _ok(_run([str(installed / "gameday"), "init"], cwd=project, env=env))
    assert "wrote    drills/test_gateway_drill.py" in out
    (project / "drills" / "test_my_drill.py").write_text(_readme_example())
    out = _ok(_run([str(installed / "python"), "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                    "--gameday-recovery-window=3"], cwd=project, env=env))
    assert "4 passed" in out, out
    assert "PASSED drills/test_my_drill.py::test_random_gateway_outage" in out, out
    assert "rules passed 2, failed 0" in out, out
    again = _ok(_run([str(installed / "gameday"), "init"], cwd=project, env=env))
    assert "kept     drills/test_gateway_drill.py" in again  # never overwritten without --force


def test_the_shipped_conformance_suite_runs_by_pyargs(installed: Path, project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no:locust"\n')
    out = _ok(_run([str(installed / "python"), "-m", "pytest", "-p", "no:cacheprovider", "--pyargs",
                    "gameday.suites.conformance", "-m", "conformance", "-k",
                    "static_weights or static_n_minus_1 or r14"],
                   cwd=project, env=_clean_env(installed)))
    assert re.search(r"2 passed, 1 skipped, \d+ deselected", out), out
    assert "rules passed 2, failed 0, skipped 1" in out, out
