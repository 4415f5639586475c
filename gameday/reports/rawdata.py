"""A drill's raw timeline as data files (CSV and JSON), and the run's settings as data.

Every observation the drill took, times in seconds relative to the fault (``t_s``), so
a reviewer can re-derive any figure (or plot it their own way).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gameday.reports.redact import redact

if TYPE_CHECKING:
    from gameday.verdicts.result import DrillResult

CSV_COLUMNS = ("kind", "t_s", "source", "ok", "version", "regions", "status", "latency_s", "value", "detail")
"""kind: node, dns, control_plane, alarm, utilisation, request, mark, component."""


def _rows(res: DrillResult) -> list[dict[str, Any]]:
    tl = res.timeline.copy()
    tf = res.fault.t_fault

    def t(x: float) -> float:
        return round(x - tf, 4)

    rows: list[dict[str, Any]] = []
    rows += [{"kind": "node", "t_s": t(o.t), "source": o.node, "ok": o.ok, "version": o.version,
              "regions": " ".join(o.routable) if o.routable is not None else "", "value": o.stale} for o in tl.nodes]
    rows += [{"kind": "dns", "t_s": t(d.t), "source": "gslb", "ok": d.ok, "regions": " ".join(d.answers or d.regions),
              "value": d.ttl} for d in tl.dns]
    rows += [{"kind": "control_plane", "t_s": t(c.t), "source": c.source, "version": c.version} for c in tl.cp]
    rows += [{"kind": "alarm", "t_s": t(a.t), "source": a.node, "value": a.event, "detail": a.detail}
             for a in tl.alarms]
    rows += [{"kind": "utilisation", "t_s": t(u.t), "source": u.region, "value": round(u.utilisation, 4),
              "detail": f"rejected_total={u.rejected_total}"} for u in tl.util]
    rows += [{"kind": "request", "t_s": t(r.t), "source": r.region or "", "ok": not r.failed, "status": r.status,
              "latency_s": round(r.latency, 4), "detail": r.error or ""} for r in tl.requests]
    rows += [{"kind": "mark", "t_s": t(m.t), "source": m.label, "detail": m.detail} for m in tl.marks]
    rows += [{"kind": "component", "t_s": t(c.t), "source": c.name, "ok": c.alive, "value": c.pid,
              "detail": c.detail} for c in tl.liveness]
    return sorted(rows, key=lambda r: (r["t_s"], r["kind"]))


def timeline_csv(res: DrillResult) -> str:
    """One row per observation, :data:`CSV_COLUMNS`."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(_rows(res))
    return buf.getvalue()


def timeline_json(res: DrillResult) -> str:
    """The fault's window and every observation, grouped by kind (times relative to the fault)."""
    w = res.fault
    tf = w.t_fault
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in _rows(res):
        kind = row.pop("kind")
        groups.setdefault(kind, []).append(row)
    window = {"kind": w.kind, "region": w.region, "params": w.params,
              "injection_uncertainty_s": round(w.injection_uncertainty, 4),
              "revert_s": None if w.t_revert is None else round(w.t_revert - tf, 4),
              "restored_s": None if w.t_restored is None else round(w.t_restored - tf, 4), "aborted": w.aborted}
    return json.dumps({"fault": window, "seed": res.seed, "round": res.round, "observations": groups},
                      indent=1, default=str)


def settings_json(settings: Any, model: Any, model_path: Path | None) -> str:
    """The run's effective settings and its topology or profile, secrets redacted.

    Args:
        settings: the :class:`gameday.runtime.settings.Settings` (a dataclass).
        model: the topology or profile (a pydantic model), or None.
        model_path: the file it came from.
    """
    data: dict[str, Any] = {"settings": dataclasses.asdict(settings)}
    if model is not None:
        data["topology_or_profile"] = {"file": str(model_path) if model_path else None,
                                       "content": model.model_dump(mode="json")}
    return json.dumps(redact(json.loads(json.dumps(data, default=str))), indent=2)
