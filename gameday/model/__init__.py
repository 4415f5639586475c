"""What a federation and a drill are, and the pure rules over them: no I/O, no clocks, no target.

- :mod:`~gameday.model.topology`: the regions, weights, capacities and timings (a YAML file);
- :mod:`~gameday.model.parts`: a federation's parts as the harness sees them (regions,
  endpoints, routes, component states);
- :mod:`~gameday.model.timeline`: every observation, on one monotonic clock;
- :mod:`~gameday.model.tables`: the name -> entry tables a conftest extends;
- :mod:`~gameday.model.preflight`, :mod:`~gameday.model.ticks`, :mod:`~gameday.model.release`:
  the checks before an injection, what each observer tick evaluates, the release order.

Everything above (verdicts, faults, observers, load, targets, the drill) reads these; they
read only :mod:`gameday.runtime` (user input, settings) and :mod:`gameday.errors`. The
target interface a plugin author implements stays :mod:`gameday.interfaces`: it names
faults, observers and verdicts, which sit above this package.
"""
