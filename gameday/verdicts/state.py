"""The state layer's measurements (DESIGN.md section 9): pure functions of a drill's writes.

Every write has a unique id, a send time, an answer time and an outcome (acknowledged,
refused, or indeterminate: no answer in time, it may or may not be stored); after the
restore, once the federation is steady, the writer reads every acknowledged and
indeterminate write back (:class:`~gameday.model.timeline.DataCheck`).

- **data loss / RPO**: the acknowledged writes the store no longer holds: their count, the
  span of their acknowledgements relative to ``t_fault``, and ``RPO_s = t_fault - earliest
  acknowledgement among them`` (negative: every lost write was acknowledged after the
  fault). Indeterminate writes are reported apart, and those that turned up as recovered.
- **write recovery (write RTO)**: the first acknowledgement of a write *sent* at or after
  ``t_fault``, minus ``t_fault`` (acknowledgements of writes sent before the fault keep
  arriving after it and must not count). Its resolution: how long before that write's
  sending the last write sent after the fault that was not acknowledged went out (or the
  fault, if none): the writes are the only probe of the write path.
- **duplicates**: the tasks the drill added to the background workers' queue that were
  processed more than once, and those acknowledged and never processed (lost); read once
  every acknowledged task was processed or a wait ran out.
- **stale reads**: a writer client that had a write acknowledged reads it back at once through
  the global entry (its own DNS cache, wherever that sends it), and again every 0.25 s while
  it is not found: a read answered "not found" is a stale read. Their count, the writes they
  hit, and the longest staleness: for each such write, the send time of its last stale read
  minus its acknowledgement (it was still missing that long after the federation said it was
  stored), the longest of them; a write never found within the wait is named apart. A read
  the federation did not answer is not a stale read (the read path was down: counted apart).
- **write latency**: p50 and p99 of the acknowledged writes sent between the fault and its
  revert.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gameday.model.timeline import FaultWindow, ReadRec, Timeline, WriteRec
from gameday.verdicts.predict import Window
from gameday.verdicts.stats import p50_p99


@dataclass(frozen=True)
class StatedReplication:
    """How the federation states its store replicates (its topology or profile): what the RPO
    prediction is made from (DESIGN.md section 9)."""

    mode: Literal["sync", "async", "none"]
    """``sync``: a write is acknowledged once a quorum (or a synchronous standby) holds it:
    0 lost predicted. ``async``: the standby trails by at most :attr:`max_lag` s: only writes
    acknowledged within that long before the fault may be lost. ``none``: one copy: whatever
    its node held may be lost."""
    max_lag: float | None = None
    """``async``: the stated maximum replication lag, seconds."""
    failover: StatedFailover | None = None
    """``async``: how a lost primary is replaced (None: not stated; the write-recovery prediction
    for a drill that takes the primary is then n/a)."""
    election: StatedElection | None = None
    """``sync``: how the store elects a new leader when its leader is lost (None: not stated; the
    write-recovery prediction for a drill that takes the leader is then n/a)."""
    dead_connection: float | None = None
    """A client's connection to a *frozen* store node (alive, answering nothing) is found dead and
    replaced after at most this many seconds (None: not stated; a frozen node is then taken to
    cost its clients nothing beyond the failover)."""

    def shown(self) -> str:
        return f"async (max lag {self.max_lag:g} s)" if self.mode == "async" else self.mode


@dataclass(frozen=True, kw_only=True)
class StatedFailover:
    """How the federation states it replaces a lost write primary (``async``): a controller checks
    the primary's store every ``probe_interval`` (each check failing at once or at
    ``probe_timeout``), declares it failed after ``fall`` failures, and promotes the standby that
    holds the most once the old primary's last lease ran out; every writer hears of the promotion
    within ``announce`` s. What the write-recovery prediction is made from (DESIGN.md section 9)."""

    probe_interval: float
    probe_timeout: float
    fall: int
    lease: float
    """The old primary's writers hold a lease this long, renewed at every announcement: no
    promotion before the last one granted ran out (fencing by time)."""
    announce: float
    """Seconds between announcements of the primary: writers hear a promotion within it."""
    nodes: int = 1
    """Store nodes the controller checks each round, one after the other: through a connection
    to a frozen node every one of them fails at the timeout."""
    source: str
    """Where it is stated (``topology 'local': timing + the reference store controller``)."""


@dataclass(frozen=True, kw_only=True)
class StatedElection:
    """How a ``sync`` store (a Raft group) replaces a lost leader: each surviving follower campaigns
    once it has heard nothing from the leader for a random election timeout in
    ``timeout_min`` .. ``timeout_max``, measured from the last heartbeat (or append) it heard, at
    most ``heartbeat`` before the loss; a candidate whose vote round won nothing (two campaigning at
    once) tries again within ``campaign_max``. What the write-recovery prediction is made from
    when a drill takes the leader (DESIGN.md section 9)."""

    timeout_min: float
    timeout_max: float
    heartbeat: float
    campaign_max: float
    source: str
    """Where it is stated (``nats-server's Raft defaults``, a profile)."""


StoreEffect = Literal["stopped", "frozen"]
"""What a fault does to its region's store node: killed (its clients' connections break at
once) or frozen (alive, answering nothing: its clients find out only from their pings)."""


def write_recovery_window(stated: StatedReplication | None, *, effect: StoreEffect | None, region: str | None,
                          primary: str | None, region_out_latest: float | None, write_timeout: float) -> Window:
    """The window the stated configuration predicts for write recovery (DESIGN.md section 9).

    Args:
        effect: what the fault does to its region's store node (None: it leaves every store node).
        region: the fault's region.
        primary: the region whose store node led the data when the fault was injected (None: unknown).
        region_out_latest: the fault takes its region's entry out: the latest its clients are
            predicted to have moved (client recovery); None: it takes no entry out.
        write_timeout: one write, at most (the writer's timeout).

    The primary lost (``async``): the failover's detection ``(fall-1) x interval`` ..
    ``fall x (interval + timeout)``, then the promotion at the first check after the last lease ran
    out (up to ``lease`` after detection, ``announce`` earlier at best, one check later at worst);
    where the node is frozen, the writers' and the controller's connections to it are found dead
    within ``dead_connection``; then every writer hears the new primary within ``announce`` and one
    write takes up to ``write_timeout``. Any other fault leaves the write path: writes are taken
    again within one write, or, where the fault takes its region's entry out, once the writer's
    clients have moved (the client-recovery prediction's latest). A ``sync`` store that loses its
    leader: the stated election (:class:`StatedElection`), from ``timeout_min - heartbeat`` (the
    survivors last heard the leader up to a heartbeat before) to ``timeout_max + campaign_max`` (a
    second vote round), + one write; unknown where no election is stated. A ``none`` store that
    loses its only copy has no failover: unknown, never a pass."""
    name = "write_recovery"
    if stated is None:
        return Window(figure=name, unknown="the federation states no replication mode (state.replication)")
    frozen = (stated.dead_connection or 0.0) if effect == "frozen" else 0.0
    if effect is not None and region is not None and primary is None:
        return Window(figure=name, unknown=f"the fault takes region {region}'s store node and which region led the "
                      "data when it was injected is not known (the target cannot say: HasStatePrimary)")
    if effect is not None and region is not None and region == primary:
        if stated.mode == "sync":
            e = stated.election
            if e is None:
                return Window(figure=name, unknown=f"the fault takes the store node that leads the data (region "
                              f"{region}): sync writes wait for the store's own leader election, whose timing the "
                              "federation does not state")
            lo = max(0.0, e.timeout_min - e.heartbeat)
            elected = e.timeout_max + e.campaign_max
            latest = max(elected, frozen) + write_timeout
            dead = (f"; the frozen node's clients find their connections dead within {frozen:g} s" if frozen else "")
            return Window(figure=name, earliest=lo, latest=latest,
                          derivation=f"leader {region} lost: the survivors elect a new one once an election timeout "
                          f"of {e.timeout_min:g}-{e.timeout_max:g} s has run from the last heartbeat they heard (at "
                          f"most {e.heartbeat:g} s before the loss), + up to {e.campaign_max:g} s for a second vote "
                          f"round: {lo:.2f}-{elected:.2f} s{dead}; + one write <= {write_timeout:g} s ({e.source})")
        if stated.mode == "none":
            return Window(figure=name, unknown=f"the fault takes the store's only copy (region {region}): with no "
                          "standby to promote, writes wait for its return (no failover to predict)")
        f = stated.failover
        if f is None:
            return Window(figure=name, unknown="the federation states no failover timing for its primary (async)")
        det_lo, det_hi = (f.fall - 1) * f.probe_interval, f.fall * (f.probe_interval + f.probe_timeout)
        check = f.probe_interval + f.probe_timeout
        promo_lo = det_lo + max(0.0, f.lease - f.announce)
        # frozen: the controller may be connected through the frozen node itself, every check
        # failing until it reconnects; then the round under way ends, and one more promotes
        promo_hi = max(det_hi + f.lease + check, frozen + f.nodes * f.probe_timeout + check) if frozen \
            else det_hi + f.lease + check
        latest = promo_hi + f.announce + write_timeout
        dead = (f"; the frozen node's clients (the controller too) find their connections dead within {frozen:g} s, "
                f"the promotion a round of {f.nodes} checks and one more after" if frozen else "")
        return Window(figure=name, earliest=promo_lo, latest=latest,
                      derivation=f"primary {region} lost: detection {f.fall} x {f.probe_interval:g} s checks "
                      f"(each failing at once .. at the {f.probe_timeout:g} s timeout) {det_lo:.2f}-{det_hi:.2f} s, "
                      f"promotion once the last {f.lease:g} s lease ran out, at a check: {promo_lo:.2f}-"
                      f"{promo_hi:.2f} s{dead}; + writers told within {f.announce:g} s + one write <= "
                      f"{write_timeout:g} s ({f.source})")
    base, why = write_timeout, f"the fault leaves the write path: one write <= {write_timeout:g} s"
    if region_out_latest is not None:
        base, why = max(base, region_out_latest), (f"the fault takes region {region}'s entry out: the writer's "
                                                   f"clients moved by {region_out_latest:.2f} s (the client-"
                                                   "recovery prediction)")
    if frozen:
        base, why = max(base, frozen + write_timeout), (f"{why}; a store node frozen: its clients' connections "
                                                        f"found dead within {frozen:g} s, + one write")
    if effect is None:
        held = "the fault takes no store node"
    elif region is not None:
        held = f"region {region}'s store node is not the one leading the data ({primary})"
    else:
        held = "the store node the fault holds back does not lead the data"
    return Window(figure=name, earliest=0.0, latest=base, derivation=f"no failover ({held}): {why}")


@dataclass(frozen=True)
class DataLoss:
    """What the read-back found, against the fault."""

    acked: int
    """Acknowledged writes read back."""
    lost: tuple[str, ...]
    unread: tuple[str, ...]
    indeterminate: int
    indeterminate_found: int
    lost_from_s: float | None
    """Earliest acknowledgement among the lost, relative to ``t_fault`` (None: none lost)."""
    lost_to_s: float | None
    error: str | None = None
    """Why there is no read-back to judge (None: there is)."""

    @property
    def rpo_s(self) -> float | None:
        """``t_fault - earliest acknowledgement among the lost`` (None: nothing lost)."""
        return None if self.lost_from_s is None else -self.lost_from_s

    def shown(self) -> str:
        if self.error is not None:
            return "not read back"
        return f"{len(self.lost)}/{self.acked} lost"

    def describe(self) -> str:
        if self.error is not None:
            return self.error
        text = f"{len(self.lost)} of {self.acked} acknowledged writes lost"
        if self.lost:
            text += (f" (acknowledged from t{self.lost_from_s:+.2f} s to t{self.lost_to_s:+.2f} s around the "
                     f"fault; RPO {self.rpo_s:.2f} s)")
        if self.unread:
            text += f"; {len(self.unread)} could not be read back"
        text += f"; {self.indeterminate} indeterminate, {self.indeterminate_found} of them stored"
        return text


def data_loss(tl: Timeline, fault: FaultWindow) -> DataLoss:
    """The read-back of *tl*'s writes against *fault* (an ``error`` when there is none)."""
    check = tl.data_check
    if check is None:
        return DataLoss(0, (), (), 0, 0, None, None,
                        error="the writes were not read back (the drill did not reach a steady state after "
                              "the restore)")
    if check.error is not None:
        return DataLoss(len(check.acked), (), (), check.indeterminate, 0, None, None,
                        error=f"the read-back of {len(check.acked)} acknowledged writes failed: {check.error}")
    acks = {w.id: w.t_done for w in tl.writes if w.outcome == "ack" and w.kind == "write"}
    lost_at = sorted(acks[w] - fault.t_fault for w in check.missing if w in acks)
    return DataLoss(len(check.acked), check.missing, check.unread, check.indeterminate,
                    len(check.indeterminate_found), lost_at[0] if lost_at else None,
                    lost_at[-1] if lost_at else None)


def rpo_vs_prediction(stated: StatedReplication, loss: DataLoss, slack: float) -> tuple[bool, str]:
    """``(inside, why)``: the data loss against what the stated replication predicts.

    - ``sync``: 0 lost (every acknowledgement is a quorum's or a synchronous standby's);
    - ``async`` with a maximum lag L: only writes acknowledged in the last L s before the fault
      may be lost: ``RPO_s <= L`` (plus *slack*);
    - ``none``: whatever the one copy held may be lost, but nothing acknowledged after the fault
      (the writes the federation took once the fault was in effect must be there)."""
    if loss.error is not None:
        return False, loss.error
    if stated.mode == "sync":
        return not loss.lost, "sync replication predicts 0 lost"
    if stated.mode == "async":
        lag = stated.max_lag if stated.max_lag is not None else 0.0
        inside = loss.rpo_s is None or loss.rpo_s <= lag + slack
        return inside, f"async replication with a stated maximum lag of {lag:g} s predicts RPO <= {lag:g} s"
    inside = loss.lost_to_s is None or loss.lost_to_s <= slack
    return inside, "no replication predicts losing what the store's one copy held before the fault, nothing after"


@dataclass(frozen=True)
class WriteRecovery:
    value: float | None
    """First acknowledgement of a write sent at or after ``t_fault``, minus ``t_fault``."""
    resolution: float
    first: WriteRec | None
    sent_after: int
    """Writes sent at or after ``t_fault`` (before the first acknowledged one, or in all)."""

    def describe(self) -> str:
        if self.value is None:
            return f"no write sent after the fault was acknowledged ({self.sent_after} sent)"
        assert self.first is not None
        return (f"first write sent after the fault acknowledged at t+{self.value:.2f} s (± {self.resolution:.2f} s) "
                f"by region {self.first.region}, after {self.sent_after} not acknowledged")


def write_recovery(tl: Timeline, t_fault: float) -> WriteRecovery:
    after = sorted((w for w in tl.writes if w.t >= t_fault and w.kind == "write"), key=lambda w: w.t)
    last_miss = t_fault
    for n, w in enumerate(after):
        if w.outcome == "ack":
            return WriteRecovery(w.t_done - t_fault, max(0.0, w.t - last_miss), w, n)
        last_miss = w.t
    return WriteRecovery(None, 0.0, None, len(after))


def write_latency(tl: Timeline, lo: float, hi: float) -> tuple[float, float, int] | None:
    """``(p50, p99, n)`` of the acknowledged writes sent in ``[lo, hi]``, seconds (None: none)."""
    return p50_p99([w.t_done - w.t for w in tl.writes if w.outcome == "ack" and w.kind == "write" and lo <= w.t <= hi])


def outcomes(tl: Timeline, kind: str = "write") -> dict[str, int]:
    out = {"ack": 0, "refused": 0, "indeterminate": 0}
    for w in tl.writes:
        if w.kind == kind:
            out[w.outcome] += 1
    return out


@dataclass(frozen=True)
class StaleReads:
    """The writer clients' read-after-write reads, against their acknowledged writes."""

    reads: int
    """Reads answered (found or not)."""
    writes_read: int
    """Acknowledged writes read back at least once with an answer."""
    stale: tuple[ReadRec, ...]
    """Reads answered "not found" of a write already acknowledged."""
    writes_stale: int
    """Writes with at least one stale read."""
    never_seen: tuple[str, ...]
    """Writes with a stale read and no read that found them."""
    longest_s: float | None
    """Longest staleness: latest stale read's send time minus the write's acknowledgement."""
    unanswered: int
    """Reads the federation did not answer (not stale reads: the read path was down)."""
    by_region: dict[str, int]
    """Stale reads per serving region (``?``: the answer did not say)."""

    def shown(self) -> str:
        return f"{len(self.stale)}/{self.reads} stale"

    def describe(self) -> str:
        text = (f"{len(self.stale)} of {self.reads} read-after-write reads stale ({self.writes_stale} of "
                f"{self.writes_read} acknowledged writes not found by their own client)")
        if self.stale:
            where = ", ".join(f"{r} {n}" for r, n in sorted(self.by_region.items()))
            text += f"; longest staleness {self.longest_s:.2f} s after the acknowledgement; served by {where}"
            if self.never_seen:
                text += f"; {len(self.never_seen)} never seen by their client within the wait"
        if self.unanswered:
            text += f"; {self.unanswered} reads not answered"
        return text


def stale_reads(tl: Timeline, lo: float | None = None, hi: float | None = None) -> StaleReads:
    """The stale-read figures of *tl*'s reads of writes acknowledged in ``[lo, hi]`` (None: unbounded)."""
    reads = [r for r in tl.reads if (lo is None or r.t_ack >= lo) and (hi is None or r.t_ack <= hi)]
    answered = [r for r in reads if r.found is not None]
    stale = tuple(r for r in answered if r.found is False)
    seen = {r.id for r in answered if r.found}
    hit: dict[str, float] = {}
    for r in stale:
        hit[r.id] = max(hit.get(r.id, 0.0), r.t - r.t_ack)
    by_region: dict[str, int] = {}
    for r in stale:
        by_region[r.region or "?"] = by_region.get(r.region or "?", 0) + 1
    return StaleReads(len(answered), len({r.id for r in answered}), stale, len(hit),
                      tuple(sorted(w for w in hit if w not in seen)), max(hit.values()) if hit else None,
                      len(reads) - len(answered), by_region)


@dataclass(frozen=True)
class Duplicates:
    """The tasks the drill added, against how often the federation's workers processed them."""

    acked: int
    twice: dict[str, int]
    """Task id -> times processed, for those processed more than once."""
    never: tuple[str, ...]
    """Acknowledged and never processed (within the read-back's wait): lost."""
    error: str | None = None

    def shown(self) -> str:
        if self.error is not None:
            return "not read back"
        return f"{len(self.twice)}/{self.acked} twice" + (f", {len(self.never)} never" if self.never else "")

    def describe(self) -> str:
        if self.error is not None:
            return self.error
        text = f"{len(self.twice)} of {self.acked} acknowledged tasks processed more than once"
        if self.twice:
            worst = sorted(self.twice.items(), key=lambda kv: -kv[1])[:3]
            more = "" if len(self.twice) <= 3 else ", ..."
            text += " (" + ", ".join(f"{t} {n} times" for t, n in worst) + more + ")"
        return text + f"; {len(self.never)} acknowledged and never processed"


def duplicates(tl: Timeline) -> Duplicates:
    check = tl.data_check
    if check is None or check.tasks_acked is None:
        return Duplicates(0, {}, (), error="the tasks were not read back (the drill did not reach a steady state "
                                             "after the restore)")
    if check.tasks_error is not None:
        return Duplicates(len(check.tasks_acked), {}, (),
                          error=f"how often the {len(check.tasks_acked)} acknowledged tasks were processed is not "
                                f"known: {check.tasks_error}")
    twice = {t: n for t, n in check.processed.items() if n > 1}
    never = tuple(t for t in check.tasks_acked if not check.processed.get(t))
    return Duplicates(len(check.tasks_acked), twice, never)


@dataclass(frozen=True)
class Fencing:
    """Writes acknowledged at an old epoch once a newer one was in effect (split brain)."""

    epochs: tuple[int, ...]
    """Every epoch the acknowledgements named, in order."""
    promoted_at: float | None
    """When the first write was acknowledged at the newest epoch, relative to ``t_fault``."""
    stale: tuple[WriteRec, ...]
    """Acknowledged at an older epoch after that."""
    lost_stale: int
    """Of those, the ones the read-back did not find on the promoted primary."""
    first_stale_after: float | None = None
    """Seconds from the newest epoch's first acknowledgement to the first stale one."""

    def describe(self) -> str:
        if len(self.epochs) < 2:
            return f"no promotion seen (epoch {self.epochs[0] if self.epochs else '-'} throughout)"
        text = (f"epoch {self.epochs[-1]} from t{self.promoted_at:+.2f} s; {len(self.stale)} writes acknowledged "
                f"at an older epoch after it")
        if self.stale:
            first = min(self.stale, key=lambda w: w.t_done)
            text += (f" (the first {self.first_stale_after:.2f} s after it, epoch {first.epoch}, through region "
                     f"{first.region}), {self.lost_stale} of them not on the promoted primary")
        return text


def fencing(tl: Timeline, t_fault: float) -> Fencing | None:
    """The fencing figures of *tl*'s writes (None: no acknowledgement named an epoch)."""
    acked = sorted((w for w in tl.writes if w.outcome == "ack" and w.kind == "write" and w.epoch is not None),
                   key=lambda w: w.t_done)
    if not acked:
        return None
    epochs = tuple(sorted({w.epoch for w in acked if w.epoch is not None}))
    newest = epochs[-1]
    first_new = min(w.t_done for w in acked if w.epoch == newest)
    stale = tuple(w for w in acked if w.epoch is not None and w.epoch < newest and w.t_done > first_new)
    missing = set(tl.data_check.missing) if tl.data_check is not None else set()
    return Fencing(epochs, first_new - t_fault if len(epochs) > 1 else None, stale,
                   sum(w.id in missing for w in stale),
                   min(w.t_done for w in stale) - first_new if stale else None)


def state_summary(tl: Timeline, fault: FaultWindow) -> dict[str, object]:
    """The state figures for reports (figures-N.json, run.json, the verdict table)."""
    loss = data_loss(tl, fault)
    rec = write_recovery(tl, fault.t_fault)
    lat = write_latency(tl, fault.t_fault, fault.t_revert or fault.t_fault)
    return {
        "writes": outcomes(tl),
        "data_loss": {"acked_read_back": loss.acked, "lost": len(loss.lost), "lost_ids": list(loss.lost[:20]),
                      "unread": len(loss.unread), "indeterminate": loss.indeterminate,
                      "indeterminate_found": loss.indeterminate_found, "lost_from_s": loss.lost_from_s,
                      "lost_to_s": loss.lost_to_s, "rpo_s": loss.rpo_s, "error": loss.error,
                      "detail": loss.describe()},
        "write_recovery": {"value_s": rec.value, "resolution_s": round(rec.resolution, 3),
                           "region": rec.first.region if rec.first else None, "detail": rec.describe()},
        "tasks": None if tl.data_check is None or tl.data_check.tasks_acked is None else {
            "acked": (dup := duplicates(tl)).acked, "processed_twice": len(dup.twice),
            "never_processed": len(dup.never), "error": dup.error, "detail": dup.describe()},
        "write_latency": None if lat is None else {"p50_s": round(lat[0], 4), "p99_s": round(lat[1], 4),
                                                   "n": lat[2]},
        "stale_reads": None if not tl.reads else {
            "reads": (st := stale_reads(tl)).reads, "stale": len(st.stale), "writes_stale": st.writes_stale,
            "writes_read": st.writes_read, "never_seen": len(st.never_seen),
            "longest_s": None if st.longest_s is None else round(st.longest_s, 3), "unanswered": st.unanswered,
            "by_region": st.by_region, "detail": st.describe()},
    }
