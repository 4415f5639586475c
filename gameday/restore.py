"""``gameday restore`` and ``gameday down``: put back what a killed runner left broken.

``restore`` reads the ledger(s), re-attaches to each entry's target from its recorded
reference, reverts the fault, checks the federation is healthy again and only then
removes the entry. A local federation that has no process left cannot hold a fault
any more: its entry is cleared with that reason. An entry that can never be reverted
is dropped with ``--forget ID``, after saying what it was. Federations whose runner
died are stopped afterwards (unless ``keep``).

Nothing here raises a traceback at the user: corrupt ledgers and state files are
reported with their path and moved aside, and the loop goes on to the next one.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from gameday.errors import DrillLockTimeout, GamedayError
from gameday.faults.ledger import Ledger, LedgerEntry, known_ledgers
from gameday.interfaces import SharedFederation, Target
from gameday.runtime.drill_lock import DEFAULT_TIMEOUT, Holder, drill_lock
from gameday.runtime.procs import stop_orphaned
from gameday.runtime.statefile import CorruptFile, quarantine
from gameday.targets import registry
from gameday.targets.local.federation import LocalFederation, pid_alive


def attach_target(name: str, ref: dict[str, Any], attach: str | None = None) -> Target:
    """Re-attach to a target from a ledger reference: through the import path of its
    ``attach`` the ledger recorded (a target that is not built in), else the registry by
    name (:func:`gameday.targets.registry.attach`).

    Raises:
        GamedayError: unknown target, an attach path that cannot be imported, or its failure.
    """
    return registry.attach(name, ref, attach)


def ledger_path(reports: Path) -> Path:
    return reports.absolute() / ".gameday" / "ledger.json"


def reports_of(ledger: Path) -> Path:
    """``<reports>/.gameday/ledger.json`` -> ``<reports>``."""
    return ledger.parent.parent


@dataclass
class Outcome:
    """What one ``restore`` did, for its summary line and exit code."""

    reverted: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.failed or self.corrupt)


DYING_GRACE_S = 10.0
"""How long a local federation whose runner died and took its bus with it may take to finish
dying (its launcher, sent SIGTERM by the runner's death, stops the components it forked)."""


def local_federation_gone(entry: LedgerEntry) -> str | None:
    """For a ``local`` entry: why its federation can no longer hold the fault (it has no
    process left, or its work directory is gone), or ``None`` if it may still hold it.

    A federation dies with the runner that started it (nats-server by SIGKILL, the launcher
    by SIGTERM, which then stops its components): a restore run right after a ``kill -9`` of
    the runner can find it half gone. When its runner and its bus are both dead, the rest is
    on its way out: wait up to :data:`DYING_GRACE_S` for it (reverting into it would find
    "nats is not running" and fail, leaving the entry pending although nothing is broken)."""
    if entry.target != "local":
        return None
    workdir = Path(str(entry.target_ref.get("workdir", "")))
    if not (workdir / "state.json").exists():
        return f"its federation's state ({workdir / 'state.json'}) is gone"
    try:
        fed = LocalFederation.attach(workdir)
    except CorruptFile:
        return None  # unknown: do not claim it is gone; the revert attempt will say more
    except GamedayError as exc:
        return f"its federation cannot be found ({exc})"
    if not fed.any_running():
        return f"its federation in {workdir} has no process left (stopped, or died with its runner)"
    if not pid_alive(fed.owner_pid, fed.owner_starttime) and "nats" in fed.components \
            and not fed.is_running("nats"):
        deadline = time.monotonic() + DYING_GRACE_S
        while fed.any_running() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not fed.any_running():
            return (f"its federation in {workdir} died with its runner (pid {fed.owner_pid}); its last "
                    "processes exited as restore looked")
    return None


@contextlib.contextmanager
def federation_turn(target: Target, *, timeout: float, what: str,
                    on_wait: Callable[[str, str], None] | None = None) -> Iterator[None]:
    """Hold the drill lock of a shared federation (:class:`SharedFederation`) for the block:
    a revert outside a drill (``gameday restore``, a session's leftovers) takes its turn
    with the drills of other runs on that federation, as their faults do, instead of
    changing it under a drill in progress. A target that owns its federation: no lock.

    Args:
        what: what this process does, for the waiters' messages (the lock's holder note).
        on_wait: called once per holder while waiting, with the key and who holds it.

    Raises:
        DrillLockTimeout: still held by another run after *timeout* seconds; nothing reverted.
        DrillLockError: the lock file cannot be used; nothing reverted.
    """
    if not isinstance(target, SharedFederation):
        yield
        return
    key = target.drill_lock_key()
    told: list[str] = []

    def waiting(holder: Holder | None, waited: float) -> None:
        who = holder.describe() if holder is not None else "another process (it has not said who it is)"
        if on_wait is not None and who not in told:
            told.append(who)
            on_wait(key, who)

    with drill_lock(key, timeout=timeout, what=what, on_wait=waiting):
        yield


def _restore_one(entry: LedgerEntry, ledger: Ledger, out: TextIO, done: Outcome, *,
                 lock_timeout: float = DEFAULT_TIMEOUT) -> None:
    what = f"{entry.what} [{entry.id}]"
    if entry.runner_pid != os.getpid() and pid_alive(entry.runner_pid):
        out.write(f"SKIP  {what}: its runner (pid {entry.runner_pid}) is still running and will restore it\n")
        done.skipped.append(what)
        return
    gone = local_federation_gone(entry)
    if gone is not None:
        ledger.remove(entry.id)
        out.write(f"CLEAR {what}: {gone}; nothing is left broken, entry cleared\n")
        done.cleared.append(what)
        return

    def waiting(key: str, who: str) -> None:
        out.write(f"WAIT  {what}: the drill lock on {key} is held by {who}; waiting up to {lock_timeout:g} s "
                  "for its drill to end\n")
        out.flush()

    try:
        target = attach_target(entry.target, entry.target_ref, entry.attach)
        with federation_turn(target, timeout=lock_timeout, what=f"gameday restore {entry.what}", on_wait=waiting):
            target.revert(entry.kind, entry.region, dict(entry.params))
            target.check_health(timeout=30)
    except DrillLockTimeout as exc:
        who = exc.holder.describe() if exc.holder is not None else "another process"
        out.write(f"FAIL  {what}: not reverted: the drill lock on {exc.key} was still held by {who} after "
                  f"{lock_timeout:g} s (--drill-lock-timeout); run `gameday restore` again when that drill "
                  "has ended\n")
        done.failed.append(what)
        return
    except GamedayError as exc:
        out.write(f"FAIL  {what}: {exc}\n      if it can never be reverted (the target is gone for good), "
                  f"drop it with `gameday restore --forget {entry.id}`\n")
        done.failed.append(what)
        return
    ledger.remove(entry.id)
    out.write(f"OK    {what}: reverted; every component healthy ({entry.target} {entry.target_ref})\n")
    done.reverted.append(what)


def _pending(ledger: Ledger, out: TextIO, done: Outcome) -> list[LedgerEntry]:
    try:
        return ledger.pending()
    except CorruptFile as exc:
        moved = ledger.quarantine()
        out.write(f"CORRUPT ledger {exc.path}: {exc.problem}; moved aside to {moved}. Faults it recorded "
                  f"cannot be read back: check the federations under {reports_of(ledger.path)} by hand "
                  f"(`gameday down` stops local ones)\n")
        done.corrupt.append(str(exc.path))
        return []


def ledgers_for(reports: Path | None) -> list[Ledger]:
    """The ledger of *reports*, or, when none was named, ``./reports``'s and every ledger
    the per-user index knows (so restore works from any directory)."""
    if reports is not None:
        return [Ledger(ledger_path(reports))]
    paths = [ledger_path(Path("reports")), *known_ledgers()]
    unique = list(dict.fromkeys(p.resolve() for p in paths))
    return [Ledger(p) for p in unique]


def restore(reports: Path | None, *, keep: bool, out: TextIO, lock_timeout: float = DEFAULT_TIMEOUT) -> int:
    """Revert every pending fault; return a process exit code (0: all restored).

    Args:
        reports: the reports directory; ``None``: ``./reports`` and every indexed ledger.
        keep: leave orphaned federations running afterwards.
        lock_timeout: seconds to wait for a shared federation's drill lock, held by another
            run's drill, before its entry fails (and stays in the ledger).
    """
    done = Outcome()
    ledgers = ledgers_for(reports)
    looked = 0
    for ledger in ledgers:
        entries = _pending(ledger, out, done)
        if not entries:
            continue
        looked += 1
        out.write(f"ledger {ledger.path}: {len(entries)} pending\n")
        for entry in entries:
            _restore_one(entry, ledger, out, done, lock_timeout=lock_timeout)
    if not looked and not done.corrupt:
        out.write(f"no pending fault in {', '.join(str(x.path) for x in ledgers)}: nothing to restore\n")
    if not keep:
        for ledger in ledgers:
            stopped = stop_leftover_federations(reports_of(ledger.path), only_orphans=True, out=out)
            if stopped:
                out.write(f"stopped {stopped} orphaned federation(s) under {reports_of(ledger.path)} "
                          f"(use --keep to leave them running)\n")
    left = sum(len(_pending(x, out, done)) for x in ledgers)
    out.write(f"restore: {len(done.reverted)} reverted, {len(done.cleared)} cleared, "
              f"{len(done.failed)} failed, {len(done.skipped)} skipped (runner alive), "
              f"{len(done.corrupt)} corrupt ledger(s); {left} pending\n")
    return 0 if done.ok and not left else 1


def forget(reports: Path | None, entry_id: str, *, out: TextIO) -> int:
    """Drop the ledger entry *entry_id* (or a unique prefix of it) without reverting it."""
    matches: list[tuple[Ledger, LedgerEntry]] = []
    done = Outcome()
    for ledger in ledgers_for(reports):
        matches += [(ledger, e) for e in _pending(ledger, out, done) if e.id.startswith(entry_id)]
    if len(matches) != 1:
        found = ", ".join(f"{e.id} ({e.what})" for _, e in matches) or "none"
        out.write(f"gameday restore --forget {entry_id}: expected exactly one matching entry, found {found}\n")
        return 2
    ledger, entry = matches[0]
    if entry.runner_pid != os.getpid() and pid_alive(entry.runner_pid):
        out.write(f"refusing to forget {entry.id} ({entry.what}): its runner (pid {entry.runner_pid}) is "
                  f"still running and will revert it\n")
        return 1
    ledger.remove(entry.id)
    out.write(f"FORGOT {entry.id}: {entry.what} on {entry.target} {entry.target_ref} was NOT reverted; "
              f"the entry is dropped from {ledger.path}. If the target still exists, check it by hand.\n")
    return 0


def held_faults(reports: Path) -> dict[Path, list[LedgerEntry]]:
    """Local federation work dir -> the unreverted faults the ledger holds for it."""
    held: dict[Path, list[LedgerEntry]] = {}
    try:
        entries = Ledger(ledger_path(reports)).pending()
    except CorruptFile:
        return held
    for e in entries:
        if e.target == "local" and "workdir" in e.target_ref:
            held.setdefault(Path(str(e.target_ref["workdir"])).resolve(), []).append(e)
    return held


def _federation_dirs(reports: Path) -> Iterable[Path]:
    return sorted(p.parent for p in (reports.absolute() / ".gameday" / "federations").glob("*/state.json"))


def stop_leftover_federations(reports: Path, *, only_orphans: bool, out: TextIO, force: bool = False) -> int:
    """Stop federations under *reports* that still run (only those whose runner died, if asked),
    and the other processes dead runners registered there (locust).

    A federation that holds an unreverted fault is not stopped by ``gameday down``
    (``only_orphans=False``) unless *force*: stopping it would lose the chance to revert
    and check it; with *force* its entries are cleared, since the fault dies with it.
    """
    stopped = 0
    # Load generators (locust) a dead runner registered, first: they only add noise. Only
    # dead runners', even for `down`: a live runner stops its own load (and it dies with it).
    stop_orphaned(reports.absolute() / ".gameday" / "procs", only_orphans=True, out=out)
    held = {} if only_orphans else held_faults(reports)
    for workdir in _federation_dirs(reports):
        state = workdir / "state.json"
        try:
            fed = LocalFederation.attach(workdir)
        except CorruptFile as exc:
            out.write(f"CORRUPT state {state}: {exc.problem}; moved aside to {quarantine(state)} "
                      f"(its processes, if any, cannot be found from it)\n")
            continue
        except GamedayError as exc:
            out.write(f"skip {workdir}: {exc}\n")
            continue
        if not fed.any_running():
            continue
        if only_orphans and fed.owner_pid and pid_alive(fed.owner_pid, fed.owner_starttime):
            continue
        faults = held.get(workdir.resolve(), [])
        if faults and not force:
            out.write(f"refusing to stop federation {fed.spec.run_id} in {workdir}: it holds unreverted "
                      f"fault(s) {', '.join(f'{e.what} [{e.id}]' for e in faults)}; run `gameday restore` "
                      f"first, or `gameday down --force`\n")
            continue
        fed.stop()
        out.write(f"stopped federation {fed.spec.run_id} in {workdir}\n")
        for e in faults:
            Ledger(ledger_path(reports)).remove(e.id)
            out.write(f"CLEAR {e.what} [{e.id}]: its federation was stopped (--force); nothing is left broken\n")
        stopped += 1
    return stopped
