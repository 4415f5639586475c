"""What a JUnit XML report of a gameday run says about tests a starved harness left undecided.

A test whose drill came out inconclusive (:class:`gameday.errors.HarnessStarved`: the observers could
not keep up on a busy machine, so the run is neither a pass nor a fail of the federation) carries two
JUnit properties: ``gameday_inconclusive`` (why) and ``gameday_nodeid`` (its pytest node id). A CI
that runs its game days in parallel reads them back with ``gameday inconclusive REPORT.xml`` and runs
just those tests again on a quieter machine (``make test`` does: one at a time, after the parallel pass).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from gameday.errors import ConfigError

INCONCLUSIVE_PROPERTY = "gameday_inconclusive"
"""The property of a testcase whose failure was a starved harness; its value is the reason."""
NODEID_PROPERTY = "gameday_nodeid"
"""The property carrying the testcase's pytest node id (JUnit's classname and name lose it)."""


@dataclass(frozen=True)
class Undecided:
    """One inconclusive testcase of a JUnit report."""

    nodeid: str
    reason: str


def inconclusive_tests(path: Path) -> list[Undecided]:
    """The inconclusive testcases of the JUnit XML report at *path*, in report order, each once.

    Raises :class:`ConfigError` naming the file when it is missing or not XML; a testcase marked
    inconclusive without its node id (a report written before gameday recorded it) is named too."""
    try:
        # the run's own report, not untrusted input (and expat >= 2.4.1 refuses entity expansion bombs)
        root = ET.parse(path).getroot()  # noqa: S314
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such JUnit report") from None
    except (OSError, ET.ParseError) as exc:
        raise ConfigError(f"{path}: not a readable JUnit XML report: {exc}") from None
    found: dict[str, Undecided] = {}
    for case in root.iter("testcase"):
        props = {p.get("name"): p.get("value", "") for p in case.iter("property")}
        if INCONCLUSIVE_PROPERTY not in props:
            continue
        nodeid = props.get(NODEID_PROPERTY)
        if not nodeid:
            raise ConfigError(f"{path}: testcase {case.get('classname')}::{case.get('name')} is inconclusive "
                              f"but carries no {NODEID_PROPERTY} property (written by an older gameday?)")
        found.setdefault(nodeid, Undecided(nodeid, props[INCONCLUSIVE_PROPERTY] or "harness starved"))
    return list(found.values())
