"""Faults: what a drill can break (:data:`FAULTS`, each a :class:`Fault`), and the ledger
that guarantees it is put back."""

from gameday.faults.catalogue import CATALOGUE, FAULTS, FaultKind, check_fault
from gameday.faults.ledger import Ledger, LedgerEntry
from gameday.faults.model import Action, Fault, FaultCall, FaultTable, Param
from gameday.model.tables import Table

__all__ = ["CATALOGUE", "FAULTS", "Action", "Fault", "FaultCall", "FaultKind", "FaultTable", "Ledger",
           "LedgerEntry", "Param", "Table", "check_fault"]
