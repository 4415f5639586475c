"""Shared plumbing for the benchmarks: topologies, federations, log lines, statistics, tables.

Not a test module and not part of the package: ``bench/run.py`` puts this directory on
``sys.path`` (Python does that for the script's own directory) and imports it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gameday.model.topology import Layout, Topology, generated_topology, load_topology, parse_topology
from gameday.targets.local.federation import LocalFederation

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"


def loadavg() -> tuple[float, float, float]:
    """The machine's 1/5/15-minute load averages (how noisy the run was)."""
    a, b, c = os.getloadavg()
    return round(a, 2), round(b, 2), round(c, 2)


def children_cpu_s() -> float:
    """User + system CPU seconds of every child process this process has waited for (and of
    their descendants that they waited for): the delta around a subprocess run is the CPU of
    its whole process tree (a federation's components included, reaped by their launcher)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else math.nan


def percentile(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (*q* in 0..100): a value that was actually observed."""
    if not xs:
        return math.nan
    s = sorted(xs)
    return float(s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))])


def fmt(x: float | None, digits: int = 1, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}{unit}"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


@dataclass
class BenchResult:
    """What one benchmark hands back to ``run.py``: raw data (JSON) and tables (Markdown)."""

    name: str
    title: str
    data: dict[str, Any] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    load_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_end: tuple[float, float, float] = (0.0, 0.0, 0.0)
    seconds: float = 0.0
    error: str | None = None


def local_topology(**timing: float) -> Topology:
    """``clusters/local.yaml``, with optional timing overrides."""
    data = load_topology().model_dump()
    data["timing"].update(timing)
    return parse_topology(data, "bench:local")


def scaled_topology(regions: int, *, capacity_rps: float | None = None, layout: Layout | None = None,
                    **timing: float) -> Topology:
    """``clusters/local.yaml``'s timings and load with *regions* generated regions ``r01..rNN``
    (:func:`gameday.model.topology.generated_topology`).

    Each region has the default 2 instances, weight 10 and falls back to the next region;
    ``capacity_rps`` (per instance) defaults to local.yaml's. *layout* is the control-plane
    layout (None: the topology's default, ``regional`` above 10 regions).
    """
    topo = generated_topology(regions, layout=layout, name=f"bench-{regions}", **timing)
    if capacity_rps is None:
        return topo
    data = topo.model_dump()
    for r in data["regions"]:
        r["capacity_rps"] = capacity_rps
    return parse_topology(data, f"bench:{regions}-regions")


def workdir(prefix: str) -> Path:
    # A short path under /tmp: Unix socket paths are limited to 108 bytes.
    return Path(tempfile.mkdtemp(prefix=f"gdbench-{prefix}-"))


@contextlib.contextmanager
def running_federation(topology: Topology, prefix: str, timeout: float = 120.0,
                       keep: bool = False) -> Iterator[tuple[LocalFederation, float]]:
    """Start a federation; yield it with its bring-up time (``start()`` until ready, s).

    Always stops every process; removes the work directory unless *keep* or it failed.
    """
    wd = workdir(prefix)
    fed = LocalFederation.from_topology(topology, wd)
    failed = True
    try:
        t0 = time.monotonic()
        fed.start(timeout=timeout)
        yield fed, time.monotonic() - t0
        failed = False
    finally:
        fed.stop()
        if not keep and not failed:  # a failed run keeps its logs (the error names the path)
            shutil.rmtree(wd, ignore_errors=True)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a component log (other lines, e.g. tracebacks, are skipped)."""
    out = []
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


class LogTail:
    """Incrementally read JSON log lines of several components (offsets kept per file)."""

    def __init__(self, logdir: Path, names: Sequence[str]) -> None:
        self.paths = {n: logdir / f"{n}.log" for n in names}
        self.offsets = dict.fromkeys(names, 0)

    def skip_to_end(self) -> None:
        for n, p in self.paths.items():
            with contextlib.suppress(FileNotFoundError):
                self.offsets[n] = p.stat().st_size

    def read(self, skip: Container[str] = ()) -> list[tuple[str, dict[str, Any]]]:
        """New JSON lines of every component not in *skip* (skipped files keep their offset)."""
        out: list[tuple[str, dict[str, Any]]] = []
        for n, p in self.paths.items():
            if n in skip:
                continue
            try:
                with p.open("rb") as fh:
                    fh.seek(self.offsets[n])
                    data = fh.read()
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1  # a half-written last line is read next time
            self.offsets[n] += end
            for line in data[:end].splitlines():
                if line.startswith(b"{"):
                    with contextlib.suppress(ValueError):
                        out.append((n, json.loads(line)))
        return out


def binom_tail(k: int, n: int, q: float) -> float:
    """P(X >= k) for X ~ Binomial(n, q)."""
    return sum(math.comb(n, i) * q ** i * (1 - q) ** (n - i) for i in range(k, n + 1))


def upper_bound(k: int, n: int, confidence: float = 0.95) -> float:
    """Clopper-Pearson upper bound of a rate seen k times in n: the q at which P(X <= k) = 1 - confidence."""
    if n == 0:
        return 1.0
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(60):  # bisection: P(X <= k) falls as q grows
        mid = (lo + hi) / 2
        if 1 - binom_tail(k + 1, n, mid) > 1 - confidence:
            lo = mid
        else:
            hi = mid
    return hi
