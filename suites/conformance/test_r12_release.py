"""R12: release region by region - a standby (lowest-weight) region first, the primary last,
each region verified before the next is touched.

Judged on the federation's own release, not on gameday's: the test asks the federation's
release mechanism for a new app version (``ReleaseMechanism.start_release``; the reference
federation's control plane runs a release controller) and then only observes: every app
instance's ``/status`` (``app_version``, ``restarting``) read round after round until every
instance serves the new version ready. From those reads alone: when each region began
updating (an instance first unready or on the new version) and was done (every instance ready
on it); the rule holds when a lowest-weight region began first, the primary last, and no region
began before the one before it was done.
"""

from __future__ import annotations

import time
import uuid

import pytest

from gameday.conformance.capabilities import require
from gameday.interfaces import ReleaseMechanism
from gameday.model.release import VersionSample, judge_rollout, observed_rollout

RELEASE_TIMEOUT = 90.0
ROUND = 0.05


@pytest.mark.conformance("R12", "the federation's own release goes standby first, primary last, one region at a time")
def test_r12_release_goes_region_by_region(federation, view, topology, converge_s, settled):
    releaser = require(federation, ReleaseMechanism, "R12 judges the federation's own release")
    regions = federation.regions()
    instances = {r.name: view.instances(r.name) for r in regions}
    version = f"r12-{uuid.uuid4().hex[:8]}"
    samples: list[VersionSample] = []
    releaser.start_release(version)
    deadline = time.monotonic() + RELEASE_TIMEOUT
    while time.monotonic() < deadline:  # bounded: one round of reads every ROUND s
        t = time.monotonic()
        round_ = []
        for region, urls in instances.items():
            for u in urls:
                st = view.try_json(u)
                round_.append(VersionSample(t, region, u, None if st is None else st.get("app_version"),
                                            st is not None and not st.get("restarting", False)))
        samples += round_
        if all(s.version == version and s.ready for s in round_):
            break
        time.sleep(max(0.0, ROUND - (time.monotonic() - t)))
    # the controller's last step may still be settling (health events of the restarted
    # instances): the next check in this session starts from a converged federation
    view.wait_converged(converge_s)
    rollout = observed_rollout(samples, version)
    problems = judge_rollout(rollout, regions, topology.primary_region)
    weights = {r.name: r.weight for r in regions}
    assert not problems, (f"expected the release of {version} to go region by region, a lowest-weight region first "
                          f"and the primary {topology.primary_region} last (weights {weights}); "
                          + "; ".join(problems))
