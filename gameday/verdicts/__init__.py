"""Verdicts: the measurements of DESIGN.md §4 and the assertions built on them."""
