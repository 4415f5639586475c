"""The ``gameday`` command line: ``drill``, ``restore``, ``down``, ``report``, ``init``, ...

:mod:`~gameday.cli.main` parses the command line (the console script ``gameday`` and
``python -m gameday.cli`` both run its :func:`~gameday.cli.main.main`);
:mod:`~gameday.cli.scaffold` is ``gameday init``. The work of ``restore`` and ``down`` is
:mod:`gameday.restore`, which the plugin's session also uses (taking its turn on a
shared federation), so it sits below both.
"""
