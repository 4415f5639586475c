"""R12's judgement of an observed release (gameday.model.release.observed_rollout / judge_rollout)."""

from __future__ import annotations

from gameday.model.parts import RegionInfo
from gameday.model.release import VersionSample, judge_rollout, observed_rollout

REGIONS = [RegionInfo("a", 50, 80, "127.0.1.1"), RegionInfo("b", 30, 80, "127.0.2.1"),
           RegionInfo("c", 20, 80, "127.0.3.1")]
NEW = "v2"


def _reads(schedule: dict[str, tuple[float, float]], *, until: float = 6.0) -> list[VersionSample]:
    """Two instances per region, both restarting over [start, end) and on NEW from end on."""
    out = []
    t = 0.0
    while t < until:
        for region, (start, end) in schedule.items():
            for i in (1, 2):
                restarting = start <= t < end
                out.append(VersionSample(t, region, f"{region}-{i}", NEW if t >= end else "v1", not restarting))
        t = round(t + 0.05, 2)
    return out


def test_a_release_standby_first_primary_last_one_region_at_a_time_passes() -> None:
    rollout = observed_rollout(_reads({"c": (0.1, 0.8), "b": (0.9, 1.6), "a": (1.7, 2.4)}), NEW)
    assert sorted(rollout, key=lambda r: rollout[r].began or 0) == ["c", "b", "a"]
    assert judge_rollout(rollout, REGIONS, "a") == []


def test_every_region_at_once_fails_as_two_regions_mid_update() -> None:
    problems = judge_rollout(observed_rollout(_reads(dict.fromkeys("abc", (0.1, 0.8))), NEW), REGIONS, "a")
    assert any("mid-update at once" in p for p in problems), problems


def test_the_primary_first_fails_and_names_the_order() -> None:
    problems = judge_rollout(observed_rollout(_reads({"a": (0.1, 0.8), "b": (0.9, 1.6), "c": (1.7, 2.4)}), NEW),
                             REGIONS, "a")
    assert any("the first region updated was a (weight 50)" in p for p in problems), problems
    assert any("the primary a was not the last region updated" in p and "a t+0.00-" in p for p in problems), problems


def test_a_release_that_never_finished_fails() -> None:
    problems = judge_rollout(observed_rollout(_reads({"c": (0.1, 99.0)}), NEW), REGIONS, "a")
    assert any("never seen serving the new version ready" in p for p in problems), problems
