"""The whole-package layers contract (``[tool.importlinter]`` in pyproject.toml) names every
top-level module of gameday: a module added without a place in the layers would escape the
check, and an import cycle through it could come back unseen."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import grimp  # import-linter's graph builder (the test extra's import-linter brings it)

import gameday

ROOT = Path(__file__).resolve().parents[1]


def _whole_package_layers() -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in config["contracts"] if c["type"] == "layers" and not c.get("containers")]
    return [{name.strip() for name in layer.split("|")} for layer in contract["layers"]]


def test_every_top_level_module_has_a_layer() -> None:
    named = set().union(*_whole_package_layers())
    modules = {f"gameday.{m.name}" for m in pkgutil.iter_modules(gameday.__path__)}
    assert modules - named == set(), "modules with no place in the layers contract"
    assert named - modules == set(), "layers naming modules that do not exist"


def test_no_module_is_in_two_layers() -> None:
    layers = _whole_package_layers()
    seen: dict[str, int] = {}
    for i, layer in enumerate(layers):
        for name in layer:
            assert name not in seen, f"{name} is in layers {seen[name]} and {i}"
            seen[name] = i


def test_the_reference_app_imports_only_itself_of_gameday() -> None:
    """Whatever the harness's modules are called (the fedapp contract lists them by name), the
    app's import graph (function-level and TYPE_CHECKING imports included) reaches nothing of
    gameday outside gameday.fedapp but the package itself and its version."""
    graph = grimp.build_graph("gameday", exclude_type_checking_imports=False)
    app = {m for m in graph.modules if m == "gameday.fedapp" or m.startswith("gameday.fedapp.")}
    reached = {imported for m in app for imported in graph.find_modules_directly_imported_by(m)}
    assert reached - app - {"gameday", "gameday.version"} == set()
