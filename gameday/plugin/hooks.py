"""Hooks gameday adds to pytest, so a conftest or a plugin can add a target.

Registered by the plugin with ``pytest_addhooks`` (as pytest-xdist registers
``pytest_xdist_make_scheduler``). A third-party target implements both::

    # conftest.py (or a plugin module)
    from mypkg.targets import MyTarget

    def pytest_gameday_target_names(config):
        return ["mine"]

    def pytest_gameday_make_target(config, name, topology, settings, workdir):
        if name == "mine":
            return MyTarget(topology, workdir)
        return None          # not ours: the next implementation, then the built-ins, answer

and then ``pytest --gameday-target mine``. The built-in targets (``local``, ``kind``,
``kube``, ``external``) are the fallback implementations, from
:mod:`gameday.targets.registry`. For ``gameday restore`` to re-attach such a target after a
killed run, give its class an ``attach(ref)`` classmethod and put it in an importable
module (see :mod:`gameday.targets.registry`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from gameday.interfaces import Target
    from gameday.model.topology import Topology
    from gameday.runtime.settings import Settings


@pytest.hookspec(firstresult=True)
def pytest_gameday_make_target(
    config: pytest.Config, name: str, topology: Topology, settings: Settings, workdir: Path
) -> Target | None:
    """Build the target called *name* (``--gameday-target``), not yet up, or return None
    when *name* is not yours.

    Args:
        config: the pytest config.
        name: the target name asked for.
        topology: the validated topology of the run.
        settings: every ``--gameday-*`` setting.
        workdir: a fresh directory for this federation's files (state, logs, dry-run records).

    Returns:
        An object implementing :class:`gameday.interfaces.Target`; the first non-None
        answer wins.

    Raise a :class:`gameday.errors.GamedayError` naming what is missing (a tool, a context,
    a file): the run stops with it as a usage error, before anything is created.
    """


@pytest.hookspec
def pytest_gameday_target_names(config: pytest.Config) -> Iterable[str] | None:
    """The target names your ``pytest_gameday_make_target`` answers (None: none).

    ``--gameday-target`` accepts a name some implementation lists here (checked when pytest
    starts, before anything is created); an unknown name is a usage error listing them all.
    So implement both in a plugin or in a conftest pytest loads at start (the rootdir's or a
    test path's), not in one further down that is found only while collecting.
    """
