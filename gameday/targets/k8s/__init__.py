"""The Kubernetes targets: ``kind`` (clusters it creates, CI runners) and ``kube`` (existing
kubeconfig contexts, staging), and what they share.

Modules, from data to I/O:

- :mod:`.objects`: building blocks of the reference federation's objects (ports, labels, shapes);
- :mod:`.manifests`: every cluster's objects rendered from a topology (pure);
- :mod:`.files`: kind cluster configs and the reviewed copies under ``clusters/``;
- :mod:`.plan`: deploys, faults and reverts as data (:class:`~.plan.Op` lists), exact inverses;
- :mod:`.client`: the executor over the official ``kubernetes`` client (the only importer);
- :mod:`.kube` and :mod:`.kind`: the two targets.

Nothing is imported here: the registry names the targets by import path, so ``kubernetes``
is loaded only when a Kubernetes target is used.
"""
