"""A small parser of the Prometheus text exposition format (what every component's
``/metrics`` serves), and quantiles from cumulative histogram buckets.

Only what the conformance checks need: samples with labels and float values, ``# TYPE``
lines, histograms (``_bucket{le=...}``, ``_sum``, ``_count``). A malformed line raises
``ValueError`` naming the line, so a component that serves broken text fails loudly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


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
        ValueError: a line is neither a comment nor a valid sample (names the line).
    """
    m = Metrics()
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                m.types[parts[2]] = parts[3]
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ValueError(f"line {i}: not a Prometheus sample: {raw!r}")
        name, _, inner, value = match.group(1), match.group(2), match.group(3), match.group(4)
        labels: dict[str, str] = {}
        if inner:
            pos = 0
            while pos < len(inner):
                lm = _LABEL.match(inner, pos)
                if lm is None:
                    raise ValueError(f"line {i}: bad labels {inner!r}")
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
        try:
            v = float(value)
        except ValueError as exc:
            raise ValueError(f"line {i}: value {value!r} is not a number") from exc
        m.samples.append(Sample(name, labels, v))
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
