"""Helpers of the conformance suite (``suites/conformance``): seeing a federation from outside.

Everything here talks to a federation only through a target's public endpoints - DNS and
the gateways (:class:`~gameday.interfaces.Endpoints`), and the reference app's HTTP
``/status`` and ``/metrics`` (:class:`~gameday.observers.reference.ReferenceEndpoints`, where
the target runs it) - exactly as it would talk to a staging federation.

* :mod:`.view` - :class:`~.view.FederationView`: statuses, metrics, requests through
  entry nodes, and waits for conditions (converged, DNS settled) with deadlines;
* :mod:`.promtext` - Prometheus text (parsed by prometheus_client) as samples, and histogram quantiles;
* :mod:`.dnssample` - many GSLB queries quickly, each answer stamped when it arrived;
* :mod:`.stats` - distribution-free bounds (Hoeffding) for DNS share checks;
* :mod:`.wait` - deadline helpers in pairs: one raises, one returns what it saw;
* :mod:`.manifests` - loading and checking Kubernetes manifests offline (R11).
"""
