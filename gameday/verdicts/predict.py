"""Predictions (DESIGN.md §8): how fast the federation's own configuration says it fails over.

A drill's figures are judged twice: against the article's 180 s ceiling, and against the
window the federation's description predicts. The model, term by term:

detection
    A failed gateway is taken out after ``fall`` failed health checks ``probe_interval``
    apart. A check of a stopped gateway (refused connection) or an unready one (503) fails at
    once; a check of a hung gateway fails at ``probe_timeout``. The first failing check lands
    anywhere in the first interval after the fault, so:

    * fails at once: ``(fall - 1) x interval`` .. ``fall x interval``
    * fails at the timeout: ``(fall - 1) x interval + timeout`` .. ``fall x (interval + timeout)``
      (the latest holds for a checker that waits ``interval`` after each check *ends*, as the
      reference federation's does, and so also for one that starts checks ``interval`` apart).
GSLB propagation
    From the health decision to the DNS answers: ``timing.gslb_delay`` where stated (a GSLB that
    applies its decisions in batches, or pushes a zone to its servers, answers up to that late;
    it adds to the latest only, a decision may land just before a batch). Not stated: 0, as for
    the reference GSLB by default and a DNS server checking its own gateways (PowerDNS
    ``ifportup``), which answer from the decision at once.
entry-node propagation
    From the health decision to every surviving entry node: the reference federation's
    sync chain (agent event, control-plane commit, ``broadcast_delay``, diff pull:
    :attr:`gameday.model.topology.Topology.propagation`); a profile states it as
    ``timing.propagation`` or it is unknown.
clients
    A client holds an address for at most the TTL the DNS server answers with (observed where
    it can be), then needs one request (at most the load's request timeout) to move.

DNS convergence is predicted by detection + GSLB propagation; switchover by the entry nodes'
path (detection + entry-node propagation), or where no entry node reports its routes by DNS
convergence + one request; client recovery by ``0 .. DNS convergence + TTL + one request``
(its §4 definition, the start of the first window within the error SLO, may begin before the
last client error, so it has no lower bound).

Pure: no I/O, no clocks. An input that is unknown makes the window that needs it
*unknown* (its verdict n/a with the reason), never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from gameday.model.topology import Topology

FailsAt = Literal["at once", "at the timeout"]

FIGURES = ("switchover", "dns_convergence", "client_recovery")


@dataclass(frozen=True, kw_only=True)
class StatedTiming:
    """What the federation's description states about failure detection and propagation.

    Every duration is in seconds; None: the description does not say (the windows needing
    it are unknown). ``*_from`` fields say where each value came from, for the derivation.
    """

    source: str
    """Where the timing comes from (``topology clusters/local.yaml``, ``profile team.yaml``)."""
    probe_interval: float | None = None
    probe_timeout: float | None = None
    fall: int | None = None
    dns_ttl: float | None = None
    """The TTL clients hold an answer for: the TTL the DNS server answers with where it was observed."""
    dns_ttl_from: str = "stated"
    gslb_propagation: float | None = 0.0
    """Health decision -> DNS answers, at most (0: the DNS server answers from its decisions at once)."""
    gslb_propagation_from: str = "the DNS server answers from its own health decisions at once"
    """How the GSLB propagation was stated (``timing.gslb_delay``), or what taking it as 0 assumes."""
    entry_propagation: float | None = None
    """Health decision -> every surviving entry node; None: unknown."""
    entry_propagation_min: float = 0.0
    """The part of it every path takes (a stated broadcast delay): it sets the earliest too."""
    entry_propagation_from: str = ""
    """How the entry-node propagation was stated (``broadcast_delay 0 s + sync chain 0.1 s``)."""
    request: float = 1.0
    """One client request, at most: the load's request timeout."""

    def as_dict(self) -> dict[str, object]:
        return {"source": self.source, "probe_interval_s": self.probe_interval, "probe_timeout_s": self.probe_timeout,
                "fall": self.fall, "dns_ttl_s": self.dns_ttl, "dns_ttl_from": self.dns_ttl_from,
                "gslb_propagation_s": self.gslb_propagation, "gslb_propagation_from": self.gslb_propagation_from,
                "entry_propagation_s": self.entry_propagation,
                "entry_propagation_from": self.entry_propagation_from, "request_s": self.request}


@dataclass(frozen=True, kw_only=True)
class Window:
    """The predicted window of one figure, seconds after ``t_fault``."""

    figure: str
    earliest: float = 0.0
    latest: float = 0.0
    derivation: str = ""
    """How the bounds follow from the stated timing, in words and numbers."""
    unknown: str | None = None
    """Why there is no window (an input is unknown); the figure's verdict is then n/a."""

    @property
    def known(self) -> bool:
        return self.unknown is None

    def shown(self) -> str:
        """``0.40-0.70 s`` (or ``n/a``)."""
        return f"{self.earliest:.2f}-{self.latest:.2f} s" if self.known else "n/a"

    def as_dict(self) -> dict[str, object]:
        if not self.known:
            return {"figure": self.figure, "unknown": self.unknown}
        return {"figure": self.figure, "earliest_s": round(self.earliest, 4), "latest_s": round(self.latest, 4),
                "derivation": self.derivation}


@dataclass(frozen=True, kw_only=True)
class Detection:
    """When the health checks take a failed gateway out, seconds after the fault."""

    earliest: float
    latest: float
    derivation: str


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """A drill's predicted windows (switchover, DNS convergence, client recovery)."""

    fault: str
    timing: StatedTiming
    windows: dict[str, Window] = field(default_factory=dict)
    detection: Detection | None = None

    def window(self, figure: str) -> Window:
        return self.windows.get(figure) or Window(figure=figure, unknown="no prediction for this figure")

    def summary(self) -> str:
        """One line: ``detection ...: 0.40-0.60 s; switchover 0.40-0.70 s; ...``."""
        parts = [f"detection {self.detection.derivation}" if self.detection is not None else ""]
        for name in FIGURES:
            w = self.window(name)
            parts.append(f"{name.replace('_', ' ')} {w.shown()}" if w.known else f"{name.replace('_', ' ')} n/a "
                         f"({w.unknown})")
        return "; ".join(p for p in parts if p)

    def lines(self) -> list[str]:
        """The prediction as the run header and the dry run print it, one figure a line."""
        out = [f"prediction for {self.fault} (from {self.timing.source}):"]
        if self.detection is not None:
            out.append(f"  detection {self.detection.derivation}")
        for name in FIGURES:
            w = self.window(name)
            out.append(f"  {name.replace('_', ' ')}: {w.shown()}: {w.derivation}" if w.known
                       else f"  {name.replace('_', ' ')}: n/a: {w.unknown}")
        return out

    def as_dict(self) -> dict[str, object]:
        return {"fault": self.fault, "timing": self.timing.as_dict(),
                "detection": None if self.detection is None else
                {"earliest_s": round(self.detection.earliest, 4), "latest_s": round(self.detection.latest, 4),
                 "derivation": self.detection.derivation},
                "windows": {k: w.as_dict() for k, w in self.windows.items()}, "summary": self.summary()}


def from_topology(topology: Topology, source: str, *, request: float = 1.0) -> StatedTiming:
    """The stated timing of a federation the harness deploys from *topology* (local, kind,
    kube: the reference app's GSLB and agents read these very fields)."""
    t, cp = topology.timing, topology.control_plane
    return StatedTiming(
        source=source, probe_interval=t.probe_interval, probe_timeout=t.probe_timeout, fall=t.fall,
        dns_ttl=float(t.dns_ttl), dns_ttl_from="timing.dns_ttl, the TTL the reference GSLB answers with",
        gslb_propagation=t.gslb_delay,
        gslb_propagation_from=(f"timing.gslb_delay: the reference GSLB applies its health decisions every "
                               f"{t.gslb_delay:g} s" if t.gslb_delay else
                               "timing.gslb_delay 0: the reference GSLB answers from its decisions at once"),
        entry_propagation=cp.propagation, entry_propagation_min=cp.broadcast_delay,
        entry_propagation_from=f"broadcast_delay {cp.broadcast_delay:g} s + the reference sync chain "
        f"{cp.propagation - cp.broadcast_delay:g} s", request=request)


def _g(x: float) -> str:
    return f"{x:g}"


def detection(timing: StatedTiming, fails: FailsAt | None) -> Detection | str:
    """The detection window, or why it is unknown."""
    missing = [n for n in ("probe_interval", "probe_timeout", "fall") if getattr(timing, n) is None]
    if missing:
        return f"{', '.join(missing)} not stated ({timing.source})"
    if fails is None:
        return "the fault is not detected by the gateway's health checks alone (no model of its detection)"
    interval, timeout, fall = timing.probe_interval, timing.probe_timeout, timing.fall
    assert interval is not None
    assert timeout is not None
    assert fall is not None
    if fails == "at once":
        lo, hi = (fall - 1) * interval, fall * interval
        text = (f"{fall} x {_g(interval)} s checks, each failing at once (refused or unready): "
                f"{lo:.2f}-{hi:.2f} s")
    else:
        lo, hi = (fall - 1) * interval + timeout, fall * (interval + timeout)
        text = (f"{fall} x ({_g(interval)} s interval + {_g(timeout)} s timeout), each check failing at the "
                f"timeout (hung): {lo:.2f}-{hi:.2f} s")
    return Detection(earliest=lo, latest=hi, derivation=text)


def unpredicted(fault: str, reason: str) -> Prediction:
    """A prediction with no window: every vs-prediction verdict is n/a with *reason*."""
    return Prediction(fault=fault, timing=StatedTiming(source=reason),
                      windows={n: Window(figure=n, unknown=reason) for n in FIGURES})


def predict(timing: StatedTiming, fault: str, fails: FailsAt | None, *, entry_nodes_route: bool) -> Prediction:
    """The predicted windows of a drill of *fault* on a federation stated as *timing*.

    Args:
        fails: how a health check of the failed gateway fails (:attr:`gameday.faults.Fault.gateway_check_fails`).
        entry_nodes_route: the surviving entry nodes report where they route (switchover is
            measured on them); False: switchover is measured from the DNS answers.
    """
    det = detection(timing, fails)
    if isinstance(det, str):
        unknown = {n: Window(figure=n, unknown=f"detection unknown: {det}") for n in FIGURES}
        return Prediction(fault=fault, timing=timing, windows=unknown)
    windows: dict[str, Window] = {}
    if timing.gslb_propagation is None:
        dns = Window(figure="dns_convergence", unknown="the DNS server's propagation from health state to answers "
                     f"is not stated ({timing.source})")
    else:
        p = timing.gslb_propagation
        dns = Window(figure="dns_convergence", earliest=det.earliest, latest=det.latest + p,
                     derivation=f"detection {det.earliest:.2f}-{det.latest:.2f} s + GSLB propagation "
                     f"<= {_g(p)} s ({timing.gslb_propagation_from})")
    windows["dns_convergence"] = dns
    if entry_nodes_route:
        if timing.entry_propagation is None:
            sw = Window(figure="switchover", unknown="propagation from health state to the entry nodes is not "
                        f"stated ({timing.source}: timing.propagation)")
        else:
            p = timing.entry_propagation
            # The entry nodes learn of the failure through the sync chain; a stated delay
            # (broadcast_delay) is part of it and sets the earliest too.
            sw = Window(figure="switchover", earliest=det.earliest + timing.entry_propagation_min,
                        latest=det.latest + p,
                        derivation=f"detection {det.earliest:.2f}-{det.latest:.2f} s + entry-node propagation "
                        f"<= {_g(p)} s ({timing.entry_propagation_from or 'stated'})")
    elif dns.known:
        sw = Window(figure="switchover", earliest=dns.earliest,
                    latest=dns.latest + timing.request,
                    derivation=f"DNS convergence {dns.shown()} + one request <= {_g(timing.request)} s "
                    "(no entry node reports its routes: measured from the DNS answers)")
    else:
        sw = Window(figure="switchover", unknown=dns.unknown)
    windows["switchover"] = sw
    if not dns.known:
        cr = Window(figure="client_recovery", unknown=dns.unknown)
    elif timing.dns_ttl is None:
        cr = Window(figure="client_recovery", unknown=f"the DNS TTL is unknown ({timing.source})")
    else:
        latest = dns.latest + timing.dns_ttl + timing.request
        cr = Window(figure="client_recovery", earliest=0.0, latest=latest,
                    derivation=f"<= DNS convergence {dns.latest:.2f} s + TTL {_g(timing.dns_ttl)} s "
                    f"({timing.dns_ttl_from}) + one request <= {_g(timing.request)} s; no lower bound (the "
                    "recovery window may start before the last error)")
    windows["client_recovery"] = cr
    return Prediction(fault=fault, timing=timing, windows=windows, detection=det)


@dataclass(frozen=True, kw_only=True)
class Judgement:
    """A figure against its window."""

    outcome: Literal["pass", "late", "early", "n/a", "not reached"]
    by: float = 0.0
    """Seconds beyond the tolerated window (late or early)."""
    tolerance_late: float = 0.0
    tolerance_early: float = 0.0

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"


def judge(window: Window, value: float | None, resolution: float, *, slack: float,
          injection_uncertainty: float = 0.0) -> Judgement:
    """Judge one measured figure (seconds after ``t_fault``, ``± resolution``) against *window*.

    Late: above ``latest + resolution + slack`` (the slack absorbs a busy machine's scheduling
    delays, which only ever make a figure later). Early: below ``earliest - resolution -
    injection_uncertainty`` (the fault may have taken effect anywhere during its injection call,
    which ended at ``t_fault``); no slack there: nothing healthy makes a figure early.
    """
    if not window.known:
        return Judgement(outcome="n/a")
    if value is None:
        return Judgement(outcome="not reached")
    late_tol = resolution + slack
    early_tol = resolution + injection_uncertainty
    if value > window.latest + late_tol:
        return Judgement(outcome="late", by=value - window.latest - late_tol, tolerance_late=late_tol,
                         tolerance_early=early_tol)
    if value < window.earliest - early_tol:
        return Judgement(outcome="early", by=window.earliest - early_tol - value, tolerance_late=late_tol,
                         tolerance_early=early_tol)
    return Judgement(outcome="pass", tolerance_late=late_tol, tolerance_early=early_tol)
