"""Repository-level pytest configuration.

The gameday plugin itself is loaded through its ``pytest11`` entry point (installed
with the package), so nothing needs registering here; this file marks the rootdir so
``pytest suites/`` and ``pytest tests/`` share one configuration.
"""
