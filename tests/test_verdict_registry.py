"""The one table of verdicts (:mod:`gameday.verdicts.registry`): it names every assertion of a
drill's result, the generated reference lists what it says, and the "How to add a verdict" example works as
written: a verdict registered from a conftest gets its column in the verdict table, is
judged by ``assert_verdict``, and is n/a with its reason when its input is missing (on
hand-made timelines, and in a real drill through pytester)."""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

import gameday.verdicts.registry
from gameday.model.timeline import FaultWindow, RequestRec, Timeline
from gameday.reports import table
from gameday.runtime.settings import SLO
from gameday.verdicts.registry import VERDICTS, markdown_table
from gameday.verdicts.result import DrillResult

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _example() -> str:
    """The docstring's example, as a user copies it."""
    doc = gameday.verdicts.registry.__doc__ or ""
    block = doc.split("without touching gameday (", 1)[1].split("::\n", 1)[1].split("\nand a test then", 1)[0]
    return textwrap.dedent(block)


@pytest.fixture
def p99_registered() -> Iterator[None]:
    exec(compile(_example(), "<registry docstring example>", "exec"), {})
    try:
        yield
    finally:
        VERDICTS.unregister("p99_latency")


def _result(requests: list[RequestRec]) -> DrillResult:
    tl = Timeline()
    tl.extend_requests(requests)
    return DrillResult(fault=FaultWindow("gateway_down", "b", 0.95, 1.0, 4.0, 4.5), timeline=tl, slo=SLO(),
                       survivors=("gateway-a",), capacity={"a": 100.0, "b": 100.0}, offered=30, margin=0.2,
                       lost=("b",), started=0.0)


def _cell(res: DrillResult, column: str) -> str:
    head, row = table.drill_rows([{**res.summary(), "test": "t.py::test_x"}])
    return row[head.index(column)]


def test_every_assertion_of_a_result_is_named_by_one_entry() -> None:
    methods = {n for n in dir(DrillResult) if n.startswith("assert_") and n != "assert_verdict"}
    named = [a for k in VERDICTS.values() for a in k.asserts]
    assert len(named) == len(set(named)), "an assert_* named by two verdicts"
    assert set(named) == methods


def test_the_table_columns_are_the_registry_columns_in_order() -> None:
    head = table.drill_rows([])[0]
    assert head == ["test", "fault", "region", "switchover", "dns converge", "client recovery", "versions",
                    "stale alarms", "headroom", "vs prediction", "data lost", "tasks twice", "stale reads",
                    "write recovery",
                    "vs history",
                    "load (achieved/target rps)"]
    assert [k.column for k in VERDICTS.columns()] == head[3:-2]


def test_the_reference_lists_the_verdicts_as_the_registry_says() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_ref", DOCS / "gen_ref.py")
    assert spec is not None and spec.loader is not None
    gen_ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_ref)
    text = gen_ref.verdicts_page()
    block = re.search(r"<!-- verdicts: generated[^\n]*-->\n(.*?)<!-- end of verdicts -->", text, flags=re.S)
    assert block is not None, "the verdict reference has no generated verdict list"
    assert block.group(1) == markdown_table()
    assert "gameday/verdicts/registry.py" in text


@pytest.mark.usefixtures("p99_registered")
def test_a_registered_verdict_is_judged_shown_and_n_a_without_its_input() -> None:
    reqs = [RequestRec(1.0 + i * 0.01, 200, 0.2, "a") for i in range(100)]
    res = _result(reqs)
    v = res.assert_verdict("p99_latency")
    assert (v.name, v.outcome, v.figure, v.limit) == ("p99_latency", "pass", "200 ms", "1000 ms")
    with pytest.raises(AssertionError, match=r"^p99 latency 200 ms during the fault, limit 100 ms$"):
        res.assert_verdict("p99_latency", limit=0.1)
    assert [(v.name, v.outcome) for v in res.verdicts] == [("p99_latency", "pass"), ("p99_latency", "fail")]
    head = table.drill_rows([])[0]
    assert head[head.index("write recovery") + 1] == "p99 latency", "a plugin's column comes after the built-ins'"
    assert _cell(res, "p99 latency") == "200 ms FAIL"
    no_state = "no state layer (no write path)"
    state_verdicts = {"data_loss": no_state, "data_loss_vs_prediction": no_state, "fencing": no_state,
                      "duplicates": no_state, "stale_reads": no_state, "write_recovery": no_state,
                      "write_recovery_vs_prediction": no_state}
    assert res.not_applicable() == state_verdicts

    bare = _result([])
    assert bare.not_applicable() == {"p99_latency": "no client requests recorded", **state_verdicts}
    v = bare.assert_verdict("p99_latency")
    assert (v.outcome, str(v)) == ("n/a", "n/a: no client requests recorded")
    assert _cell(bare, "p99 latency") == "n/a: no client requests recorded"
    assert _cell(_result(reqs), "p99 latency") == "-"  # not asserted


def test_assert_verdict_names_the_method_of_a_built_in_and_the_known_verdicts() -> None:
    res = _result([])
    with pytest.raises(TypeError, match="asserted by assert_switchover_under, not assert_verdict"):
        res.assert_verdict("switchover")
    with pytest.raises(KeyError, match="no verdict 'p95' is registered; expected one of client_recovery, "):
        res.assert_verdict("p95")
    assert res.verdicts == []


TESTS = """
import pytest

@pytest.mark.gameday
def test_outage_with_load(drill, load):
    with drill.fault("gateway_down", "b") as fault:
        result = drill.observe(fault, 2.0)
    v = result.assert_verdict("p99_latency", limit=5.0)
    assert v.outcome == "pass", v

@pytest.mark.gameday
def test_outage_without_load(drill):
    with drill.fault("gateway_down", "b") as fault:
        result = drill.observe(fault, 1.0)
    result.assert_verdict("p99_latency")
"""


@pytest.mark.slow
def test_a_verdict_from_a_conftest_in_a_real_drill(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")
    pytester.makeconftest(_example())
    pytester.makepyfile(test_p99=TESTS)
    result = pytester.runpytest_subprocess("--gameday-seed=3", "-ra", "--junitxml=junit.xml", timeout=300)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*gameday drill verdicts*",
        "test *vs prediction*p99 latency*vs history*",
        "*test_outage_with_load*gateway_down*b* ms ok*",
        "*test_outage_without_load*gateway_down*n/a: no client requests recorded*",
        "SKIPPED*every verdict this test asserted was not applicable: p99_latency n/a: no client requests recorded",
    ])
    (run,) = (pytester.path / "reports" / "runs").glob("*/run.json")
    drills = {d["test"].split("::")[-1]: d for d in json.loads(run.read_text())["drills"]}
    assert drills["test_outage_without_load"]["not_applicable"] == {
        "p99_latency": "no client requests recorded",
        # the default topology's state layer is sync (Raft): its acknowledgements name no epoch
        "fencing": "no acknowledgement named the primary's epoch (a quorum store has none to fence)"}
    (with_load,) = drills["test_outage_with_load"]["verdicts"]
    assert (with_load["name"], with_load["outcome"], with_load["limit"]) == ("p99_latency", "pass", "5000 ms")
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    props = {(p.get("name"), p.get("value")) for p in cases["test_outage_without_load"].iter("property")}
    assert ("gameday_na", "p99_latency: n/a: no client requests recorded") in props
