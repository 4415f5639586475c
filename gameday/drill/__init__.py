"""Drill orchestration: steady state, inject, observe, always restore (:class:`Drill`; its
runbook and its parts are listed in :mod:`gameday.drill.runbook`)."""

from gameday.drill.context import ActiveFault, FaultRequest
from gameday.drill.runbook import Drill

__all__ = ["ActiveFault", "Drill", "FaultRequest"]
