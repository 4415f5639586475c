"""The layers point one way (STYLE.md): checked on the import statements of every module.

- The reference federated app never imports the harness: the plugin talks to it over its
  public endpoints, exactly as it talks to a staging federation.
- Third-party adapters are imported only in the modules that wrap them: locust only in
  the locustfile (it monkey-patches with gevent on import), kubernetes only in the kube
  adapter, allure only in the Allure reporter.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gameday"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


MODULES = {p.relative_to(PACKAGE.parent).with_suffix("").as_posix().replace("/", "."): _imports(p)
           for p in PACKAGE.rglob("*.py")}

HARNESS = ("gameday.plugin", "gameday.session", "gameday.drill", "gameday.targets", "gameday.faults",
           "gameday.load", "gameday.observers", "gameday.verdicts", "gameday.reports", "gameday.conformance",
           "gameday.settings")


def test_the_modules_were_found() -> None:
    assert "gameday.fedapp.gateway" in MODULES
    assert "gameday.plugin" in MODULES


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("gameday.fedapp")))
def test_the_reference_app_does_not_import_the_harness(module: str) -> None:
    bad = sorted(i for i in MODULES[module] if i.startswith(HARNESS))
    assert not bad, f"{module} imports harness modules {bad}; the app must stay independent of the plugin"


@pytest.mark.parametrize(("library", "allowed"), [
    ("locust", {"gameday.load.locustfile"}),
    ("kubernetes", {"gameday.targets.kube", "gameday.targets.k8s_client"}),
    ("allure", {"gameday.reports.allure_attach"}),
])
def test_adapters_are_imported_only_where_they_are_wrapped(library: str, allowed: set[str]) -> None:
    users = {m for m, imps in MODULES.items() if any(i == library or i.startswith(library + ".") for i in imps)}
    assert users <= allowed, f"{library} imported outside its adapter: {sorted(users - allowed)}"
