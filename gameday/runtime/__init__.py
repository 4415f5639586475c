"""The run's plumbing: processes, signals, ports, crash-safe files, the drill lock, settings.

- :mod:`~gameday.runtime.procs`: children that die with their owner, and their registry;
- :mod:`~gameday.runtime.interrupts`: SIGINT/SIGTERM/SIGHUP stop a run, never a revert;
- :mod:`~gameday.runtime.ports`: free ports reserved across processes;
- :mod:`~gameday.runtime.statefile`: atomic, durable JSON files (the ledger, a federation's state);
- :mod:`~gameday.runtime.drill_lock`: one drill at a time on a shared federation;
- :mod:`~gameday.runtime.userinput`: what users hand us (YAML files), read defensively;
- :mod:`~gameday.runtime.resources`: the files gameday ships beside its code;
- :mod:`~gameday.runtime.settings`: every ``--gameday-*`` option, its ini twin and variable.

Settings live here, not beside the plugin, because the layers below the plugin (the load
generator, verdicts' thresholds, the drill lock) read the resolved values; nothing here
imports the model or anything above it.
"""
