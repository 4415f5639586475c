"""The one HTTP skeleton of the six components (:mod:`gameday.fedapp.skeleton`), with real
component processes and real HTTP: one ``/livez`` body, admin on a listener of its own when
``$GAMEDAY_ADMIN_LISTEN`` says so (the public port answers 404 and logs it), the token still
required there, and a refused fault body changes nothing.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gameday.fedapp.skeleton import ADMIN_LISTEN_ENV
from gameday.fedapp.spec import Endpoint, FederationSpec

Component = Callable[..., subprocess.Popen[bytes]]
WRONG = "not-the-token-0123456789abcdefghijklmnopqrstu"

ROLES: list[tuple[str, dict[str, str]]] = [
    ("app", {"instance": "a-1"}), ("gateway", {"region": "a"}), ("proxy", {"region": "a"}),
    ("agent", {"region": "a"}), ("controlplane", {}), ("gslb", {}),
]


def _endpoint(spec: FederationSpec, role: str) -> Endpoint:
    if role == "app":
        return spec.instance("a-1")[1].endpoint
    if role == "controlplane":
        return spec.control_plane
    if role == "gslb":
        return spec.gslb_http
    ep: Endpoint = getattr(spec.region("a"), role)
    return ep


def _log(spec: FederationSpec, role: str, where: dict[str, str]) -> Path:
    return Path(spec.workdir) / f"{role}-{where.get('region') or where.get('instance') or 'global'}.log"


def _events(log: Path, event: str) -> list[dict[str, Any]]:
    return [rec for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("{")
            for rec in [json.loads(line)] if rec.get("event") == event]


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _wait_http(proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float = 15,
               headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            httpx.get(url, timeout=1, headers=headers)
        except httpx.HTTPError:
            pass
        else:
            return
        assert time.monotonic() < deadline, f"{url} not answering in {timeout} s: {log.read_text()[-2000:]}"
        time.sleep(0.05)


def test_livez_has_one_body_for_all_six_components(spec: FederationSpec, component: Component) -> None:
    """No NATS here: every component serves HTTP before (and while) it looks for the bus."""
    procs = [(role, where, component(role, **where)) for role, where in ROLES]
    answers = {}
    for role, where, proc in procs:
        url = _endpoint(spec, role).url + "/livez"
        _wait_http(proc, url, _log(spec, role, where))
        r = httpx.get(url, timeout=2)
        answers[role] = (r.status_code, r.headers["Content-Type"], r.content)
    assert set(answers) == {"app", "gateway", "proxy", "agent", "controlplane", "gslb"}
    assert set(answers.values()) == {(200, "application/json; charset=utf-8", b'{"live":true}')}, answers


@pytest.mark.parametrize(("role", "where"), [("app", {"instance": "a-1"}), ("gateway", {"region": "a"})],
                         ids=["app", "gateway"])
def test_a_separate_admin_listener_takes_admin_off_the_public_port(
        spec: FederationSpec, component: Component, admin_token: str, monkeypatch: pytest.MonkeyPatch,
        role: str, where: dict[str, str]) -> None:
    public = _endpoint(spec, role)
    admin = f"http://{public.host}:{_free_port(public.host)}"  # the component's own address, its own port
    monkeypatch.setenv(ADMIN_LISTEN_ENV, admin.removeprefix("http://"))
    log = _log(spec, role, where)
    proc = component(role, **where)
    good = {"Authorization": f"Bearer {admin_token}"}
    _wait_http(proc, admin + "/admin/fault", log, headers=good)  # a GET: 404 there, and not logged

    def ready() -> int:
        return httpx.get(public.url + "/readyz", timeout=2).status_code

    before = ready()
    fail = {"readyz": "fail"}
    # The public port: 404 for every spelling, with or without the token, logged; nothing applied.
    for path in ("/admin/fault", "//admin/fault", "/Admin/fault"):
        r = httpx.post(public.url + path, json=fail, headers=good, timeout=2)
        assert r.status_code == 404, (path, r.text)
    assert httpx.post(public.url + "/admin/fault", json=fail, timeout=2).status_code == 404
    assert ready() == before
    refused = _events(log, "admin_refused")
    assert [(e["path"], e["reason"]) for e in refused] == [
        (p, "admin is not served on the public port")
        for p in ("/admin/fault", "//admin/fault", "/Admin/fault", "/admin/fault")]
    # The admin port: still the token, 401 and nothing applied without it.
    for headers, why in (({}, "no bearer token"), ({"Authorization": f"Bearer {WRONG}"}, "wrong token")):
        r = httpx.post(admin + "/admin/fault", json=fail, headers=headers, timeout=2)
        assert r.status_code == 401, r.text
        assert _events(log, "admin_refused")[-1]["reason"] == why
    assert ready() == before
    # Only admin lives there; with the token the fault applies, and its revert.
    assert httpx.get(admin + "/status", headers=good, timeout=2).status_code == 404
    r = httpx.post(admin + "/admin/fault", json=fail, headers=good, timeout=2)
    assert r.status_code == 200 and r.json()["readyz"]["mode"] == "fail"
    assert ready() == 503
    assert httpx.post(admin + "/admin/fault", json={"readyz": "ok"}, headers=good, timeout=2).status_code == 200
    assert ready() == before
    assert httpx.post(admin + "/admin/nothing-here", json={}, headers=good, timeout=2).status_code == 404
    assert [e["admin"] for e in _events(log, "admin_listening")] == [admin.removeprefix("http://")]
    assert admin_token not in log.read_text(encoding="utf-8")


def test_a_malformed_admin_listen_address_stops_the_component(
        spec: FederationSpec, component: Component, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ADMIN_LISTEN_ENV, "127.0.1.11")  # no port
    proc = component("app", instance="a-1")
    assert proc.wait(15) != 0
    [event] = _events(_log(spec, "app", {"instance": "a-1"}), "admin_listen_invalid")
    assert ADMIN_LISTEN_ENV in event["error"] and "'127.0.1.11'" in event["error"]


def test_a_refused_fault_body_applies_nothing(
        spec: FederationSpec, component: Component, admin_headers: dict[str, str]) -> None:
    """The readiness part is staged until the component's own keys are valid (400 changes nothing)."""
    proc = component("app", instance="a-1")
    url = spec.instance("a-1")[1].endpoint.url
    _wait_http(proc, url + "/readyz", _log(spec, "app", {"instance": "a-1"}))
    r = httpx.post(url + "/admin/fault", json={"readyz": "fail", "livez": "bogus"}, headers=admin_headers, timeout=2)
    assert r.status_code == 400 and "livez" in r.text
    assert httpx.get(url + "/readyz", timeout=2).status_code == 200
    r = httpx.post(url + "/admin/fault", json={"readyz": "flap", "period": 1, "down": 2, "livez": "fail"},
                   headers=admin_headers, timeout=2)
    assert r.status_code == 400 and "flap" in r.text
    assert httpx.get(url + "/livez", timeout=2).status_code == 200
    assert httpx.post(url + "/admin/fault", content=b"[1]", headers=admin_headers, timeout=2).status_code == 400
    r = httpx.post(url + "/admin/fault", json={"readyz": "fail", "livez": "fail"}, headers=admin_headers, timeout=2)
    assert r.json() == {"readyz": {"mode": "fail", "period": 1.0, "down": 0.5}, "livez": "fail"}
    assert httpx.get(url + "/readyz", timeout=2).json() == {"ready": False, "reason": "fault"}
    assert httpx.get(url + "/livez", timeout=2).status_code == 500
