"""Conformance checks of the rules R1-R14 (DESIGN.md §3); select with ``-m conformance``."""
