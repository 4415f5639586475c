"""pytest plugin entry point (options, markers, fixtures wiring)."""
