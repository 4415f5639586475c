"""gameday's ready-made suites, installed as ``gameday.suites``.

Run them from an installed gameday with ``pytest --pyargs gameday.suites.conformance``
or ``gameday.suites.gameday``; from a checkout, ``pytest suites``.
"""
