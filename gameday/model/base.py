"""The base of every model of a user's file (a topology, a profile, a source kind's settings)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Frozen, unknown fields refused, and no NaN or infinity (NaN passes no comparison, so a NaN
    weight or timeout would slip past every bound and break arithmetic far from the file)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
