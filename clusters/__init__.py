"""Topologies, kind cluster configs and Kubernetes manifests shipped with gameday.

This directory is installed as the ``gameday.clusters`` package (data only), so an
installed gameday reads its default topology with :mod:`importlib.resources` exactly as a
checkout does; see :func:`gameday.runtime.resources.clusters_dir`.
"""
