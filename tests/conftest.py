"""Shared fixtures for gameday's own tests: a real nats-server and component processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import httpcore  # noqa: F401  (see below)
import pytest

from gameday.errors import HarnessStarved
from gameday.fedapp.common import ADMIN_TOKEN_ENV, read_admin_token
from gameday.fedapp.spec import FederationSpec
from gameday.model.topology import load_topology, parse_topology
from gameday.plugin.reporting import HARNESS_LOG_ENV, INCONCLUSIVE_LOG_ENV
from gameday.targets.admin_token import issue_admin_token
from gameday.targets.local.natsserver import nats_server_argv, wait_for_port
from gameday.targets.local.plan import plan_federation

pytest_plugins = ["pytester"]

# httpx imports httpcore lazily, on its first request, and maps httpcore's exceptions to its own by
# class. pytester's in-process runs (``pytester.runpytest()``) put ``sys.modules`` back as they found
# it: if a worker's first request happened inside one, httpcore is dropped and imported afresh by the
# next request, whose ``httpcore.ConnectError`` no longer matches the class httpx mapped, so it escapes
# every ``except httpx.HTTPError`` (ci on 67368d8: 24 tests on one worker failed "Connection refused"
# while waiting for a component to listen). Importing httpcore here puts it in every snapshot.

INCONCLUSIVE_LOG = pytest.StashKey[Path]()
HARNESS_LOG = pytest.StashKey[Path]()


@pytest.fixture(autouse=True)
def _inner_run_logs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pytest or ``gameday drill`` this test starts appends its inconclusive tests (a starved
    harness, ``GAMEDAY_INCONCLUSIVE_LOG``) and each drill's harness rates (``GAMEDAY_HARNESS_LOG``)
    to files of this test's own: see :func:`pytest_runtest_makereport`."""
    logs = tmp_path_factory.mktemp("inner-runs")
    for env, key, name in ((INCONCLUSIVE_LOG_ENV, INCONCLUSIVE_LOG, "inconclusive.jsonl"),
                           (HARNESS_LOG_ENV, HARNESS_LOG, "harness.jsonl")):
        monkeypatch.setenv(env, str(logs / name))
        request.node.stash[key] = logs / name


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A test that failed while a drill it ran came out inconclusive (its inner run's harness was
    starved, so it could not show what it checks) fails as that: ``HarnessStarved``, which make
    test reruns once (``--only-rerun HarnessStarved``). Only then: any other failure stays as it is.

    And at teardown, the harness rates of every drill the test ran go into its JUnit properties
    (``gameday_harness``, one per drill, with the inner test's node id): how well the observers
    kept up with the federations under test at this parallelism (bench/ci_under_load.py)."""
    rates = item.stash.get(HARNESS_LOG, None)
    if call.when == "teardown" and rates is not None and rates.exists():
        report = yield
        for line in rates.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                report.user_properties.append(("gameday_harness", json.dumps({**entry["harness"],
                                                                             "inner": entry["nodeid"]})))
        return report
    path = item.stash.get(INCONCLUSIVE_LOG, None)
    if call.when == "call" and call.excinfo is not None and not call.excinfo.errisinstance(HarnessStarved) \
            and path is not None and path.exists() and path.read_text().strip():
        inner = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        original = call.excinfo.value
        starved = HarnessStarved(f"inconclusive: a drill this test ran had a starved harness "
                                 f"({inner[0]['nodeid']}: {inner[0]['reason']}), so the test could not "
                                 f"show what it checks; it failed with {type(original).__name__}: "
                                 f"{str(original).splitlines()[0][:300] if str(original) else ''}")
        starved.__cause__ = original
        call.excinfo = pytest.ExceptionInfo.from_exc_info((HarnessStarved, starved, original.__traceback__))
    return (yield)


@pytest.fixture(autouse=True, scope="session")
def _private_session_ledger_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What session-scoped fixtures (shared federations) start uses an index out of the real home."""
    before = os.environ.get("GAMEDAY_STATE_DIR")
    os.environ["GAMEDAY_STATE_DIR"] = str(tmp_path_factory.mktemp("gameday-state-session"))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("GAMEDAY_STATE_DIR", None)
        else:
            os.environ["GAMEDAY_STATE_DIR"] = before


@pytest.fixture(autouse=True)
def _private_ledger_index(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the per-user ledger index (``gameday restore`` from any directory) out of the
    real home and apart between tests: every test, and every process it starts, uses an
    index of its own. (One index per worker let a ``gameday restore`` in one test see the
    ledgers of tests running beside it, and fail on their live runners.)"""
    monkeypatch.setenv("GAMEDAY_STATE_DIR", str(tmp_path_factory.mktemp("gameday-state")))


@pytest.fixture
def admin_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The admin token of the components this test starts, issued as the local target does
    (a 0600 file) and named by ``$GAMEDAY_ADMIN_TOKEN_FILE`` in this process's environment,
    which components started in-process or by :func:`component` inherit."""
    path = tmp_path / "admin-token"
    issue_admin_token(path)
    monkeypatch.setenv(ADMIN_TOKEN_ENV, str(path))
    return read_admin_token(path)


@pytest.fixture
def admin_headers(admin_token: str) -> dict[str, str]:
    """``Authorization: Bearer <admin_token>``, for a test's own admin calls."""
    return {"Authorization": f"Bearer {admin_token}"}


@pytest.fixture
def spec(tmp_path: Path) -> FederationSpec:
    """A planned (not started) federation spec of the default topology, written to tmp_path."""
    s = plan_federation(load_topology(), tmp_path)
    s.dump(tmp_path / "spec.json")
    return s


@pytest.fixture
def make_spec(tmp_path: Path) -> Callable[..., FederationSpec]:
    """Plan a spec from the default topology with top-level overrides (e.g. timing={...})."""

    def _make(**overrides: Any) -> FederationSpec:
        base = load_topology().model_dump()
        for k, v in overrides.items():
            if isinstance(v, dict) and isinstance(base.get(k), dict):
                base[k] = {**base[k], **v}
            else:
                base[k] = v
        s = plan_federation(parse_topology(base, "<test>"), tmp_path)
        s.dump(tmp_path / "spec.json")
        return s

    return _make


class NatsServer:
    """A real JetStream nats-server on a spec's NATS port that a test can stop and start again.

    Every start uses the same port, store (tmp_path/js) and log (tmp_path/nats.log).
    """

    def __init__(self, spec: FederationSpec, tmp_path: Path) -> None:
        self.spec = spec
        self.store, self.log = tmp_path / "js", tmp_path / "nats.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until it listens (``ComponentFailed`` if it exits or never does)."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(nats_server_argv("127.0.0.1", self.spec.nats_port, self.store),
                                         stdout=out, stderr=out)
        wait_for_port("127.0.0.1", self.spec.nats_port, 10, "nats-server", proc=self.proc, log=self.log)

    def stop(self) -> None:
        """Terminate the server if it is running (a no-op otherwise)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def nats_for(tmp_path: Path) -> Iterator[Callable[[FederationSpec], NatsServer]]:
    """``nats_for(spec)`` starts a nats-server for *spec* and returns it; all are stopped at the end."""
    servers: list[NatsServer] = []

    def _start(spec: FederationSpec) -> NatsServer:
        server = NatsServer(spec, tmp_path)
        servers.append(server)
        server.start()
        return server

    try:
        yield _start
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def nats_server(spec: FederationSpec, nats_for: Callable[[FederationSpec], NatsServer]) -> FederationSpec:
    """A real JetStream nats-server on the spec's NATS port; returns the spec."""
    nats_for(spec)
    return spec


@pytest.fixture
def component(tmp_path: Path, admin_token: str) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start component processes (``python -m gameday.fedapp ROLE``) with :func:`admin_token`;
    all are stopped at the end.

    Call as ``component("gateway", region="a")``; stderr goes to tmp_path/<role>-<id>.log.
    """
    procs: list[subprocess.Popen[bytes]] = []

    def _start(role: str, region: str | None = None, instance: str | None = None) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "gameday.fedapp", role, "--spec", str(tmp_path / "spec.json")]
        if region:
            argv += ["--region", region]
        if instance:
            argv += ["--instance", instance]
        log = tmp_path / f"{role}-{region or instance or 'global'}.log"
        with log.open("ab") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=out, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        procs.append(p)
        return p

    try:
        yield _start
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()

