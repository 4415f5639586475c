"""Targets: where a federation runs (local, kind, kube, external) behind one interface."""
