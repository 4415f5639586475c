"""The load is an open model over independent clients (issue 29): real locust against a real
DNS server (TTL 2 s) and HTTP gateway on loopback, 20 users at 60 req/s for 6 s.

The old load spawned every user in one batch and paced each at a constant throughput that
made up for late wake-ups: all 20 users fired within milliseconds every 1/3 s (40 then 20
sends per 0.5 s bin), and every user's DNS cache expired at the same tick. Both tests below
failed on it; the binomial bounds of the error-ratio and headroom verdicts assume independent
requests, which such a load is not.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from gameday.interfaces import Endpoints
from gameday.load.runner import LoadRunner
from tests.load.loopback import loopback_federation

FQDN = "app.open-model.test."
TTL = 2
USERS, RATE, SECONDS = 20, 60.0, 6.0


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every raw record of one 6 s run (each request's line as the locustfile wrote it)."""
    workdir = tmp_path_factory.mktemp("open-model") / "load"
    with loopback_federation(FQDN, ttl=TTL) as ep:
        runner = LoadRunner(ep, users=USERS, rate=RATE, workdir=workdir, workers=1, max_seconds=60, timeout=1.0)
        try:
            runner.start(timeout=20)
            time.sleep(SECONDS)
        finally:
            runner.stop()
    lines = [json.loads(line) for path in sorted((workdir / "records").glob("requests-*.jsonl"))
             for line in path.read_text().splitlines() if line.strip()]
    return [r for r in lines if "t" in r]


def _endpoints_only() -> Endpoints:
    return Endpoints(dns_server=("127.0.0.1", 53), fqdn=FQDN, gateway_port=80)


@pytest.mark.slow
def test_no_20_ms_window_holds_ten_sends(records: list[dict[str, Any]]) -> None:
    sends = sorted(r["t"] for r in records)
    assert len(sends) >= 0.6 * RATE * SECONDS, len(sends)  # the offered rate was (about) achieved
    worst = max(sum(1 for u in sends[i:i + 20] if u - t < 0.020) for i, t in enumerate(sends))
    # Poisson at 60/s: 1.2 sends expected in 20 ms, P(>= 10) ~ 1e-6 per window; the lockstep
    # load put all 20 users' sends into one such window every 1/3 s.
    assert worst < 10, f"{worst} sends within 20 ms"
    gaps = [b - a for a, b in itertools.pairwise(sends)]
    cv = (sum((g - sum(gaps) / len(gaps)) ** 2 for g in gaps) / len(gaps)) ** 0.5 / (sum(gaps) / len(gaps))
    assert 0.7 < cv < 1.4, f"gaps between sends: coefficient of variation {cv:.2f} (Poisson: 1)"


@pytest.mark.slow
def test_the_clients_dns_caches_expire_at_independent_phases(records: list[dict[str, Any]]) -> None:
    asked: dict[str, list[float]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r["t"]):
        if r.get("q"):
            asked[r["c"]].append(r["t"])
    assert len(asked) >= 100, f"only {len(asked)} clients asked DNS"  # 200 clients, 360 arrivals
    seconds = [qs[1] for qs in asked.values() if len(qs) >= 2]
    assert len(seconds) >= 10, f"only {len(seconds)} clients asked DNS twice"
    spread = max(seconds) - min(seconds)
    assert spread >= TTL / 2, f"the clients' second DNS queries spread over {spread:.2f} s only"
    ages = [r["age"] for r in records if "age" in r and r.get("q")]
    assert ages and max(ages) > 0.5 * TTL, "every first answer was taken fresh: no independent phases"


def test_a_dropped_arrival_is_counted_apart_not_as_a_request(tmp_path: Path) -> None:
    runner = LoadRunner(_endpoints_only(), users=1, rate=1.0, workdir=tmp_path / "load")
    recs = tmp_path / "load" / "records"
    recs.mkdir(parents=True)
    req = {"t": 10.0, "s": 200, "l": 0.01, "r": "a", "a": "127.0.0.1", "e": None, "c": "x-1", "i": 10.0, "q": 1}
    (recs / "requests-1.jsonl").write_text("\n".join(json.dumps(x) for x in (req, {"d": 10.2}, {"d": 11.5},
                                                                              {"w": 10.5})) + "\n")
    runner.poll()
    assert len(runner.records) == 1
    assert runner.dropped == [10.2, 11.5]
    assert runner.dropped_between(10.0, 11.0) == 1
