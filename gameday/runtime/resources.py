"""Files gameday ships beside its code: topologies, kind configs, manifests and the suites.

In a checkout they are the top-level ``clusters/`` and ``suites/`` directories; an
installed gameday carries the same files as the packages ``gameday.clusters`` and
``gameday.suites`` (``[tool.setuptools.package-dir]`` in ``pyproject.toml``). Both are
found through :mod:`importlib.resources`, so nothing depends on where gameday lives.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from gameday.errors import GamedayError


def _package_dir(package: str) -> Path:
    root = importlib.resources.files(package)
    # A package on the file system (a wheel installed by pip, an editable checkout) is a
    # Path; a zipped import would not be, and gameday never installs as one.
    if not isinstance(root, Path):
        raise GamedayError(f"{package} is not installed on the file system ({root!r}); reinstall gameday with pip")
    return root


def clusters_dir() -> Path:
    """``clusters/``: ``local.yaml``, ``kind/`` and ``manifests/``."""
    return _package_dir("gameday.clusters")


def suites_dir() -> Path:
    """``suites/``: ``conformance/`` and ``gameday/``."""
    return _package_dir("gameday.suites")
