"""Faults: the catalogue of what a drill can break, and the ledger that guarantees it is put back."""

from gameday.faults.catalogue import CATALOGUE, FaultKind, check_fault
from gameday.faults.ledger import Ledger, LedgerEntry

__all__ = ["CATALOGUE", "FaultKind", "Ledger", "LedgerEntry", "check_fault"]
