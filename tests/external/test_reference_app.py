"""The reference app driven through the ``external`` target, by a profile only.

The federation is started by the test (as a team's would be, by whatever runs it); the
pytest runs under test know it only through the profile. Each real drill takes ~20 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gameday.model.topology import load_topology
from gameday.targets.local.federation import LocalFederation
from tests.external.conftest import reference_profile, write_profile

pytestmark = pytest.mark.slow

HEADLINE = Path(__file__).resolve().parents[2] / "suites" / "gameday" / "test_gateway_outage.py"
SEED = 7


def _marker_fault(tmp_path: Path, name: str) -> dict[str, Any]:
    """A harmless fault that leaves marker files: ``<name>.injected`` and ``<name>.reverted``."""
    return {"inject": {"argv": ["sh", "-c", f"echo injected >> {tmp_path / name}.injected"], "timeout": 5},
            "revert": {"argv": ["sh", "-c", f"echo reverted >> {tmp_path / name}.reverted"], "timeout": 5}}


def test_dry_run_prints_every_command_with_its_inverse_and_runs_none(
        pytester_ini: pytest.Pytester, reference_federation: LocalFederation, tmp_path: Path) -> None:
    data = reference_profile(reference_federation)
    for r in data["regions"]:
        r["faults"]["gateway_down"] = _marker_fault(tmp_path, f"gw-{r['name']}")
    profile = write_profile(tmp_path / "profile.yaml", data)
    pytester_ini.makepyfile(test_dry="""
        def test_outage(drill):
            region = drill.pick_region()
            with drill.fault("gateway_down", region) as fault:
                raise AssertionError("a dry run never gets inside the block")
    """)
    result = pytester_ini.runpytest_subprocess("--gameday-target=external", f"--gameday-profile={profile}",
                                               "--gameday-dry-run", f"--gameday-seed={SEED}", "-rs")
    result.assert_outcomes(skipped=1)
    out = result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([  # the plan is the skip reason
        "SKIPPED [[]1[]] test_dry.py:1: dry run of gateway_down * (seed 7, round 1): nothing was injected",
        "  passed: capacity with * out: *",
        "  passed: clients can move within the switchover limit: detection 3 x 0.2 s + 0.15 s probe timeout *",
        "  3. inject gateway_down *: run `sh -c 'echo injected >> *.injected'` (timeout 5 s, in *)",
        "  5. revert (the exact inverse): run `sh -c 'echo reverted >> *.reverted'` (timeout 5 s, in *)*",
    ])
    assert "Traceback" not in out
    assert not list(tmp_path.glob("*.injected")) and not list(tmp_path.glob("*.reverted")), "a dry run runs nothing"
    assert "; the control plane answers" in out  # this profile declares one
    # A profile without a control plane: the plan says it is absent, not that it answers.
    del data["control_plane"]
    bare = write_profile(tmp_path / "no-cp.yaml", data)
    result = pytester_ini.runpytest_subprocess("--gameday-target=external", f"--gameday-profile={bare}",
                                               "--gameday-dry-run", f"--gameday-seed={SEED}", "-rs")
    result.assert_outcomes(skipped=1)
    out = result.stdout.str() + result.stderr.str()
    assert "no control plane declared (versions are n/a)" in out, out[-2000:]
    assert "the control plane answers" not in out


def test_a_stated_ttl_the_dns_server_contradicts_is_refused_before_anything_is_injected(
        pytester_ini: pytest.Pytester, reference_federation: LocalFederation, tmp_path: Path) -> None:
    data = reference_profile(reference_federation)
    for r in data["regions"]:
        r["faults"]["gateway_down"] = _marker_fault(tmp_path, f"gw-{r['name']}")
    data["timing"]["dns_ttl"] = 30  # the reference GSLB answers with 5
    profile = write_profile(tmp_path / "profile.yaml", data)
    pytester_ini.makepyfile(test_dry="""
        def test_outage(drill):
            with drill.fault("gateway_down", drill.pick_region()):
                raise AssertionError("never inside the block")
    """)
    args = ("--gameday-target=external", f"--gameday-profile={profile}", "--gameday-dry-run", "-rs")
    refused = pytester_ini.runpytest_subprocess(*args)
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines([f"*DrillRefused: refusing gateway_down ?: {profile}: timing.dns_ttl: states 30 s, "
                                  "but the DNS server * answers * with TTL 5 s*--gameday-accept-observed-ttl*"
                                  "nothing was injected*"])
    # The option: the drill goes ahead, predicted with the TTL the server answers with.
    accepted = pytester_ini.runpytest_subprocess(*args, "--gameday-accept-observed-ttl")
    accepted.assert_outcomes(skipped=1)
    accepted.stdout.fnmatch_lines([
        "*prediction for gateway_down (from profile profile.yaml):",
        "*  detection 3 x 0.2 s checks, each failing at once (refused or unready): 0.40-0.60 s",
        "*  switchover: 0.40-0.70 s: detection 0.40-0.60 s + entry-node propagation <= 0.1 s (timing.propagation)",
        "*  client recovery: 0.00-6.60 s: <= DNS convergence 0.60 s + TTL 5 s (observed in the DNS server's answers)*",
    ])
    assert not list(tmp_path.glob("*.injected")), "nothing was run"


def test_a_stated_gslb_delay_is_in_the_dns_prediction_the_run_prints(
        pytester_ini: pytest.Pytester, reference_federation: LocalFederation, tmp_path: Path) -> None:
    """A DNS server that applies its health decisions up to 1 s late says so in ``timing.gslb_delay``:
    the DNS convergence and client recovery windows it is judged against grow by that, and say why."""
    data = reference_profile(reference_federation)
    for r in data["regions"]:
        r["faults"]["gateway_down"] = _marker_fault(tmp_path, f"gw-{r['name']}")
    data["timing"]["gslb_delay"] = 1.0
    profile = write_profile(tmp_path / "profile.yaml", data)
    pytester_ini.makepyfile(test_dry="""
        def test_outage(drill):
            with drill.fault("gateway_down", drill.pick_region()):
                raise AssertionError("never inside the block")
    """)
    result = pytester_ini.runpytest_subprocess("--gameday-target=external", f"--gameday-profile={profile}",
                                               "--gameday-dry-run", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*  dns convergence: 0.40-1.60 s: detection 0.40-0.60 s + GSLB propagation <= 1 s (timing.gslb_delay: "
        "the DNS server answers up to 1 s after deciding)",
        "*  client recovery: 0.00-7.60 s: <= DNS convergence 1.60 s + TTL 5 s *",
    ])
    assert not list(tmp_path.glob("*.injected")), "nothing was run"


def test_kill_9_mid_fault_then_gameday_restore_runs_the_recorded_revert(
        pytester_ini: pytest.Pytester, reference_federation: LocalFederation, tmp_path: Path) -> None:
    cut = {"b": {"proxy_cut_off": _marker_fault(tmp_path, "cut")}}
    data = reference_profile(reference_federation, region_faults=cut)
    profile = write_profile(tmp_path / "profile.yaml", data)
    reports = tmp_path / "reports"
    pytester_ini.makepyfile(test_hold="""
        import time
        def test_hold(drill):
            with drill.fault("proxy_cut_off", "b", baseline=0.5):
                time.sleep(120)
    """)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    runner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:locust", "-p", "no:cacheprovider", "--gameday-target=external",
         f"--gameday-profile={profile}", f"--gameday-reports={reports}", str(pytester_ini.path / "test_hold.py")],
        cwd=pytester_ini.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    injected = tmp_path / "cut.injected"
    deadline = time.monotonic() + 60
    while not injected.exists():
        assert runner.poll() is None, runner.stdout.read().decode() if runner.stdout else ""
        assert time.monotonic() < deadline, "the fault was never injected"
        time.sleep(0.1)
    ledger = reports / ".gameday" / "ledger.json"

    def read_pending() -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = json.loads(ledger.read_text())["pending"] if ledger.exists() else []
        return entries

    while not any("revert" in e["params"] for e in read_pending()):  # recorded once the injection returned
        assert time.monotonic() < deadline, "the revert command never reached the ledger"
        time.sleep(0.05)
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait(10)
    pending = read_pending()
    assert [(e["kind"], e["region"], e["target"]) for e in pending] == [("proxy_cut_off", "b", "external")]
    assert pending[0]["params"]["revert"]["argv"][0] == "sh", "the revert command itself is in the ledger"
    assert not (tmp_path / "cut.reverted").exists(), "kill -9 left the fault in place"
    (log,) = reports.glob(".gameday/federations/*/commands.jsonl")  # every command, its exit code and output
    assert json.loads(log.read_text().splitlines()[0])["command"].startswith("sh -c 'echo injected")
    (tmp_path / "profile.yaml").write_text(profile.read_text().replace("reverted >>", "CHANGED >>"))

    restore = subprocess.run([sys.executable, "-m", "gameday.cli", "restore", f"--reports={reports}"],
                             capture_output=True, text=True, timeout=120, env=env, check=False)
    assert restore.returncode == 0, restore.stdout + restore.stderr
    assert "OK    proxy_cut_off b" in restore.stdout and "1 reverted" in restore.stdout, restore.stdout
    assert "changed since the injection" in restore.stderr  # said, and the recorded revert used
    assert (tmp_path / "cut.reverted").read_text() == "reverted\n", "exactly the recorded revert ran, once"
    assert json.loads(ledger.read_text())["pending"] == []


def test_a_fault_the_profile_lacks_is_refused_before_the_ledger_records_it(
        pytester_ini: pytest.Pytester, reference_federation: LocalFederation, tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "profile.yaml", reference_profile(reference_federation))
    pytester_ini.makepyfile(test_missing="""
        def test_missing(drill):
            with drill.fault("gateway_hung", "b"):
                raise AssertionError("never injected")
    """)
    result = pytester_ini.runpytest_subprocess("--gameday-target=external", f"--gameday-profile={profile}",
                                               f"--gameday-reports={tmp_path / 'reports'}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FaultUnavailable: *profile.yaml: regions[[]b[]].faults has no fault 'gateway_hung' "
                                 "(it has: gateway_down); add its inject and revert commands to the profile; "
                                 "nothing was injected"])
    ledger = tmp_path / "reports" / ".gameday" / "ledger.json"
    assert not ledger.exists() or json.loads(ledger.read_text())["pending"] == []


def _figures(run_dir: Path) -> dict[str, Any]:
    (figures,) = run_dir.glob("runs/*/drills/*/figures-0.json")
    data: dict[str, Any] = json.loads(figures.read_text())
    return data


def _headline(pytester: pytest.Pytester, reports: Path, *args: str) -> dict[str, Any]:
    # Client recovery over 3 s, not the default 10 (the two runs are compared on switchover and
    # DNS convergence): each run ends 7 s sooner.
    result = pytester.runpytest_subprocess(str(HEADLINE), f"--gameday-seed={SEED}", f"--gameday-reports={reports}",
                                           "--gameday-recovery-window=3", *args, timeout=240)
    result.assert_outcomes(passed=1)
    return _figures(reports)


def test_the_headline_drill_through_external_agrees_with_local(pytester_ini: pytest.Pytester,
                                                              tmp_path: Path) -> None:
    """The same drill, unchanged, on the same federation shape: once as ``local`` (the harness
    runs and breaks the federation itself), once as ``external`` (a federation it only knows
    by a profile, its gateway_down a command). Switchover and DNS convergence must agree
    within the probes' resolution plus one health-probe period (when in its period the fault
    lands decides when the next probe sees it, in either run)."""
    local = _headline(pytester_ini, tmp_path / "local-reports")
    fed = LocalFederation.from_topology(load_topology(), tmp_path / "fed")
    fed.start()
    try:
        fed.wait_ready(30)
        profile = write_profile(tmp_path / "profile.yaml", reference_profile(fed, gateway_down_by="readyz"))
        external = _headline(pytester_ini, tmp_path / "external-reports", "--gameday-target=external",
                             f"--gameday-profile={profile}")
    finally:
        fed.stop()
    assert local["region"] == external["region"], "the same seed picks the same region"
    probe = load_topology().timing.probe_interval
    lines = []
    for name in ("switchover", "dns_convergence"):
        a, b = local[name], external[name]
        tolerance = a["resolution_s"] + b["resolution_s"] + probe
        lines.append(f"{name}: local {a['value_s']:.2f}±{a['resolution_s']:.2f} s, external {b['value_s']:.2f}"
                     f"±{b['resolution_s']:.2f} s (agree within {tolerance:.2f} s)")
        assert abs(a["value_s"] - b["value_s"]) <= tolerance, lines[-1]
    print("\n".join(lines))
    (Path(os.environ.get("GAMEDAY_FIGURES_OUT", tmp_path)) / "external-vs-local.txt").write_text("\n".join(lines))


def test_gameday_drill_profile_runs_the_headline_drill_against_it(reference_federation: LocalFederation,
                                                                  tmp_path: Path) -> None:
    data = reference_profile(reference_federation)
    for r in data["regions"]:
        r["faults"]["gateway_down"] = _marker_fault(tmp_path, f"gw-{r['name']}")
    profile = write_profile(tmp_path / "profile.yaml", data)
    run = subprocess.run([sys.executable, "-m", "gameday.cli", "drill", "--profile", str(profile), "--seed", "7",
                          "--reports", str(tmp_path / "reports"), "--gameday-dry-run", "-rs"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "--gameday-target=external" in run.stdout and "dry run of gateway_down" in run.stdout, run.stdout
    assert not list(tmp_path.glob("*.injected"))
    bad = subprocess.run([sys.executable, "-m", "gameday.cli", "drill", "--profile", "missing.yaml"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False)
    assert bad.returncode == 2
    assert "expected an existing federation profile YAML file: missing.yaml does not exist" in bad.stderr


def test_the_load_generator_sends_the_profiles_path_and_host_header(reference_federation: LocalFederation,
                                                                      tmp_path: Path) -> None:
    """Clients resolve the name at the profile's DNS server (here the reference GSLB) and send
    ``scheme://<answered address>:<port><path>`` with the Host header; a recorder listens on
    every gateway address, on a port of its own, and answers a served-by header."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from gameday.load.runner import LoadRunner
    from gameday.targets.external import ExternalTarget

    seen: list[tuple[str, str, str]] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the http.server API names it so
            region = self.server.server_address[0].split(".")[2]  # 127.0.N.1 -> N
            seen.append((self.server.server_address[0], self.path, self.headers.get("Host", "")))
            self.send_response(200)
            self.send_header("X-Region", {"1": "a", "2": "b", "3": "c"}[region])
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    gateways = [r.gateway.host for r in reference_federation.spec.regions]
    first = ThreadingHTTPServer((gateways[0], 0), Recorder)
    port = first.server_address[1]
    servers = [first] + [ThreadingHTTPServer((g, port), Recorder) for g in gateways[1:]]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        data = reference_profile(reference_federation)
        data["service"]["load"] = {"scheme": "http", "port": port, "path": "/api/ping?x=1", "host": "app.team.test"}
        data["service"]["served_by_header"] = "X-Region"
        target = ExternalTarget.from_file(write_profile(tmp_path / "profile.yaml", data))
        with LoadRunner(target.endpoints(), users=4, rate=20, workdir=tmp_path / "load") as runner:
            time.sleep(2)
            runner.poll()
    finally:
        for s in servers:
            s.shutdown()
    assert seen and {(path, host) for _, path, host in seen} == {("/api/ping?x=1", "app.team.test")}
    assert {addr for addr, _, _ in seen} <= set(gateways)
    ok = [r for r in runner.records if r.status == 200]
    assert ok and {r.region for r in ok} <= {"a", "b", "c"} and None not in {r.region for r in ok}
