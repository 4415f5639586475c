"""Two xdist workers drill one real federation: their fault windows never overlap.

The federation is the reference app, started by the test and known to the runs under test only
through a profile, drilled by a conftest's target: the ``external`` target under another name
(``external`` itself refuses ``-n``), which shares its federation. The profile's one extra fault,
``mark_window``, changes nothing but appends ``inject`` and ``revert`` to a file, so the file
is the order of the fault windows of both workers. Each worker's test first waits at a barrier
for the other's, so both drills start together (an overlap cannot hide behind xdist's start-up).

- ``pytest -n 2`` on that target: the windows alternate (inject, revert, inject,
  revert), and one drill's result says it waited for the other worker's pid;
- negative control: the same run on the same target without the capability
  (``drill_lock_key = None``): the windows overlap (inject, inject, revert, revert).

Each is one ``pytest -n 2`` run: 3 + 6.5 s of drills (the second waits for the first) and the
run's start-up and reports: 22-24 s on this shared 2-core machine at load 3.5, 30-45 s at 10-25.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gameday.targets.local.federation import LocalFederation
from tests.external.conftest import mark_window_profile

pytestmark = pytest.mark.slow

TEST_WINDOWS = """
import os, time
from pathlib import Path
import pytest


def _barrier():
    here = Path(os.environ["GAMEDAY_TEST_BARRIER"])
    here.mkdir(exist_ok=True)
    (here / os.environ.get("PYTEST_XDIST_WORKER", "main")).touch()
    deadline = time.monotonic() + 60
    while len(list(here.iterdir())) < 2:
        assert time.monotonic() < deadline, "the other xdist worker never reached the barrier"
        time.sleep(0.01)


@pytest.mark.parametrize("n", [1, 2])
def test_window(drill, n):
    _barrier()
    with drill.fault("mark_window", baseline=0.5, observe_after=0) as fault:
        drill.observe(fault, 2.0)
"""

CONFTEST = """
from gameday.targets.profile import load_profile
from gameday.targets.external import ExternalTarget


class Shared(ExternalTarget):
    # The external target under another name (the external target itself refuses -n).
    name = "shared"


class Unshared(Shared):
    # The same without the SharedFederation capability: its drills are not serialised.
    name = "unshared"
    drill_lock_key = None


def pytest_gameday_target_names(config):
    return ["shared", "unshared"]


def pytest_gameday_make_target(config, name, topology, settings, workdir):
    cls = {"shared": Shared, "unshared": Unshared}.get(name)
    return None if cls is None else cls(load_profile(settings.profile), workdir)
"""


def _run(pytester: pytest.Pytester, fed: LocalFederation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         target: str) -> tuple[list[str], list[dict[str, object]]]:
    profile, events = mark_window_profile(fed, tmp_path)
    pytester.makepyfile(test_windows=TEST_WINDOWS)
    pytester.makeconftest(CONFTEST)
    monkeypatch.setenv("GAMEDAY_TEST_BARRIER", str(tmp_path / "barrier"))
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "load", f"--gameday-target={target}",
                                           f"--gameday-profile={profile}", "--gameday-seed=5",
                                           "--gameday-drill-lock-timeout=60", timeout=240)
    result.assert_outcomes(passed=2)
    summaries = [json.loads(p.read_text()) for p in (pytester.path / "reports").glob("runs/*/drills/*/figures-0.json")]
    assert len(summaries) == 2, summaries
    return events.read_text().split(), summaries


def test_two_workers_drilling_one_federation_take_turns(
        pytester_ini: pytest.Pytester, reference_federation: LocalFederation, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    windows, summaries = _run(pytester_ini, reference_federation, tmp_path, monkeypatch, "shared")
    assert windows == ["inject", "revert", "inject", "revert"], f"the fault windows overlapped: {windows}"
    notes = sorted(str(s["drill lock"]) for s in summaries)
    fed = reference_federation.spec.topology.fqdn
    assert all(n.startswith(f"held on federation:{fed}@127.0.0.1:") for n in notes), notes
    waited = [n for n in notes if " after waiting " in n]
    # The second drill waited for the first (the note is written only when it had to wait)
    # and names the other worker's process and test.
    assert len(waited) == 1, notes
    assert float(waited[0].split(" after waiting ")[1].split(" s ")[0]) > 0, waited
    assert "for pid " in waited[0] and "(worker gw" in waited[0] and "test test_windows.py::test_window" in waited[0]


def test_negative_control_without_the_capability_the_windows_overlap(
        pytester_ini: pytest.Pytester, reference_federation: LocalFederation, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    windows, summaries = _run(pytester_ini, reference_federation, tmp_path, monkeypatch, "unshared")
    assert windows == ["inject", "inject", "revert", "revert"], windows
    assert all("drill lock" not in s for s in summaries)
