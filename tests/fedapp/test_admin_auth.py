"""Nobody without the run's token can break the federation: every component's admin calls
need ``Authorization: Bearer <token>``; the refusal is 401 and logged, and nothing changes.

Real component processes on their loopback addresses; the token issued as the local target
issues it (:func:`gameday.targets.admin_token.issue_admin_token`).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gameday.errors import FaultError
from gameday.fedapp.common import ADMIN_TOKEN_ENV, is_admin_path
from gameday.fedapp.spec import FederationSpec
from gameday.model.topology import load_topology
from gameday.targets.admin_token import AdminAuth, issue_admin_token
from gameday.targets.local.federation import LocalFederation

Component = Callable[..., subprocess.Popen[bytes]]
WRONG = "not-the-token-0123456789abcdefghijklmnopqrstu"  # same length as a real one (43)


def _events(log: Path, event: str) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            if rec.get("event") == event:
                out.append(rec)
    return out


def _start_app(component: Component, spec: FederationSpec) -> tuple[str, Path]:
    proc = component("app", instance="a-1")
    url = spec.instance("a-1")[1].endpoint.url
    log = Path(spec.workdir) / "app-a-1.log"

    deadline = time.monotonic() + 15
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return url, log
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"app a-1 not ready in 15 s: {log.read_text()[-2000:]}"
        time.sleep(0.05)


@pytest.mark.parametrize(("header", "path", "reason"), [
    (None, "/admin/fault", "no bearer token"),
    ("Bearer " + WRONG, "/admin/fault", "wrong token"),
    ("Bearer", "/admin/fault", "no bearer token"),
    ("Basic {token}", "/admin/fault", "no bearer token"),  # the right token, the wrong scheme
    ("Bearer {token}x", "/admin/fault", "wrong token"),
    (None, "//admin/fault", "no bearer token"),  # another spelling of the path is guarded too
], ids=["none", "wrong", "empty", "basic", "longer", "double-slash"])
def test_an_admin_call_without_the_token_is_refused_logged_and_changes_nothing(
        spec: FederationSpec, component: Component, admin_token: str,
        header: str | None, path: str, reason: str) -> None:
    url, log = _start_app(component, spec)
    headers = {} if header is None else {"Authorization": header.format(token=admin_token)}
    r = httpx.post(url + path, json={"readyz": "fail"}, headers=headers, timeout=2)
    assert r.status_code == 401, r.text
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert admin_token not in r.text
    assert httpx.get(url + "/readyz", timeout=2).status_code == 200, "the refused fault was applied"
    refused = _events(log, "admin_refused")
    assert [(e["reason"], e["path"], e["method"]) for e in refused] == [(reason, path, "POST")]
    text = log.read_text(encoding="utf-8")
    assert admin_token not in text and WRONG not in text

    # The same call with the token works (lower-case scheme too: RFC 7235 schemes are case-insensitive).
    ok = httpx.post(url + "/admin/fault", json={"readyz": "fail"}, timeout=2,
                    headers={"Authorization": f"bearer {admin_token}"})
    assert ok.status_code == 200, ok.text
    assert httpx.get(url + "/readyz", timeout=2).status_code == 503
    assert admin_token not in log.read_text(encoding="utf-8")


def test_a_component_without_a_token_refuses_every_admin_call(
        spec: FederationSpec, component: Component, admin_headers: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: no token configured means no admin at all (the data plane still serves)."""
    monkeypatch.delenv(ADMIN_TOKEN_ENV)
    url, log = _start_app(component, spec)
    assert [e["event"] for e in _events(log, "admin_disabled")] == ["admin_disabled"]
    r = httpx.post(url + "/admin/fault", json={"readyz": "fail"}, headers=admin_headers, timeout=2)
    assert r.status_code == 401
    assert httpx.get(url + "/readyz", timeout=2).status_code == 200
    assert [e["reason"] for e in _events(log, "admin_refused")] == [
        f"no admin token configured on this component (set {ADMIN_TOKEN_ENV})"]


def test_a_token_file_that_cannot_be_read_stops_the_component_at_start(
        spec: FederationSpec, component: Component, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "no-such-token"
    monkeypatch.setenv(ADMIN_TOKEN_ENV, str(missing))
    proc = component("app", instance="a-1")
    assert proc.wait(15) != 0
    [event] = _events(tmp_path / "app-a-1.log", "admin_token_unreadable")
    assert str(missing) in event["error"] and "cannot be read" in event["error"]


def test_the_token_file_is_the_owners_alone_from_its_first_byte(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[tuple[int, int]] = []
    real_open = os.open

    def spy(path: Any, flags: int, mode: int = 0o777, **kw: Any) -> int:
        opened.append((flags, mode))
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", spy)  # the module calls os.open: spy on every call while it issues
    path = tmp_path / "run" / "admin-token"
    old = os.umask(0)  # the most permissive umask: the mode passed at creation must do the work
    try:
        issue_admin_token(path)
        first = path.read_text()
        issue_admin_token(path)
    finally:
        os.umask(old)
    [(flags, mode), _] = opened
    assert flags & os.O_EXCL and flags & os.O_CREAT and mode == 0o600
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    second = path.read_text()
    assert len(first) == len(second) == 43 and first != second
    assert sorted(p.name for p in path.parent.iterdir()) == ["admin-token"]  # no temporary file left
    assert first not in repr(AdminAuth(path)) and second not in repr(AdminAuth(path))


@pytest.mark.parametrize(("path", "guarded"), [
    ("/admin/fault", True), ("/admin", True), ("//admin/slow", True), ("/ADMIN/fault", True),
    ("/admin/", True), ("/status", False), ("/administrator", False), ("/call/admin/x", False), ("/", False),
])
def test_which_paths_the_guard_covers(path: str, guarded: bool) -> None:
    assert is_admin_path(path) is guarded


# -- every component of a real federation ---------------------------------------------------------
@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFederation]:
    fed = LocalFederation.from_topology(load_topology(), tmp_path_factory.mktemp("admin-fed"))
    fed.start()
    try:
        yield fed
    finally:
        fed.stop()


def _probe(fed: LocalFederation, name: str) -> tuple[str, dict[str, Any], Callable[[], object]]:
    """An admin call that would change *name*'s state, and how to read that state."""
    role = fed.components[name].role
    url = fed.listen_endpoint(name).url  # the public port: where readiness is read
    if role == "agent":
        return "/admin/slow", {"labels": {"tier": "x"}}, lambda: fed.get_json(name)["slow"]
    if role == "gslb":
        return "/admin/fault", {"ignore_weights": True}, lambda: fed.get_json(name)["ignore_weights"]
    return "/admin/fault", {"readyz": "fail"}, lambda: httpx.get(url + "/readyz", timeout=2).status_code


def test_every_component_refuses_unsigned_admin_calls_and_obeys_signed_ones(federation: LocalFederation) -> None:
    fed = federation
    token = fed.admin_token_file.read_text()
    assert stat.S_IMODE(fed.admin_token_file.stat().st_mode) == 0o600
    state = (fed.workdir / "state.json").read_text()
    assert str(fed.admin_token_file) in state and token not in state  # the path, never the token
    names = [n for n, c in fed.components.items() if c.role not in ("nats", "store")]  # NATS servers: no HTTP
    assert {fed.components[n].role for n in names} == {"controlplane", "gslb", "app", "agent", "gateway", "proxy"}
    assert set(fed.spec.admin) == set(names), "every component has an admin port of its own"
    for name in names:
        path, body, read = _probe(fed, name)
        before = read()
        admin, public = fed.admin_endpoint(name), fed.listen_endpoint(name)
        assert (admin.host, admin.port != public.port) == (public.host, True), name  # own address, own port
        for headers in ({}, {"Authorization": f"Bearer {WRONG}"}):
            r = httpx.post(admin.url + path, json=body, headers=headers, timeout=2)
            assert r.status_code == 401, (name, r.status_code, r.text)
        # The public port does not serve admin at all, not even with the token.
        r = httpx.post(public.url + path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=2)
        assert r.status_code == 404, (name, r.status_code, r.text)
        assert read() == before, f"{name}: a refused admin call changed its state"
        reasons = [e["reason"] for e in _events(fed.logdir / f"{name}.log", "admin_refused")]
        assert reasons == ["no bearer token", "wrong token", "admin is not served on the public port"], (name, reasons)
    r = httpx.post(fed.admin_endpoint("controlplane").url + "/admin/reconcile", timeout=2)
    assert r.status_code == 401

    # Signed by the harness: the fault applies, and its revert too.
    fed.set_readyz_fault("gateway-a", {"readyz": "fail"})
    assert httpx.get(fed.listen_endpoint("gateway-a").url + "/readyz", timeout=2).status_code == 503
    fed.set_readyz_fault("gateway-a", {"readyz": "ok"})
    assert fed.admin("controlplane", {}, path="/admin/reconcile")["replied"]
    for log in fed.logdir.glob("*.log"):
        assert token not in log.read_text(encoding="utf-8", errors="replace"), log


def test_a_harness_without_the_token_file_says_which_file(federation: LocalFederation, tmp_path: Path) -> None:
    other = LocalFederation(federation.spec, federation.topology)
    other.admin_token_file = tmp_path / "gone"
    try:
        with pytest.raises(FaultError, match=r"^gateway-a: cannot sign POST /admin/fault: admin token file .*gone: "
                                             r"cannot be read"):
            other.admin("gateway-a", {"readyz": "fail"})
    finally:
        other._http.close()
    assert httpx.get(federation.listen_endpoint("gateway-a").url + "/readyz", timeout=2).status_code == 200


def test_stop_removes_the_token_file(tmp_path: Path) -> None:
    """Once every process that knew it is gone, the token is not left behind (a clean stop)."""
    fed = LocalFederation.from_topology(load_topology(), tmp_path / "fed")
    issue_admin_token(fed.admin_token_file)
    fed.stop()
    assert not fed.admin_token_file.exists()
    assert json.loads((fed.workdir / "state.json").read_text())["admin_token_file"] == str(fed.admin_token_file)
