"""The load's watermarks: a window of requests is decided only once every request sent in it
is recorded.

A request is recorded when it completes, up to a DNS and an HTTP timeout after it was sent.
The drill used to decide client recovery from the records it had at that instant, so a window
could look clean while its failed requests were still timing out; the block then ended and the
final records showed no recovery at all ("client recovery not reached", seen on three xdist
workers). Each locust process now ends every flush with ``{"w": t}``: all it sent before ``t``
is written. Real locust, a real DNS server (dnspython, UDP) and a real HTTP gateway on
loopback whose answers take 0.6 s; bounded to a few seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gameday.interfaces import Endpoints
from gameday.load.runner import LoadRunner
from tests.load.loopback import loopback_federation

FQDN = "app.watermark.test."
DELAY = 0.6


@pytest.fixture
def slow_federation() -> Iterator[Endpoints]:
    """A DNS server answering FQDN -> 127.0.0.1 (TTL 5) and a gateway serving 200s, each after DELAY s."""
    with loopback_federation(FQDN, delay=DELAY) as ep:
        yield ep


@pytest.mark.slow
def test_every_request_sent_before_the_watermark_is_already_recorded(slow_federation: Endpoints,
                                                                      tmp_path: Path) -> None:
    runner = LoadRunner(slow_federation, users=40, rate=40.0, workdir=tmp_path / "load", workers=1,
                        max_seconds=60, timeout=1.0)
    snapshots: list[tuple[float, float | None, int]] = []  # (poll time, watermark, records so far)
    try:
        runner.start(timeout=20)
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            runner.poll()
            snapshots.append((time.monotonic(), runner.complete_until(), len(runner.records)))
            time.sleep(0.1)
    finally:
        runner.stop()
    final = runner.records
    assert len(final) > 60, len(final)
    marked = [(now, mark, n) for now, mark, n in snapshots if mark is not None]
    assert len(marked) > len(snapshots) // 2, snapshots[:5]
    for now, mark, n in marked:
        late = [r for r in final[n:] if r.t < mark]
        assert not late, (f"watermark {mark:.3f} (poll at {now:.3f}) claimed complete, but {len(late)} "
                          f"request(s) sent before it were recorded later, e.g. sent {late[0].t:.3f}")
        # it trails the requests still in flight: about one answer's time behind the poll
        assert now - mark >= DELAY - 0.2, (now, mark)
    # the control: the records' newest send time, or the poll's own time, as "complete" would
    # have claimed requests that were recorded only later (what decided windows too early)
    early = [(now, n) for now, _, n in marked if any(r.t < now for r in final[n:])]
    assert early, "the test cannot fail: no request was ever in flight at a poll"
    assert marked[-1][1] is not None and marked[-1][1] > snapshots[0][0], "the watermark never moved on"


def test_a_locustfile_without_watermarks_is_never_taken_as_complete(tmp_path: Path) -> None:
    ep = Endpoints(dns_server=("127.0.0.1", 53), fqdn=FQDN, gateway_port=80)
    runner = LoadRunner(ep, users=1, rate=1.0, workdir=tmp_path / "load")
    records = tmp_path / "load" / "records"
    records.mkdir(parents=True)
    req = {"t": 10.0, "s": 200, "l": 0.01, "r": "a", "a": "127.0.0.1", "e": None}
    (records / "requests-1.jsonl").write_text(json.dumps(req) + "\n" + json.dumps({"w": 10.5}) + "\n")
    runner.poll()
    assert runner.complete_until() == 10.5
    (records / "requests-2.jsonl").write_text(json.dumps({**req, "t": 11.0}) + "\n")  # a user's own locustfile
    runner.poll()
    assert runner.complete_until() is None
    assert [r.t for r in runner.records] == [10.0, 11.0]  # watermarks are not requests
