"""``--gameday-round-jitter``: each round's first fault waits a seeded random time first.

Rounds run back to back at a steady pace inject at one phase of every periodic process of the
federation (a health checker's rounds), so N rounds measure that phase N times. A wait drawn
uniformly over at least the period makes each round's phase uniform and independent of the
others' (tests/foreign/test_foreign_prediction.py counts on that for its odds).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gameday.drill import Drill
from gameday.errors import ConfigError, TargetUnreachable
from gameday.faults import Ledger
from gameday.reports.steps import StepRecord
from gameday.runtime import settings as gsettings
from gameday.runtime.interrupts import Interrupts
from gameday.runtime.settings import Settings
from tests.test_drill_lock import Recorder

SEED_KEY = "suites/gameday/test_gateway_outage.py::test_random_gateway_outage"


def _resolve(**raw: str) -> Settings:
    values = {k.replace("_", "-"): v for k, v in raw.items()}
    return gsettings.resolve(lambda opt: (values.get(opt.name), "command line"))


def _drill(tmp_path: Path, *, seed: int = 1, jitter: float = 0.0, round_index: int = 0,
           lines: list[str] | None = None, steps: object = None, interrupts: Interrupts | None = None) -> Drill:
    kw: dict[str, object] = {"steps": steps} if steps is not None else {}
    if interrupts is not None:
        kw["interrupts"] = interrupts
    return Drill(Recorder(), Settings(seed=seed, round_jitter=jitter), seed_key=SEED_KEY,
                 ledger=Ledger(tmp_path / "ledger.json"), offered=10, margin=0.2, round_index=round_index,
                 progress=(lines if lines is not None else []).append, **kw)  # type: ignore[arg-type]


class Recorded:
    """Steps that keep what the drill recorded."""

    def __init__(self) -> None:
        self.steps: list[StepRecord] = []

    @contextlib.contextmanager
    def phase(self, title: str) -> Iterator[StepRecord]:
        rec = StepRecord(title)
        yield rec
        self.steps.append(rec)

    def verdict(self, v: object, exc: BaseException | None) -> None:
        return None


def test_the_option_is_seconds_from_0_and_off_by_default() -> None:
    assert _resolve().round_jitter == 0.0
    assert _resolve(round_jitter="8").round_jitter == 8.0
    assert _resolve(round_jitter="2.5").round_jitter == 2.5
    for bad in ("-1", "nan", "inf", "3601", "eight"):
        with pytest.raises(ConfigError, match=r"--gameday-round-jitter \(command line\): got .*, expected a finite "
                                              r"number >= 0 and <= 3600"):
            _resolve(round_jitter=bad)
    assert gsettings.cli_type("round-jitter")("8") == 8.0  # gameday drill --round-jitter


def test_the_wait_is_drawn_from_the_seed_the_test_and_the_round_and_leaves_the_picks_alone(tmp_path: Path) -> None:
    waits = [_drill(tmp_path, seed=5, jitter=8, round_index=r).jitter for r in range(4)]
    assert waits == [_drill(tmp_path, seed=5, jitter=8, round_index=r).jitter for r in range(4)]  # reproducible
    assert len(set(waits)) == 4 and all(0 <= w <= 8 for w in waits)
    assert waits != [_drill(tmp_path, seed=6, jitter=8, round_index=r).jitter for r in range(4)]
    assert _drill(tmp_path, seed=5, jitter=0).jitter == 0.0
    # Its own generator: the region picks of a seed are those of a run without the jitter.
    with_jitter, without = _drill(tmp_path, seed=5, jitter=8), _drill(tmp_path, seed=5)
    assert [with_jitter.pick_region() for _ in range(20)] == [without.pick_region() for _ in range(20)]


def test_over_seeds_every_round_lands_at_a_uniform_phase_independent_of_the_others(tmp_path: Path) -> None:
    """The odds the foreign prediction control states: with a jitter of one whole period P, the
    phase (wait mod P) of each round is uniform, and the rounds' are independent: a window of
    1.4 s of an 8 s period holds a round 17.5 % of the time, two given rounds together 3.1 %."""
    period, window, seeds = 8.0, 1.4, 3000
    p = window / period
    phases = [[_drill(tmp_path, seed=s, jitter=period, round_index=r).jitter % period for r in range(4)]
              for s in range(1, seeds + 1)]
    for r in range(4):
        share = sum(ph[r] < window for ph in phases) / seeds
        assert abs(share - p) < 0.035, (r, share)  # 5 standard deviations (0.0069)
        tenths = [sum(int(ph[r] / period * 10) == k for ph in phases) for k in range(10)]
        assert min(tenths) > 0.8 * seeds / 10 and max(tenths) < 1.2 * seeds / 10, tenths
    for a, b in ((0, 1), (1, 2), (2, 3), (0, 3)):
        both = sum(ph[a] < window and ph[b] < window for ph in phases) / seeds
        assert abs(both - p * p) < 0.016, (a, b, both)  # 5 standard deviations (0.0032)


def test_the_first_fault_waits_before_its_turn_and_health_check_and_a_second_does_not(tmp_path: Path) -> None:
    lines: list[str] = []
    steps = Recorded()
    d = _drill(tmp_path, seed=3, jitter=1.0, lines=lines, steps=steps)
    assert 0.3 < d.jitter < 1.0  # seed 3 draws 0.79 s: long enough to see
    t0 = time.monotonic()
    with pytest.raises(TargetUnreachable), d.fault("gateway_down", "a"):
        pass
    took = time.monotonic() - t0
    assert d.jitter <= took < d.jitter + 0.5
    assert d.target.calls == ["check_health"]  # type: ignore[attr-defined]  # after the wait; nothing injected
    assert lines[0] == f"round 1: waiting {d.jitter:.1f} s (round jitter, 0-1 s) before gateway_down a"
    assert steps.steps[0].title == f"round jitter: {d.jitter:.2f} s of 0-1 s before gateway_down a"
    assert steps.steps[0].params["drawn from"] == "0-1 s, uniform (seed 3, round 1)"
    t0 = time.monotonic()
    with pytest.raises(TargetUnreachable), d.fault("gateway_down", "b"):
        pass
    assert time.monotonic() - t0 < 0.3  # once per drill (per round), not per fault
    assert len([s for s in steps.steps if s.title.startswith("round jitter")]) == 1


def test_without_the_option_nothing_is_waited_or_recorded(tmp_path: Path) -> None:
    lines: list[str] = []
    steps = Recorded()
    d = _drill(tmp_path, jitter=0.0, lines=lines, steps=steps)
    with pytest.raises(TargetUnreachable), d.fault("gateway_down", "a"):
        pass
    assert not [s for s in steps.steps if s.title.startswith("round jitter")]
    assert not [line for line in lines if "jitter" in line]


def test_a_signal_during_the_wait_stops_the_drill_at_once_nothing_checked_or_injected(tmp_path: Path) -> None:
    interrupts = Interrupts()
    d = _drill(tmp_path, seed=1, jitter=60.0, interrupts=interrupts)
    assert d.jitter > 5  # 21 s

    def arrive() -> None:
        interrupts.first, interrupts.first_at = signal.SIGTERM, time.monotonic()

    timer = threading.Timer(0.3, arrive)
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt, match=r"SIGTERM .*stopping at: round jitter before gateway_down a"), \
                d.fault("gateway_down", "a"):
            pass
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 1.0
    assert d.target.calls == []  # type: ignore[attr-defined]
    assert d.ledger.pending() == []


def test_gameday_drill_passes_round_jitter_on_and_refuses_a_bad_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from gameday.cli import main as cli

    ran: list[list[str]] = []

    class Supervisor:
        def __init__(self, argv: list[str], *rest: object) -> None:
            ran.append(argv)

        def run(self) -> int:
            return 0

    monkeypatch.setattr(cli, "_Supervisor", Supervisor)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["drill", "--round-jitter", "8", "--reports", str(tmp_path / "reports")]) == 0
    assert "--gameday-round-jitter=8.0" in ran[0]
    with pytest.raises(SystemExit) as exc:
        cli.main(["drill", "--round-jitter", "-1"])
    assert exc.value.code == 2
    assert "argument --round-jitter: got '-1', expected a finite number >= 0 and <= 3600" in capsys.readouterr().err
