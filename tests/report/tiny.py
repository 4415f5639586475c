"""Small, real allure-pytest result sets for the report tests: a two-test project run with
``pytest --alluredir`` in a subprocess (about 2 s), with nested steps, a PNG attachment,
an HTML table, a CSV, and the ``environment.properties`` and ``categories.json`` a
project's conftest writes (the way Allure documents it)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

STEPS = ("steady state", "inject gateway_down a", "observe", "verdict: switchover")
"""The top-level steps of the tiny drill test, in order."""
NESTED_STEP = "baseline 60 req/s"
"""A step inside "steady state"."""
FAIL_MESSAGE = "switchover 4.00 s is above the limit 3.00 s"
ENVIRONMENT = {"target": "local", "topology": "tiny-two-regions"}
CATEGORY = "SLO breaches"

TEST_FILE = f'''
import os
import allure
from pathlib import Path

@allure.feature("gateway_down")
def test_tiny_drill():
    with allure.step({STEPS[0]!r}):
        with allure.step({NESTED_STEP!r}):
            pass
    with allure.step({STEPS[1]!r}):
        allure.attach.file(Path(__file__).with_name("timeline.png"), name="timeline",
                           attachment_type=allure.attachment_type.PNG)
    with allure.step({STEPS[2]!r}):
        allure.attach("t_s,served_a\\n0.0,30\\n0.5,0\\n", name="timeline data",
                      attachment_type=allure.attachment_type.CSV)
    with allure.step({STEPS[3]!r}):
        allure.attach("<table><tr><td>switchover</td><td>0.5 s</td></tr></table>", name="verdicts",
                      attachment_type=allure.attachment_type.HTML)
        assert os.environ.get("TINY_FAIL") != "1", {FAIL_MESSAGE!r}

def test_tiny_versions():
    with allure.step("verdict: versions"):
        pass
'''

CONFTEST = f'''
import json
from pathlib import Path

def pytest_sessionfinish(session):
    out = Path(session.config.option.allure_report_dir)
    out.joinpath("environment.properties").write_text(
        "".join(f"{{k}} = {{v}}\\n" for k, v in {ENVIRONMENT!r}.items()))
    out.joinpath("categories.json").write_text(json.dumps(
        [{{"name": {CATEGORY!r}, "matchedStatuses": ["failed"], "messageRegex": ".*above the limit.*"}}]))
'''


def png(width: int = 120, height: int = 60) -> bytes:
    """A real PNG (RGB, two colour bands), built with zlib: no imaging library needed."""
    rows = b"".join(b"\x00" + bytes((200, 40, 40) if y < height // 2 else (40, 120, 200)) * width
                    for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def write_project(project: Path) -> Path:
    project.mkdir(parents=True, exist_ok=True)
    (project / "test_tiny.py").write_text(TEST_FILE, encoding="utf-8")
    (project / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (project / "timeline.png").write_bytes(png())
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return project


def tiny_runs(project: Path, runs: list[tuple[Path, bool]]) -> list[Path]:
    """Run the tiny project once per (results directory, fail) pair, all at once (they are
    independent; each is one pytest process of ~2 s); returns the results directories."""
    write_project(project)
    procs = []
    for results, fail in runs:
        env = {**os.environ, "TINY_FAIL": "1" if fail else "0"}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:locust", "-p", "no:gameday",
             f"--alluredir={results}", "-o", f"cache_dir={results}.cache", str(project)],
            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for proc, (results, fail) in zip(procs, runs, strict=True):
        try:
            out, _ = proc.communicate(timeout=120)
        finally:
            proc.kill()
        expected = 1 if fail else 0
        assert proc.returncode == expected, f"tiny run {results} exited {proc.returncode}, expected {expected}:\n{out}"
    return [results for results, _ in runs]


def tiny_results(project: Path, results: Path, *, fail: bool = False) -> Path:
    """Run the tiny project once with ``--alluredir results``; returns *results*."""
    return tiny_runs(project, [(results, fail)])[0]
