"""The fault-adding examples users copy (the faults model's docstring, the how-to page) run as written."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import gameday.faults.model
from gameday.faults import FAULTS
from gameday.targets.local.faults import LOCAL_ACTIONS

HOWTO = Path(__file__).resolve().parents[2] / "docs" / "howto" / "write-a-fault.md"


def _docstring_example() -> str:
    doc = gameday.faults.model.__doc__ or ""
    block = doc.split("without touching gameday::", 1)[1].split("\nand a suite", 1)[0]
    return textwrap.dedent(block)


def _howto_example() -> str:
    text = HOWTO.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return next(b for b in blocks if "FAULTS.add(" in b and "LOCAL_ACTIONS.register" in b)


@pytest.mark.parametrize("where", ["docstring", "howto"])
def test_the_example_registers_its_fault_and_local_action(where: str) -> None:
    code = _docstring_example() if where == "docstring" else _howto_example()
    assert "agent_unready" in code
    try:
        exec(compile(code, f"<{where} example>", "exec"), {})
        assert FAULTS["agent_unready"].needs_region
        assert "agent_unready" in LOCAL_ACTIONS
    finally:
        FAULTS.unregister("agent_unready")
        LOCAL_ACTIONS.unregister("agent_unready")
