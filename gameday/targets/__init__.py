"""Targets: where a federation runs (local, kind, kube) behind one interface."""
