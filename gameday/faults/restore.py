"""``gameday restore``: put back what a killed runner left broken.

Reads the ledger, re-attaches to each entry's target from its recorded reference,
reverts the fault, checks the federation is healthy again and only then removes the
entry. Federations whose runner died are stopped afterwards (unless ``keep``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TextIO

from gameday.errors import GamedayError
from gameday.faults.ledger import Ledger, LedgerEntry
from gameday.fedapp.federation import LocalFederation, pid_alive
from gameday.targets.base import Target


def attach_target(name: str, ref: dict[str, Any]) -> Target:
    """Re-attach to a target from a ledger reference."""
    if name == "local":
        from gameday.targets.local import LocalTarget  # noqa: PLC0415

        return LocalTarget.attach(ref)
    if name == "kube":
        from gameday.targets.kube import KubeTarget  # noqa: PLC0415  (imports kubernetes)

        return KubeTarget.attach(ref)
    if name == "kind":
        from gameday.targets.kind import KindTarget  # noqa: PLC0415  (imports kubernetes)

        return KindTarget.attach(ref)
    raise GamedayError(f"cannot restore target {name!r}: not supported in this version")


def ledger_path(reports: Path) -> Path:
    return reports / ".gameday" / "ledger.json"


def _restore_one(entry: LedgerEntry, ledger: Ledger, out: TextIO) -> bool:
    what = f"{entry.kind} {entry.region or ''}".strip()
    if entry.runner_pid != os.getpid() and pid_alive(entry.runner_pid):
        out.write(f"SKIP  {what}: its runner (pid {entry.runner_pid}) is still running and will restore it\n")
        return False
    try:
        target = attach_target(entry.target, entry.target_ref)
        target.revert(entry.kind, entry.region, dict(entry.params))
        target.check_health(timeout=30)
    except GamedayError as exc:
        out.write(f"FAIL  {what}: {exc}\n")
        return False
    ledger.remove(entry.id)
    out.write(f"OK    {what}: reverted; every component healthy ({entry.target} {entry.target_ref})\n")
    return True


def restore(reports: Path, *, keep: bool, out: TextIO) -> int:
    """Revert every pending fault; return a process exit code (0: all restored)."""
    ledger = Ledger(ledger_path(reports))
    entries = ledger.pending()
    if not entries:
        out.write(f"ledger {ledger.path} is empty: nothing to restore\n")
    ok = all([_restore_one(e, ledger, out) for e in entries])  # noqa: C419  (restore every entry, not the first failure)
    if not keep:
        stopped = stop_leftover_federations(reports, only_orphans=True, out=out)
        if stopped:
            out.write(f"stopped {stopped} orphaned federation(s) (use --keep to leave them running)\n")
    left = ledger.pending()
    out.write(f"ledger: {len(left)} pending entr{'y' if len(left) == 1 else 'ies'}\n")
    return 0 if ok and not left else 1


def stop_leftover_federations(reports: Path, *, only_orphans: bool, out: TextIO) -> int:
    """Stop federations under *reports* that still run (only those whose runner died, if asked)."""
    stopped = 0
    for state in sorted((reports / ".gameday" / "federations").glob("*/state.json")):
        try:
            fed = LocalFederation.attach(state.parent)
        except GamedayError:
            continue
        if not fed.any_running():
            continue
        if only_orphans and fed.owner_pid and pid_alive(fed.owner_pid):
            continue
        fed.stop()
        out.write(f"stopped federation {fed.spec.run_id} in {state.parent}\n")
        stopped += 1
    return stopped
