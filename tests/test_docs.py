"""The documentation says what the code does.

- the reference pages (``docs/gen_ref.py``, generated on every ``make docs``) name every
  ``--gameday-*`` option, verdict, fault, ``gameday`` sub-command, topology and profile field,
  source kind and public name, from the code itself; a page on disk that differs from what the
  code generates is reported stale;
- ``pytest --help`` renders every gameday option's help as written (a bare ``%`` in an argparse
  help string would print the whole action instead);
- every page is in the nav, every "DESIGN.md §N" the code cites is a section of docs/design.md,
  the README is short, keeps its two commands and links only to files that exist;
- the examples the how-to pages show run as written.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import gameday
import gameday.verdicts.registry
from gameday.cli import main as cli
from gameday.faults import FAULTS
from gameday.model.topology import Topology
from gameday.observers.kinds import SOURCE_KINDS
from gameday.runtime.settings import OPTIONS
from gameday.targets.profile import Profile, parse_profile
from gameday.verdicts.registry import VERDICTS, markdown_table

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _gen_ref() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gameday_docs_gen_ref", DOCS / "gen_ref.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen_ref() -> types.ModuleType:
    return _gen_ref()


@pytest.fixture(scope="module")
def pages(gen_ref: types.ModuleType) -> dict[str, str]:
    rendered: dict[str, str] = gen_ref.render()
    return rendered


# -- the generated reference ----------------------------------------------------------------------
def test_every_option_of_the_help_group_is_in_the_options_page(pages: dict[str, str],
                                                                gen_ref: types.ModuleType) -> None:
    page = pages["options.md"]
    registered = [names[0] for names, _ in gen_ref.plugin_options().options]
    assert registered == [f"--gameday-{o.name}" for o in OPTIONS], "the page is built from what the plugin registers"
    for o in OPTIONS:
        assert f"{{#gameday-{o.name}}}" in page, f"--gameday-{o.name} has no section"
        assert f"`{o.dest}`" in page and f"`{o.env}`" in page, f"--gameday-{o.name}: ini or env missing"
        assert o.kind.expected in page
    assert "more than 50 % above the median" in page  # the help as --help renders it
    assert "option_strings" not in page


def test_every_verdict_is_in_the_verdicts_page(pages: dict[str, str]) -> None:
    page = pages["verdicts.md"]
    assert markdown_table() in page
    for name in VERDICTS:
        assert f"`{name}`" in page, name


def test_every_fault_is_in_the_faults_page(pages: dict[str, str]) -> None:
    page = pages["faults.md"]
    for fault in FAULTS.values():
        assert f"{{#{fault.name}}}" in page and fault.describe() in page, fault.name


def test_every_cli_sub_command_and_argument_is_in_the_cli_page(pages: dict[str, str],
                                                               gen_ref: types.ModuleType) -> None:
    page = pages["cli.md"]
    subs, _ = gen_ref._subparsers(cli._parser())
    assert {"up", "drill", "restore", "down", "init", "report", "inconclusive"} <= set(subs)
    for name, sub in subs.items():
        assert f"{{#gameday-{name}}}" in page, name
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert flag in page, f"gameday {name} {flag}"


def _fields(root: type[BaseModel]) -> Iterator[tuple[type[BaseModel], str]]:
    seen: set[type[BaseModel]] = set()
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            yield model, name
            todo += _gen_ref().models_in(info.annotation)


@pytest.mark.parametrize(("page_name", "root"), [("topology.md", Topology), ("profile.md", Profile)])
def test_every_schema_field_is_in_its_page(pages: dict[str, str], page_name: str, root: type[BaseModel]) -> None:
    page = pages[page_name]
    fields = list(_fields(root))
    assert len(fields) > 20
    for model, name in fields:
        section = page.split(f"{{#{model.__name__.lower()}}}", 1)
        assert len(section) == 2, f"{page_name}: no section for {model.__name__}"
        assert f"| `{name}` |" in section[1].split("\n## ", 1)[0], f"{page_name}: {model.__name__}.{name}"


def test_every_source_kind_and_public_name_is_documented(pages: dict[str, str]) -> None:
    for kind in SOURCE_KINDS.values():
        assert f"| `{kind.role}` | `{kind.name}` |" in pages["profile.md"], kind.key
    for name in gameday.__all__:
        if name != "__version__":
            assert f"| `{name}` |" in pages["api.md"], name


def test_a_stale_page_on_disk_is_reported(gen_ref: types.ModuleType, tmp_path: Path) -> None:
    assert gen_ref.main(["--check", "--dest", str(tmp_path)]) == 1  # nothing generated yet
    assert gen_ref.main(["--dest", str(tmp_path)]) == 0
    assert gen_ref.main(["--check", "--dest", str(tmp_path)]) == 0
    page = tmp_path / "verdicts.md"
    page.write_text(page.read_text(encoding="utf-8").replace("`switchover`", "`switch_over`"), encoding="utf-8")
    assert gen_ref.stale(tmp_path) == ["verdicts.md"]
    assert gen_ref.main(["--check", "--dest", str(tmp_path)]) == 1


# -- pytest --help ----------------------------------------------------------------------------------
def test_pytest_help_renders_every_gameday_option_as_written(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:locust", "-p", "no:cacheprovider", "--help"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "option_strings" not in out.stdout, "an option's help has a bare % (argparse: write %%)"
    flat = " ".join(out.stdout.split())
    assert "more than 50 % above the median of its previous runs" in flat
    for o in OPTIONS:
        assert f"--gameday-{o.name}" in out.stdout


# -- the site's structure ---------------------------------------------------------------------------
def test_every_page_is_in_the_nav_and_every_nav_entry_exists(gen_ref: types.ModuleType) -> None:
    nav = re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?(\S+\.md)\s*$", (REPO / "mkdocs.yml").read_text(encoding="utf-8"),
                     flags=re.M)
    written = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if p.parent.name != "reference"}
    generated = {f"reference/{name}" for name in gen_ref.PAGES}
    assert sorted(nav) == sorted(written | generated)


def test_every_design_citation_is_a_section_of_the_design_page() -> None:
    design = (DOCS / "design.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## (\d+)\. .*\{#section-\1\}$", design, flags=re.M))
    assert sections == {str(n) for n in range(1, 11)}
    cited: set[str] = set()
    for path in [*REPO.glob("gameday/**/*.py"), *REPO.glob("suites/**/*.py"), *REPO.glob("tests/**/*.py")]:
        text = path.read_text(encoding="utf-8")
        cited |= set(re.findall(r"DESIGN(?:\.md)?,? (?:§\s*|section )(\d+)", text))
    assert cited, "no citation found: the pattern is wrong"
    assert cited <= sections, f"cited sections missing from docs/design.md: {sorted(cited - sections)}"


def test_the_readme_is_short_keeps_its_two_commands_and_links_to_files_that_exist() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert 120 <= len(text.splitlines()) <= 200
    assert ("make drill    # run a real game day on the embedded local federation and print its verdicts\n"
            "make test     # lint, type-check, import contracts, the plugin's tests (a real wheel install too), "
            "the suites\n") in text
    assert "docs/design.md" in text.split("## The two commands", 1)[0], "say near the top where DESIGN.md is"
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not link.startswith("http"):
            assert (REPO / link).exists(), link


# -- the examples the pages show --------------------------------------------------------------------
def _blocks(page: str, lang: str = "python") -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), flags=re.S)


def test_the_verdict_how_to_shows_the_registry_docstring_example() -> None:
    doc = gameday.verdicts.registry.__doc__ or ""
    example = textwrap.dedent(doc.split("without touching gameday (", 1)[1].split("::\n", 1)[1]
                              .split("\nand a test then", 1)[0]).strip()
    assert any(b.strip() == example for b in _blocks("howto/write-a-verdict.md"))


def test_the_source_kind_example_registers_a_kind_a_profile_can_name() -> None:
    (code,) = [b for b in _blocks("howto/write-a-source.md") if "SOURCE_KINDS.add(" in b]
    exec(compile(code, "<write-a-source.md>", "exec"), {})
    try:
        data = {"name": "t", "service": {"fqdn": "app.t.test", "dns": {"server": "127.0.0.1"}, "load": {"port": 80}},
                "regions": [{"name": "a", "gateway": "127.0.1.1", "weight": 1},
                            {"name": "b", "gateway": "127.0.2.1", "weight": 1}],
                "control_plane": {"version": {"k8gb": {"url": "https://k8gb.test/status"}}}}
        profile = parse_profile(data, "t.yaml")
        assert profile.control_plane is not None
        source = profile.control_plane.version.build(_build_context())
        assert source.describe() == "k8gb Gslb status at https://k8gb.test/status"
    finally:
        SOURCE_KINDS.remove("version", "k8gb")


def _build_context() -> Any:
    from gameday.observers.kinds import BuildContext

    return BuildContext(REPO)


def test_the_reporter_example_writes_one_line_per_drill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gameday.model.timeline import FaultWindow, RequestRec, Timeline
    from gameday.runtime.settings import SLO
    from gameday.verdicts.result import DrillResult

    (code,) = [b for b in _blocks("howto/write-a-reporter.md") if "pytest_runtest_logreport" in b]
    namespace: dict[str, Any] = {}
    exec(compile(code, "<write-a-reporter.md>", "exec"), namespace)
    tl = Timeline()
    tl.extend_requests([RequestRec(1.0 + i * 0.01, 200, 0.2, "a") for i in range(100)])
    res = DrillResult(fault=FaultWindow("gateway_down", "b", 0.95, 1.0, 4.0, 4.5), timeline=tl, slo=SLO(),
                      survivors=("gateway-a",), capacity={"a": 100.0, "b": 100.0}, offered=30, margin=0.2,
                      lost=("b",), started=0.0)
    res.assert_error_ratio_under()
    summary = {**res.summary(), "verdicts": [v.as_dict() for v in res.verdicts]}
    with_figure = {**summary, "switchover": {"name": "switchover", "value_s": 0.82, "resolution_s": 0.14}}
    report = types.SimpleNamespace(nodeid="t.py::test_x", user_properties=[
        ("gameday_drill", json.dumps(summary, default=str)), ("gameday_na", "x"),
        ("gameday_drill", json.dumps(with_figure, default=str))])
    monkeypatch.chdir(tmp_path)
    namespace["pytest_runtest_logreport"](report)
    lines = (tmp_path / "drills.log").read_text(encoding="utf-8").splitlines()
    assert lines == ["t.py::test_x gateway_down b switchover=None verdicts={'error_ratio': 'pass'}",
                     "t.py::test_x gateway_down b switchover=0.82 verdicts={'error_ratio': 'pass'}"]
