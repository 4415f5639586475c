"""Hooks gameday adds to pytest, so a conftest or a plugin can add a target or a reporter.

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

A reporter (results into Grafana, Slack, a database) implements one or both of the result hooks.
Each implementation is called on its own (:func:`gameday.plugin.reporters.call_reporters`), so
one that raises neither stops the others nor replaces the test's outcome: what it raised is
reported (a "report error(s)" section under the run's tables, and ``report_errors`` in the drill's
figures). gameday's own reporters are implementations too, run first, each switched off with
``-p no:<name>``: ``gameday_plots``, ``gameday_history``, ``gameday_allure``
(:mod:`gameday.plugin.reporters`)::

    def pytest_gameday_drill_recorded(item, result, summary, files):
        post_to_my_dashboard(item.nodeid, summary["switchover"], summary["verdicts"])

    def pytest_gameday_run_recorded(config, drills, conformance, run_dir):
        send_one_message(drills, conformance)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from gameday.interfaces import Endpoints, Target
    from gameday.load.generator import LoadGenerator
    from gameday.model.topology import Topology
    from gameday.runtime.settings import Settings
    from gameday.verdicts.result import DrillResult


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


@pytest.hookspec(firstresult=True)
def pytest_gameday_make_load(config: pytest.Config, endpoints: Endpoints, users: int, rate: float,
                             workdir: Path) -> LoadGenerator | None:
    """Build the load a drill runs under (the ``load`` fixture's value), not yet started, or
    return None to leave it to the next implementation; gameday's own, locust
    (:class:`gameday.load.runner.LoadRunner`), answers last.

    Args:
        config: the pytest config.
        endpoints: where the clients go: the DNS server that answers the service name
            (``dns_server``, ``fqdn``), the gateways' port and how a client asks (``client``).
        users: clients (or arrival processes) to spread the load over (``--gameday-users``,
            the ``gameday`` marker's, the topology's).
        rate: offered requests/s across them (``--gameday-rate``, the marker's, the topology's).
        workdir: a fresh directory for this test's load (records, logs).

    Returns:
        A :class:`gameday.load.generator.LoadGenerator` (subclass
        :class:`gameday.load.generator.RecordedLoad` to implement only ``start``, ``poll`` and
        ``stop``); gameday starts it before the test and stops it after, on every way out.
    """


@pytest.hookspec
def pytest_gameday_target_names(config: pytest.Config) -> Iterable[str] | None:
    """The target names your ``pytest_gameday_make_target`` answers (None: none).

    ``--gameday-target`` accepts a name some implementation lists here (checked when pytest
    starts, before anything is created); an unknown name is a usage error listing them all.
    So implement both in a plugin or in a conftest pytest loads at start (the rootdir's or a
    test path's), not in one further down that is found only while collecting.
    """


@pytest.hookspec
def pytest_gameday_drill_recorded(item: pytest.Item, result: DrillResult, summary: Mapping[str, Any],
                                  files: Mapping[str, Path]) -> None:
    """A drill of *item* is recorded: called once per fault block, when the test's call has ended
    (so *summary* holds the verdicts the test asserted), in the process that ran the test (an
    xdist worker, under ``-n``).

    Args:
        item: the test that ran the drill.
        result: the drill's :class:`gameday.verdicts.result.DrillResult` (its fault window, the
            timeline, every figure and verdict method).
        summary: what ``figures-N.json`` holds (each reporter its own copy: changing it changes
            nothing): the test, the seed, the fault and its region, each figure with its
            resolution, the prediction, the load, the state layer and ``verdicts`` (name,
            outcome, figure, limit, detail).
        files: what gameday wrote for it, by kind (``figures``, ``timeline_csv``,
            ``timeline_json``, ``settings``; ``locust_stats`` under load), and what the reporters
            called before this one added (``gameday_plots``: ``timeline_png``, and ``rounds_png``
            with rounds). One dict for all: a reporter may add its own files for the next.
    """


@pytest.hookspec
def pytest_gameday_run_recorded(config: pytest.Config, drills: Sequence[Mapping[str, Any]],
                                conformance: Sequence[Mapping[str, Any]], run_dir: Path) -> None:
    """The run is over: every drill's summary (the workers' too, under ``-n``) and every
    conformance check's outcome, once, in the controller, after the tables are printed and
    ``run.json`` written (the built-in ``gameday_history`` appends the history here, first).

    Args:
        config: the pytest config.
        drills: each drill's summary as in :func:`pytest_gameday_drill_recorded` (copies),
            aborted drills included (``aborted`` says why).
        conformance: one entry per conformance check: ``rule``, ``title``, ``test``, ``outcome``
            (passed, failed, skipped, inconclusive) and ``reason``.
        run_dir: the run's directory (``reports/runs/<run>``).
    """
