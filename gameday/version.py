"""The one source of gameday's version (``pyproject.toml`` reads it; ``gameday --version``
prints it; ``gameday.__version__`` re-exports it). A module of its own so that what stamps
the version (manifests, reports, the scaffold) imports nothing else of the package."""

__version__ = "0.2.0"
