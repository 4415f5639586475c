"""The reference app runs with only its own dependencies importable: its spec types are its
own (:mod:`gameday.fedapp.spec`), so a component process starts and serves with every harness
module (and pytest, httpx) refused at import. import-linter's fedapp contract checks the
import statements; this checks the processes themselves."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from gameday.fedapp.spec import AppTopology, FederationSpec

# Installed before anything else in the child: any import of a gameday module outside the app
# (gameday itself and gameday.version are the package's own), or of the harness's libraries,
# raises ImportError naming it.
BLOCKER = textwrap.dedent("""
    import importlib.abc, sys

    class HarnessRefused(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            own = name == "gameday.version" or name.startswith("gameday.fedapp")
            harness = name.startswith("gameday.") and not own
            if harness or name.split(".")[0] in ("pytest", "httpx", "locust", "kubernetes", "allure"):
                raise ImportError(f"{name} imported by the reference app (only its own dependencies "
                                  "are importable)")
            return None

    sys.meta_path.insert(0, HarnessRefused())
""")

ROLES: list[tuple[str, list[str], str]] = [
    ("app", ["--instance", "a-1"], "app-a-1"), ("gateway", ["--region", "a"], "gateway-a"),
    ("proxy", ["--region", "a"], "proxy-a"), ("agent", ["--region", "a"], "agent-a"),
    ("controlplane", [], "controlplane"), ("gslb", [], "gslb"),
]


def test_every_module_of_the_app_imports_without_the_harness(spec: FederationSpec, tmp_path: Path) -> None:
    code = BLOCKER + textwrap.dedent(f"""
        import importlib, pkgutil
        import gameday.fedapp
        from gameday.fedapp.spec import FederationSpec
        for m in pkgutil.walk_packages(gameday.fedapp.__path__, "gameday.fedapp."):
            importlib.import_module(m.name)
        s = FederationSpec.load({str(tmp_path / "spec.json")!r})
        print(type(s.topology).__name__, s.topology.fqdn)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["AppTopology", spec.topology.fqdn]
    assert isinstance(spec.topology, AppTopology)
    # The app's view leaves the harness's fields behind.
    assert not {"contexts", "load", "regions", "primary"} & set(spec.topology.model_dump())


def test_the_test_would_see_a_harness_import(tmp_path: Path) -> None:
    """Control: the blocker refuses a harness module, so the test above means something."""
    out = subprocess.run([sys.executable, "-c", BLOCKER + "import gameday.model.topology"], capture_output=True,
                         text=True, check=False, timeout=60)
    assert out.returncode != 0
    assert "gameday.model imported by the reference app" in out.stderr  # its package is refused first


@pytest.mark.usefixtures("admin_token")
def test_each_component_process_serves_with_the_harness_unimportable(spec: FederationSpec, tmp_path: Path) -> None:
    """No NATS here: every component serves ``/livez`` before (and while) it looks for the bus."""
    endpoints = spec.http_endpoints()
    procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    try:
        for role, where, _ in ROLES:
            argv = ["gameday.fedapp", role, "--spec", str(tmp_path / "spec.json"), *where]
            code = BLOCKER + f"import runpy; sys.argv = {argv!r}; runpy.run_module('gameday.fedapp', " \
                             "run_name='__main__', alter_sys=True)"
            log = tmp_path / f"{role}.log"
            with log.open("ab") as out:
                procs.append((role, subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=out,
                                                     env={**os.environ, "PYTHONUNBUFFERED": "1"}), log))
        for (_, _, name), (role, proc, log) in zip(ROLES, procs, strict=True):
            deadline = time.monotonic() + 20
            while True:
                assert proc.poll() is None, f"{role} exited: {log.read_text()[-3000:]}"
                try:
                    if httpx.get(endpoints[name].url + "/livez", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, f"{role} not serving /livez: {log.read_text()[-2000:]}"
                time.sleep(0.05)
        for role, _, log in procs:
            assert "imported by the reference app" not in log.read_text(), role
    finally:
        for _, p, _ in procs:
            if p.poll() is None:
                p.terminate()
        for _, p, _ in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
