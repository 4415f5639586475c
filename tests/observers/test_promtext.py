"""The conformance metrics reader on the reference app's real exposition text and on
prometheus_client's own, parsed by prometheus_client."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from gameday.conformance import promtext
from gameday.fedapp.common import Histogram as AppHistogram
from gameday.fedapp.common import render_metrics


def test_the_reference_app_s_metrics_parse() -> None:
    h = AppHistogram()
    for v in (0.002, 0.02, 0.3):
        h.observe(v)
    text = render_metrics([("gameday_snapshot_pulls_total", 'node="proxy-a",kind="diff"', 3),
                           ("gameday_cp_backlog", "", 0)], {"gameday_cp_backlog": "events waiting"},
                          {"gameday_cp_processing_latency_seconds": h})
    m = promtext.parse(text)
    assert m.value("gameday_snapshot_pulls_total", node="proxy-a", kind="diff") == 3
    assert m.types["gameday_snapshot_pulls_total"] == "counter"
    assert m.types["gameday_cp_backlog"] == "gauge" and m.value("gameday_cp_backlog") == 0
    assert m.types["gameday_cp_processing_latency_seconds"] == "histogram"
    buckets = m.histogram("gameday_cp_processing_latency_seconds")
    assert buckets[-1] == (math.inf, 3)
    assert promtext.quantile_upper_bound(buckets, 0.99) == 0.5


def test_prometheus_client_s_own_text_and_bucket_deltas() -> None:
    reg = CollectorRegistry()
    c = Counter("pulls", "pulls", ["kind"], registry=reg)
    lat = Histogram("lat_seconds", "latency", buckets=(0.1, 1.0), registry=reg)
    c.labels(kind="full").inc(2)
    lat.observe(0.05)
    before = promtext.parse(generate_latest(reg).decode()).histogram("lat_seconds")
    lat.observe(0.5)
    lat.observe(0.7)
    after = promtext.parse(generate_latest(reg).decode())
    assert after.value("pulls_total", kind="full") == 2
    delta = promtext.bucket_delta(after.histogram("lat_seconds"), before)
    assert delta == [(0.1, 0.0), (1.0, 2.0), (math.inf, 2.0)]
    assert promtext.quantile_upper_bound(delta, 0.99) == 1.0


def test_broken_text_fails_loudly() -> None:
    with pytest.raises(ValueError, match="not Prometheus exposition text"):
        promtext.parse('gameday_up{node="a" 1\n')
