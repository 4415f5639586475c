"""gameday: failover game days and conformance checks for multi-region federations."""

__version__ = "0.2.0"
"""The one source of the version (``pyproject.toml`` reads it; ``gameday --version`` prints it)."""
