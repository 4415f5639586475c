"""The profile's ``state:`` section (DESIGN.md section 9, issue 27 item 6): how the drill writes
to a federation gameday did not build and reads the writes back.

Validation names the file and the field; the ``external`` target builds the write path from the
section (and has none without it: the state verdicts are then not applicable); writes and
read-backs go through the service's DNS name to a real loopback service with paths and field
names of its own; the target's health check makes one probe write and reads it back, so a drill
whose writes cannot be made refuses before anything is injected.
"""

from __future__ import annotations

import copy
import fnmatch
import http.server
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from gameday.errors import ConfigError, TargetError, TargetUnreachable
from gameday.observers.sources.state import HttpJsonState
from gameday.targets.external import ExternalTarget
from gameday.targets.profile import load_profile, parse_profile
from gameday.verdicts.state import StatedReplication, write_recovery_window
from tests.external.loopback_state import STATE, Running, state_service

BASE: dict[str, Any] = {
    "name": "team",
    "service": {"fqdn": "app.example.test", "dns": {"server": "127.0.0.1", "port": 5300},
                "load": {"port": 8080, "path": "/", "host": "app.example.test"}},
    "regions": [{"name": "a", "gateway": "127.0.1.1", "weight": 50},
                {"name": "b", "gateway": "127.0.2.1", "weight": 50}],
}


def _state(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["state"] = {"replication": "async", "max_lag": 0.5, "http": {}}
    for key, value in changes.items():
        if value is ...:
            data["state"].pop(key, None)
        else:
            data["state"][key] = value
    return data


FAILOVER = {"probe_interval": 1.0, "probe_timeout": 0.5, "fall": 3, "lease": 2.0, "announce": 0.5}
ELECTION = {"timeout_min": 4.0, "timeout_max": 9.0, "heartbeat": 1.0, "campaign_max": 0.8}

MISTAKES = [
    (_state(replication="semi-sync"), "state.replication: got 'semi-sync', expected 'sync', 'async' or 'none'"),
    (_state(max_lag=-1), "state.max_lag: got -1, expected a finite number >= 0 and <= 3600"),
    (_state(max_lag=...), "state.max_lag: required with replication: async (the stated maximum replication lag*"),
    (_state(replication="sync"), "state.max_lag: only with replication: async (got replication: sync)"),
    (_state(write_rate=0), "state.write_rate: got 0, expected a finite number > 0 and <= 1000"),
    (_state(write_timeout=60), "state.write_timeout: got 60, expected a finite number > 0 and <= 30"),
    (_state(http=...), "state: got no source kind, expected exactly one of http beside the other fields*"),
    (_state(grpc={}), "state: got ['grpc', 'http'], expected exactly one of http*"),
    (_state(http={"write": {"path": "/data"}}),
     "state.http.write.path: got '/data', expected a URL path with {id} once*"),
    (_state(http={"write": {"method": "GET"}}), "state.http.write.method: got 'GET', expected 'POST' or 'PUT'"),
    (_state(http={"write": {"acked_by": ""}}), "state.http.write.acked_by: *"),
    (_state(http={"read_back": {}}), "state.http.read_back.get: give exactly one of get * or lookup *"),
    (_state(http={"read_back": {"lookup": "/data/{id}"}}),
     "state.http.read_back.lookup: got '/data/{id}', expected a URL path without {id}*"),
    (_state(http={"read_back": {"get": "/data/{id}", "concurrency": 0}}),
     "state.http.read_back.concurrency: got 0, expected greater than or equal to 1"),
    (_state(http={"read_back": {"lookup": "/data/_lookup", "concurrency": 4}}),
     "state.http.read_back.concurrency: only with get*"),
    (_state(http={"wrte": {}}), "state.http.wrte: unknown field*"),
    (_state(replication="sync", max_lag=..., failover=FAILOVER),
     "state.failover: only with replication: async, whose standby a controller promotes (got replication: sync*"),
    (_state(failover={**FAILOVER, "fall": 0}), "state.failover.fall: got 0, expected *1*"),
    (_state(failover={"probe_interval": 1, "fall": 3}), "state.failover.probe_timeout: required field is missing"),
    (_state(primary={"url": "status:8080"}), "state.primary.url: got 'status:8080', *"),
    (_state(election=ELECTION),
     "state.election: only with replication: sync, whose replicas elect a leader (got replication: async*"),
    (_state(replication="sync", max_lag=..., election={**ELECTION, "timeout_max": 1.0}),
     "state.election.timeout_max (1) is below timeout_min (4): the election timeout is drawn from *"),
    (_state(replication="sync", max_lag=..., election={"timeout_max": 9.0}),
     "state.election.timeout_min: required field is missing"),
]


@pytest.mark.parametrize(("data", "message"), MISTAKES, ids=[re.sub(r"\W+", "-", m[:40]) for _, m in MISTAKES])
def test_each_state_mistake_names_the_file_and_the_field(tmp_path: Path, data: dict[str, Any], message: str) -> None:
    f = tmp_path / "team.yaml"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_profile(f)
    lines = str(info.value).splitlines()
    assert len(lines) == 1, lines
    assert fnmatch.fnmatchcase(lines[0], f"{f}: {message.replace('[', '[[]')}"), lines[0]


def test_a_state_section_validates_with_defaults_and_round_trips_through_the_ledger(tmp_path: Path) -> None:
    p = parse_profile(_state(), "team.yaml")
    st = p.state
    assert st is not None
    assert (st.replication, st.max_lag, st.write_rate, st.write_timeout) == ("async", 0.5, 5.0, 1.0)
    assert st.stated() == StatedReplication("async", 0.5)  # the data-loss prediction's input
    dumped = p.model_dump(mode="json")
    # flat as written: the kind beside the other fields; the defaults are the reference app's
    assert dumped["state"]["http"] == {"write": {"method": "POST", "path": "/data/{id}", "acked_by": "region",
                                                 "seq": "seq"}, "read_back": None}
    assert parse_profile(dumped, "recorded") == p  # what the ledger records reads back the same
    # `gameday restore` reads a profile only for its commands: an unknown state kind is kept
    lenient = parse_profile(_state(http=..., k8s_store={"x": 1}), "team.yaml", lenient=True)
    assert lenient.state is not None and lenient.state.source.kind is None
    assert lenient.model_dump(mode="json")["state"]["k8s_store"] == {"x": 1}


def test_the_documented_state_section_is_valid_as_written() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "own-federation.md").read_text(encoding="utf-8")
    section = page.split("## 6. Your federation's data: the `state:` section", 1)[1]
    m = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert m, "the how-to's state section has no ```yaml block"
    p = parse_profile({**BASE, **yaml.safe_load(m.group(1))}, "own-federation.md")
    assert p.state is not None and p.state.stated() == StatedReplication("async", 0.5)
    assert p.state.source.name == "http"


def test_without_a_state_section_there_is_no_write_path_and_the_state_verdicts_are_not_applicable(
        tmp_path: Path) -> None:
    f = tmp_path / "team.yaml"
    f.write_text(yaml.safe_dump(BASE))
    sources = ExternalTarget.from_file(f).sources()
    assert sources.state is None
    assert "state: none (state verdicts not applicable)" in sources.describe()


def _target(tmp_path: Path, running: Running, state: dict[str, Any] | None = STATE) -> ExternalTarget:
    return ExternalTarget.from_file(running.write_profile(tmp_path / "svc.yaml", state), tmp_path / "work")


def test_writes_and_read_backs_use_the_profiles_paths_fields_and_host(tmp_path: Path) -> None:
    with state_service() as running:
        target = _target(tmp_path, running)
        sources = target.sources()
        source = sources.state
        assert isinstance(source, HttpJsonState)
        source.read_patience = 1.0  # the unreadable ids below: not the drill's 10 s
        try:
            assert sources.write_rate == 20
            assert "writes PUT http://<data.state.test. via 127.0.0.1:" in source.describe()
            assert "read-back GET /items/{id} per id (4 at once); stated replication async (max lag 0.5 s)" \
                in source.describe()
            acks = [source.write(f"w-{i}", client=i % 3) for i in range(6)]
            assert [a.outcome for a in acks] == ["ack"] * 6, acks
            # the acknowledging node and the sequence at the profile's dotted paths (a string "7" is 7)
            assert {a.region for a in acks} <= {"node-a", "node-b"} and all(a.seq for a in acks), acks
            assert [w for _, w in running.service.writes] == [f"w-{i}" for i in range(6)]
            assert running.service.hosts["/items/w-0"] == "data.state.test"  # the service's Host header
            answer = source.lookup(["w-0", "w-5", "never-written"])
            assert answer.error is None and answer.failed == ()
            assert set(answer.found) == {"w-0", "w-5"} and answer.found["w-5"] == 6
            assert answer.where in running.gateways.values()

            running.service.mode = "refuse"
            refused = source.write("w-refused", client=0)
            assert (refused.outcome, refused.error) == ("refused", "HTTP 503: read-only")
            running.service.unreadable = {"w-1"}  # one id whose read fails: "not read", never "not stored"
            partly = source.lookup(["w-0", "w-1"])
            assert (partly.found, partly.failed, partly.error) == ({"w-0": 1}, ("w-1",), None), partly
            running.service.mode = "no_read"  # none can be read: the read-back failed, and says how
            unread = source.lookup(["w-0", "w-1"])
            assert unread.error is not None and unread.found == {}, unread
            assert f"GET http://{unread.error.split('GET http://')[1].split('/')[0]}/items/w-0: HTTP 500" \
                in unread.error
        finally:
            source.close()


def test_a_lookup_read_back_and_the_reference_apps_defaults(tmp_path: Path) -> None:
    state = {**STATE, "http": {"write": STATE["http"]["write"], "read_back": {"lookup": "/items:lookup"}}}
    with state_service() as running:
        source = _target(tmp_path, running, state).sources().state
        assert source is not None
        try:
            assert source.write("w-1", client=0).outcome == "ack"
            answer = source.lookup(["w-1", "w-2"])
            assert (answer.found, answer.failed, answer.error) == ({"w-1": 1}, (), None)
        finally:
            source.close()


def test_the_health_check_writes_a_probe_and_reads_it_back(tmp_path: Path) -> None:
    with state_service() as running:
        target = _target(tmp_path, running)
        target.check_health(timeout=1)
        (probe,) = running.service.store
        assert probe.startswith("gameday-probe-")


@pytest.mark.parametrize(("mode", "message"), [
    ("refuse", "state: the write path does not take writes: probe write gameday-probe-* refused (HTTP 503: "
               "read-only); writes PUT http://<data.state.test. via 127.0.0.1:*>:*/items/{id}, read-back GET *"),
    ("lose", "state: a probe write was acknowledged and is not read back: gameday-probe-* not found at "
             "127.0.23*.1; writes PUT *"),
    ("no_read", "state: the read-back does not answer: reading gameday-probe-* back failed (no id could be read "
                "back in 1 s (GET http://127.0.23*/items/gameday-probe-*: HTTP 500)); writes PUT *"),
])
def test_a_write_path_that_does_not_work_fails_the_health_check_saying_why(
        tmp_path: Path, mode: str, message: str) -> None:
    with state_service() as running:
        running.service.mode = mode
        target = _target(tmp_path, running)
        with pytest.raises(TargetUnreachable) as info:
            target.check_health(timeout=0.5)
        text = str(info.value)
        assert text.startswith("external federation loopback-state is not healthy after 0.5 s: "), text
        assert fnmatch.fnmatchcase(text, f"*: {message}"), text


def test_a_dry_run_health_check_reads_but_never_writes(tmp_path: Path) -> None:
    with state_service() as running:
        target = _target(tmp_path, running)
        target.probe_writes = False
        target.check_health(timeout=1)
        assert running.service.writes == []
        running.service.mode = "no_read"
        with pytest.raises(TargetUnreachable, match="the read-back does not answer"):
            target.check_health(timeout=0.3)


DRILL = '''
import pytest

@pytest.mark.gameday
def test_mark(drill):
    with drill.fault("mark", baseline=1.0) as fault:
        result = drill.observe(fault, seconds=1.5)
    result.assert_verdict("data_loss")
'''


def _drill_figures(root: Path) -> dict[str, Any]:
    (path,) = sorted(root.glob("reports/runs/*/drills/*/figures-*.json"))
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _mark_profile(tmp_path: Path, running: Running, state: dict[str, Any] | None) -> tuple[Path, Path]:
    marker = tmp_path / "injected"
    data = running.profile(state)
    data["faults"] = {"mark": {"inject": {"argv": ["touch", str(marker)]}, "revert": {"argv": ["true"]}}}
    path = tmp_path / "svc.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, marker


@pytest.mark.slow
def test_a_drill_whose_writes_are_refused_refuses_before_injecting(
        tmp_path: Path, pytester_ini: pytest.Pytester) -> None:
    with state_service() as running:
        profile, marker = _mark_profile(tmp_path, running, STATE)
        running.service.mode = "refuse"
        pytester_ini.makepyfile(test_mark=DRILL)
        result = pytester_ini.runpytest_subprocess("--gameday-target=external", f"--gameday-profile={profile}",
                                                   timeout=120)
    out = result.stdout.str() + result.stderr.str()
    print(out[-3000:])
    assert result.ret != 0, out[-3000:]
    assert "state: the write path does not take writes: probe write gameday-probe-" in out, out[-3000:]
    assert "nothing was injected" in out, out[-3000:]
    assert not marker.exists()  # nothing injected


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "state"), [("ok", STATE), ("lose_but_probes", STATE), ("ok", None)],
                         ids=["writes-kept", "writes-lost", "no-state-section"])
def test_a_drill_measures_the_data_verdicts_through_the_profile_and_none_without_it(
        tmp_path: Path, pytester_ini: pytest.Pytester, mode: str, state: dict[str, Any] | None) -> None:
    with state_service() as running:
        profile, marker = _mark_profile(tmp_path, running, state)
        running.service.mode = mode
        pytester_ini.makepyfile(test_mark=DRILL)
        result = pytester_ini.runpytest_subprocess("--gameday-target=external", f"--gameday-profile={profile}",
                                                   timeout=120)
    out = result.stdout.str()
    assert marker.exists(), out[-3000:]
    figures = _drill_figures(pytester_ini.path)
    if state is None:  # no input, no verdict: not applicable with the reason, never a pass
        result.assert_outcomes(skipped=1)  # a drill whose every verdict is n/a passes nothing
        assert figures["not_applicable"]["data_loss"] == "no state layer (no write path)"
        assert "state" not in figures or not figures["state"], figures.get("state")
        return
    verdicts = {v["name"]: v["outcome"] for v in figures["verdicts"]}
    loss = figures["state"]["data_loss"]
    print(json.dumps(figures["state"], indent=2))
    if mode == "ok":
        result.assert_outcomes(passed=1)
        assert verdicts["data_loss"] == "pass"
        assert loss["lost"] == 0 and loss["acked_read_back"] > 0, loss
    else:  # a store that acknowledges writes and keeps none of them: every one is lost
        result.assert_outcomes(failed=1)
        assert verdicts["data_loss"] == "fail"
        assert loss["lost"] == loss["acked_read_back"] > 0, loss
        assert re.search(r"AssertionError: data loss: (\d+) of \1 acknowledged writes lost", out), out[-3000:]


def test_a_stated_failover_is_the_write_recovery_predictions_input(tmp_path: Path) -> None:
    st = parse_profile(_state(failover={**FAILOVER, "dead_connection": 3.0}), "team.yaml").state
    assert st is not None
    stated = st.stated()
    assert stated is not None and stated.failover is not None and stated.dead_connection == 3.0
    f = stated.failover
    assert (f.fall, f.lease, f.source) == (3, 2.0, "the profile's state.failover")
    # the primary's node stopped: detection 2 x 1 s .. 3 x 1.5 s, promotion after the 2 s lease at a
    # check (1.5 s), writers told within 0.5 s, one write of 1 s
    w = write_recovery_window(stated, effect="stopped", region="a", primary="a", region_out_latest=None,
                              write_timeout=1.0)
    assert (w.earliest, w.latest) == (pytest.approx(2.0 + 1.5), pytest.approx(4.5 + 2.0 + 1.5 + 0.5 + 1.0)), w
    assert "the profile's state.failover" in w.derivation
    # without it, a drill that takes the primary has no prediction, and says why
    bare = parse_profile(_state(), "team.yaml").state
    assert bare is not None
    unknown = write_recovery_window(bare.stated(), effect="stopped", region="a", primary="a",
                                    region_out_latest=None, write_timeout=1.0).unknown
    assert "states no failover timing" in (unknown or "")


def test_a_stated_election_is_a_sync_stores_write_recovery_input(tmp_path: Path) -> None:
    st = parse_profile(_state(replication="sync", max_lag=..., election=ELECTION), "team.yaml").state
    assert st is not None
    stated = st.stated()
    assert stated is not None and stated.election is not None
    assert stated.election.source == "the profile's state.election"
    # the leader's node stopped: 4 - 1 = 3 s at the earliest; 9 + 0.8 s + one write of 1 s at the latest
    w = write_recovery_window(stated, effect="stopped", region="a", primary="a", region_out_latest=None,
                              write_timeout=1.0)
    assert (w.earliest, w.latest) == (3.0, pytest.approx(10.8)), w
    assert "the profile's state.election" in w.derivation
    bare = parse_profile(_state(replication="sync", max_lag=...), "team.yaml").state
    assert bare is not None
    unknown = write_recovery_window(bare.stated(), effect="stopped", region="a", primary="a",
                                    region_out_latest=None, write_timeout=1.0).unknown
    assert "leader election, whose timing the federation does not state" in (unknown or "")


@contextmanager
def _status_server(body: Any) -> Iterator[str]:
    """A loopback HTTP server answering every GET with *body* as JSON."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/status"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _with_primary(tmp_path: Path, primary: dict[str, Any] | None) -> ExternalTarget:
    f = tmp_path / "team.yaml"
    f.write_text(yaml.safe_dump(_state(primary=primary) if primary is not None else _state()))
    return ExternalTarget.from_file(f, tmp_path / "work")


def test_the_primary_is_read_where_the_profile_says_and_a_wrong_answer_is_named(tmp_path: Path) -> None:
    with _status_server({"store": {"primary": "b", "epoch": 4}}) as url:
        assert _with_primary(tmp_path, {"url": url, "field": "store.primary"}).state_primary() == "b"
        with pytest.raises(TargetError, match=r"field 'store.epoch': got 4, expected one of the profile's regions "
                                              r"\['a', 'b'\]"):
            _with_primary(tmp_path, {"url": url, "field": "store.epoch"}).state_primary()
    with pytest.raises(TargetError, match=r"states no state\.primary"):
        _with_primary(tmp_path, None).state_primary()
    with pytest.raises(TargetError, match=r"state.primary: http://127.0.0.1:9/status field 'primary': ConnectError"):
        _with_primary(tmp_path, {"url": "http://127.0.0.1:9/status", "timeout": 0.5}).state_primary()
