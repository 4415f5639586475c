"""The load seam: a conftest's ``pytest_gameday_make_load`` replaces locust with its own
generator (gameday.load.generator), and a real drill runs under it."""

from __future__ import annotations

import json

import pytest

from gameday.load.generator import RecordedLoad

INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider -p no:gameday_plots -p no:gameday_history\n"

THREAD_LOAD = '''
"""A load generator of its own: clients in threads, each resolving the service name itself
(honouring the TTL) and sending Poisson arrivals at its share of the rate."""
import random
import threading
import time

import dns.message
import dns.query
import httpx

from gameday import LoadError, RecordedLoad, RequestRec


class ThreadLoad(RecordedLoad):
    def __init__(self, endpoints, users, rate):
        super().__init__(rate=rate, users=users, timeout=1.0)
        self.ep = endpoints
        self.new = []
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.threads = []

    def start(self):
        for i in range(self.users):
            t = threading.Thread(target=self.client, args=(random.Random(i),), daemon=True)
            t.start()
            self.threads.append(t)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not self.new:
            time.sleep(0.05)
        if not self.new:
            raise LoadError("no request completed within 10 s")

    def client(self, rng):
        host, port = self.ep.dns_server
        addr, expires = None, 0.0
        gap = self.users / self.rate
        with httpx.Client(timeout=self.timeout, trust_env=False) as http:
            due = time.monotonic() + rng.expovariate(1 / gap)
            while not self.halt.wait(max(0.0, due - time.monotonic())):
                t = time.monotonic()
                due = max(due + rng.expovariate(1 / gap), t)
                try:
                    if addr is None or t >= expires:
                        answer = dns.query.udp(dns.message.make_query(self.ep.fqdn, "A"), host, port=port,
                                               timeout=self.timeout).answer[0]
                        addr, expires = answer[0].address, t + answer.ttl
                    url = f"{self.ep.client.scheme}://{addr}:{self.ep.gateway_port}{self.ep.client.path}"
                    r = http.get(url)
                    served = r.headers.get("X-Served-By", "").split("/")[0] or None
                    rec = RequestRec(t, r.status_code, time.monotonic() - t, served)
                except Exception as exc:
                    rec = RequestRec(t, 0, time.monotonic() - t, None, type(exc).__name__)
                with self.lock:
                    self.new.append(rec)

    def poll(self):
        with self.lock:
            new, self.new = self.new, []
        self.records.extend(new)
        return new

    def stop(self):
        self.halt.set()
        for t in self.threads:
            t.join(5)
        self.poll()


def pytest_gameday_make_load(config, endpoints, users, rate, workdir):
    (workdir / "made-by-conftest").write_text(f"{users} {rate}")
    return ThreadLoad(endpoints, users, rate)
'''

DRILL = '''
import pytest


@pytest.mark.gameday(users=10, rate=30)
def test_outage(drill, load):
    assert type(load).__name__ == "ThreadLoad"
    with drill.fault("gateway_down", drill.pick_region()) as fault:
        result = drill.observe_switchover(fault)
    result.assert_switchover_under(10)
    result.assert_client_recovered(30)
    result.assert_versions_incremented()
'''


def test_a_conftest_load_generator_replaces_locust_for_a_real_drill(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makeconftest(THREAD_LOAD)
    pytester.makepyfile(test_drill=DRILL)
    result = pytester.runpytest_subprocess("--gameday-seed=2", "--gameday-recovery-window=3", timeout=240)
    result.assert_outcomes(passed=1)
    figures = list((pytester.path / "reports" / "runs").glob("*/drills/*/figures-0.json"))
    assert len(figures) == 1
    data = json.loads(figures[0].read_text())
    verdicts = {v["name"]: v["outcome"] for v in data["verdicts"]}
    assert verdicts == {"switchover": "pass", "client_recovery": "pass", "versions": "pass"}, verdicts
    assert data["client_recovery"]["value_s"] is not None
    assert data["load"]["target_rps"] == 30 and data["load"]["achieved_rps"] > 10, data["load"]
    run_dir = figures[0].parents[2]
    made = list(run_dir.glob("load/*/made-by-conftest"))
    assert [p.read_text() for p in made] == ["10 30.0"]
    assert not list(run_dir.glob("load/*/records"))  # locust never ran


def test_a_load_hook_returning_something_else_is_an_error_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makeconftest("def pytest_gameday_make_load(config, endpoints, users, rate, workdir):\n"
                          "    return object()\n")
    pytester.makepyfile(test_drill=DRILL)
    result = pytester.runpytest_subprocess("--gameday-seed=2", timeout=120)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*LoadError: pytest_gameday_make_load returned object, not a LoadGenerator*"])


def test_a_recorded_load_that_leaves_a_method_out_cannot_be_made() -> None:
    class Half(RecordedLoad):
        def start(self) -> None:
            pass

        def stop(self) -> None:
            pass

    with pytest.raises(TypeError, match="abstract method poll"):
        Half(rate=1.0, users=1)  # type: ignore[abstract]
