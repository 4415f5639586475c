"""The Prometheus text exposition format (what every component's ``/metrics`` serves), read
with ``prometheus_client``'s parser, and quantiles from cumulative histogram buckets.

:func:`parse` flattens the parsed families into samples with labels and float values, and
keeps each family's type (``# TYPE``), so the conformance checks can ask for a sample by name
and labels, or a histogram's buckets. Broken exposition text raises ``ValueError`` (the
parser's), so a component that serves it fails loudly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass
class Metrics:
    """Parsed exposition text."""

    samples: list[Sample] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    """Metric family -> ``counter``, ``gauge``, ``histogram``, ... from ``# TYPE``."""

    def find(self, name: str, **labels: str) -> list[Sample]:
        """Samples called *name* whose labels include *labels*."""
        return [s for s in self.samples
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]

    def value(self, name: str, **labels: str) -> float | None:
        """The value of the one sample matching, summed if several match; None if none does."""
        found = self.find(name, **labels)
        return sum(s.value for s in found) if found else None

    def histogram(self, name: str, **labels: str) -> list[tuple[float, float]]:
        """Cumulative buckets of histogram *name* as ``(upper bound, count)``, ascending
        (``+Inf`` last); empty if the histogram is not exposed."""
        found = self.find(f"{name}_bucket", **labels)
        return sorted((float(s.labels["le"]), s.value) for s in found if "le" in s.labels)


def parse(text: str) -> Metrics:
    """Parse Prometheus text format.

    Raises:
        ValueError: the text is not valid exposition format (prometheus_client's message).
    """
    m = Metrics()
    try:
        for fam in text_string_to_metric_families(text):
            m.types[fam.name] = fam.type
            if fam.type == "counter":
                # The parser names a counter's family without ``_total``; exporters (and these
                # checks) often name it with: both spellings find its type.
                m.types[fam.name + "_total"] = fam.type
            m.samples += [Sample(s.name, dict(s.labels), float(s.value)) for s in fam.samples]
    except (ValueError, TypeError, IndexError) as exc:  # the parser raises any of these on bad text
        raise ValueError(f"not Prometheus exposition text: {exc}") from exc
    return m


Buckets = list[tuple[float, float]]


def bucket_delta(after: Buckets, before: Buckets) -> Buckets:
    """Cumulative buckets of the observations made between two scrapes of one histogram.

    Raises:
        ValueError: the bucket bounds differ, or a count went down (the process restarted
            between the scrapes, so the difference means nothing).
    """
    if not before:
        return list(after)
    if [b for b, _ in after] != [b for b, _ in before]:
        raise ValueError(f"bucket bounds changed between scrapes: {before} -> {after}")
    out = []
    for (le, a), (_, b) in zip(after, before, strict=True):
        if a < b:
            raise ValueError(f"bucket le={le} went down from {b:g} to {a:g}: the histogram was reset")
        out.append((le, a - b))
    return out


def quantile_upper_bound(buckets: Buckets, q: float) -> float:
    """An upper bound of the *q* quantile: the upper bound of the first bucket whose
    cumulative count reaches ``q x total`` (``inf`` if that is the ``+Inf`` bucket,
    NaN when there are no observations).
    """
    if not buckets or buckets[-1][1] <= 0:
        return math.nan
    total = buckets[-1][1]
    rank = q * total
    for le, count in buckets:
        if count >= rank:
            return le
    return math.inf
