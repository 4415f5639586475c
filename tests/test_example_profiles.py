"""The example profiles shipped in examples/profiles/ (shown in docs/howto/example-profiles.md) are
valid and drill as documented, cheaply: nothing is started, no command is run, no API is called.

Each is loaded with the real loader, its target built as a drill builds it (``external``, or
``kube`` with the profile's ``kubernetes:`` section, in dry-run mode with no API client), every
fault it declares planned as the dry run plans it (the command or operation and its exact
inverse) into the dry run's own plan lines, its sources built as a drill builds them (never
read), and its stated timing turned into the headline drill's predicted windows: each timing field
feeds the stage the documentation says it feeds."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from gameday.drill.checks import entry_nodes_route
from gameday.faults import FAULTS
from gameday.model import preflight
from gameday.targets.external import ExternalTarget
from gameday.targets.k8s.profiled import ProfileKubeTarget
from gameday.targets.profile import LoadedProfile, load_profile
from gameday.verdicts.predict import Prediction, predict
from gameday.verdicts.state import StatedReplication

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples" / "profiles").glob("*.yaml"))


def test_the_examples_are_there_and_documented() -> None:
    names = {p.name for p in EXAMPLES}
    assert {"minimal.yaml", "team-federation.yaml", "with-state.yaml", "kubernetes.yaml"} <= names, names
    page = (REPO / "docs" / "howto" / "example-profiles.md").read_text(encoding="utf-8")
    for name in names:
        assert f"`{name}`" in page, f"{name} is not on the example-profiles page"


def _no_client(context: str) -> Any:
    raise AssertionError(f"the dry run tried to open an API client for {context!r}")


def _faults(loaded: LoadedProfile) -> list[tuple[str, str | None]]:
    p = loaded.profile
    if p.kubernetes is not None:
        return [(n, None) for n in p.kubernetes.faults] + [
            (n, r) for r, table in p.kubernetes.regions.items() for n in table]
    return [(n, None) for n in p.faults] + [(n, r.name) for r in p.regions for n in r.faults]


def _prediction(target: ExternalTarget | ProfileKubeTarget, routes: bool) -> Prediction:
    fault = FAULTS["gateway_down"]
    return predict(target.stated_timing(), fault.name, fault.gateway_check_fails, entry_nodes_route=routes)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_each_example_loads_and_plans_every_fault_as_a_dry_run(path: Path, tmp_path: Path) -> None:
    loaded = load_profile(path)
    p = loaded.profile
    assert len(p.regions) >= 2
    target: ExternalTarget | ProfileKubeTarget
    if p.kubernetes is not None:
        target = ProfileKubeTarget(loaded, tmp_path / "work", allow=list(p.kubernetes.contexts.values()),
                                   dry_run=True, client_factory=_no_client, out=io.StringIO())
    else:
        target = ExternalTarget(loaded, tmp_path / "work")
    faults = _faults(loaded)
    assert any(name == "gateway_down" for name, _ in faults), "the headline drill needs gateway_down"
    sources = target.sources()  # built as the drill builds them; never read here
    try:
        routes = entry_nodes_route(sources)
        for name, region in faults:
            inject, revert = target.plan_fault(name, region, {})
            assert inject and revert and inject != revert, (name, region, inject, revert)
            lost = FAULTS[name].takes_region_out if name in FAULTS else bool(
                target.faults()[name].takes_region_out)
            plan = preflight.dry_run_plan(
                action=f"{name} {region or ''}".strip(), seed=1, round_index=0, checks=[],
                nodes=sorted(n.name for n in sources.entry_nodes if n.region != region),
                regions=[r.name for r in p.regions], baseline=1.0, ledger="ledger.json", inject=inject,
                revert=revert, restore_timeout=60, control_plane=sources.control_plane is not None,
                prediction=_prediction(target, routes).lines() if lost and region is not None else [])
            assert f"  3. inject {name}" in plan[-4] and revert in plan[-2], plan
    finally:
        if sources.state is not None:
            sources.state.close()


def _window(prediction: Prediction, figure: str) -> tuple[float, float]:
    w = prediction.window(figure)
    assert w.known, w.unknown
    return round(w.earliest, 3), round(w.latest, 3)


def test_with_state_each_timing_field_feeds_its_stage(tmp_path: Path) -> None:
    """with-state.yaml: probe 1 s x fall 3 (a refused check fails at once), gslb_delay 0,
    no entry nodes (switchover from the DNS answers + one request), TTL 5 s."""
    target = ExternalTarget(load_profile(REPO / "examples" / "profiles" / "with-state.yaml"), tmp_path)
    pr = _prediction(target, routes=False)
    assert pr.detection is not None and (pr.detection.earliest, pr.detection.latest) == (2.0, 3.0)
    assert _window(pr, "dns_convergence") == (2.0, 3.0)  # + gslb_delay 0
    assert _window(pr, "switchover") == (2.0, 4.0)  # DNS convergence + one request (1 s)
    assert _window(pr, "client_recovery") == (0.0, 9.0)  # DNS 3 + TTL 5 + one request
    assert target.profile.state is not None
    stated = target.profile.state.stated()
    assert stated == StatedReplication("async", 0.5)  # what data_loss_vs_prediction judges against


def test_team_federation_each_timing_field_feeds_its_stage(tmp_path: Path) -> None:
    """team-federation.yaml: probe 1 s x fall 3, gslb_delay 1 s, propagation 0.5 s to entry nodes
    that report their routes, TTL 5 s."""
    target = ExternalTarget(load_profile(REPO / "examples" / "profiles" / "team-federation.yaml"), tmp_path)
    pr = _prediction(target, routes=entry_nodes_route(target.sources()))
    assert _window(pr, "dns_convergence") == (2.0, 4.0)  # detection 2-3 + gslb_delay <= 1
    assert _window(pr, "switchover") == (2.0, 3.5)  # detection 2-3 + propagation <= 0.5
    assert _window(pr, "client_recovery") == (0.0, 10.0)  # DNS 4 + TTL 5 + one request


def test_minimal_states_no_timing_so_the_prediction_is_not_applicable(tmp_path: Path) -> None:
    target = ExternalTarget(load_profile(REPO / "examples" / "profiles" / "minimal.yaml"), tmp_path)
    pr = _prediction(target, routes=False)
    assert all(not pr.window(f).known for f in ("switchover", "dns_convergence", "client_recovery"))
    assert "probe_interval, probe_timeout, fall not stated" in (pr.window("switchover").unknown or "")
