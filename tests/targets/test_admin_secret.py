"""The per-run admin token on Kubernetes: a Secret mounted into every component, never in a plan.

- every fedapp container reads ``$GAMEDAY_ADMIN_TOKEN_FILE`` from the mounted admin Secret
  (the contract with the fedapp's admin guard), and the Secret is applied before any
  workload of its cluster;
- the plans, the dry-run record and the reviewed copies hold no token: the executor adds it
  when it applies the Secret (checked through the real ``kubernetes`` client against the
  stand-in API server, which stores ``stringData`` as the API server does), and ``gameday
  restore`` reads it back from the Secret;
- admin calls carry ``Authorization: Bearer`` (the request as it goes down a port-forward's
  socket, here a real TCP socket to a real HTTP server that checks it); a refusal's message
  names the status, never the token.

Not checked here (needs a cluster, done by the nightly kind job): the websocket port-forward itself.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from gameday.model.topology import Topology
from gameday.targets.k8s import files as k8s_files
from gameday.targets.k8s import manifests
from gameday.targets.k8s import objects as o
from gameday.targets.k8s.client import Clusters, http_request
from gameday.targets.k8s.kube import KubeTarget
from gameday.targets.k8s.plan import Op

from .apiserver import ApiServer

Rendered = dict[str, list[dict[str, Any]]]


def test_every_fedapp_container_reads_the_token_from_the_mounted_secret(rendered: Rendered) -> None:
    fedapp = 0
    for cluster, objs in rendered.items():
        kinds = [obj["kind"] for obj in objs]
        assert kinds.index("Secret") < min(i for i, k in enumerate(kinds) if k in ("Deployment", "StatefulSet")), \
            f"{cluster}: the admin Secret must be applied before the workloads"
        (secret,) = [obj for obj in objs if obj["kind"] == "Secret"]
        assert secret["metadata"]["name"] == o.ADMIN_SECRET and "data" not in secret and "stringData" not in secret
        for w in (obj for obj in objs if obj["kind"] in ("Deployment", "StatefulSet")):
            pod = w["spec"]["template"]["spec"]
            for ctr in pod["containers"]:
                if ctr["image"] != o.APP_IMAGE:
                    assert not any(e["name"] == o.ADMIN_TOKEN_ENV for e in ctr.get("env", [])), "nats needs none"
                    continue
                fedapp += 1
                env = {e["name"]: e["value"] for e in ctr["env"]}
                path = Path(env[o.ADMIN_TOKEN_ENV])
                (mount,) = [m for m in ctr["volumeMounts"] if Path(m["mountPath"]) == path.parent]
                assert mount["readOnly"] is True
                (vol,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
                assert vol["secret"]["secretName"] == o.ADMIN_SECRET
                assert {"key": o.ADMIN_TOKEN_KEY, "path": path.name} in vol["secret"]["items"]
                assert vol["secret"]["defaultMode"] & 0o007 == 0, "others may not read the token"
    assert fedapp >= 5 * 3, "every gateway, proxy, agent and app instance, the control plane and the GSLB"


def test_the_env_var_is_the_fedapp_contract() -> None:
    """The name the components read (the fedapp's admin guard), spelled in one place here."""
    assert o.ADMIN_TOKEN_ENV == "GAMEDAY_ADMIN_TOKEN_FILE"


def test_a_new_admin_generation_rolls_the_pods(topology: Topology) -> None:
    def hashes(gen: str) -> set[str]:
        return {w["spec"]["template"]["metadata"]["annotations"][o.ANNOTATION_SPEC_HASH]
                for objs in manifests.render_all(topology, admin_generation=gen).values() for w in objs
                if w["kind"] == "Deployment"}
    assert hashes("one").isdisjoint(hashes("two"))
    assert hashes("one") == hashes("one")


def test_plans_and_the_dry_run_record_hold_no_token(topology: Topology, tmp_path: Path) -> None:
    t = KubeTarget(topology, tmp_path, allow=["kind-gd-*"], dry_run=True, out=io.StringIO())
    t.up()
    t.deploy()
    secrets_applied = [op for op in t.recorded if op.kind == "Secret"]
    assert len(secrets_applied) == 1 + len(topology.regions)
    assert all("data" not in dict(op.body or {}) and "stringData" not in dict(op.body or {})
               for op in secrets_applied)
    record = [json.loads(line) for line in (tmp_path / "dry-run.jsonl").read_text().splitlines()]
    recorded_secrets = [r["body"] for r in record if r["kind"] == "Secret"]
    assert len(recorded_secrets) == len(secrets_applied)
    assert all(set(b) == {"apiVersion", "kind", "metadata", "type"} for b in recorded_secrets), recorded_secrets
    text = "".join(k8s_files.reviewed_files(topology).values())
    assert "stringData" not in text


@pytest.fixture
def api() -> Iterator[ApiServer]:
    with ApiServer() as server:
        yield server


def _clusters(topology: Topology, api: ApiServer) -> Clusters:
    def factory(context: str) -> Any:
        cfg = k8s.Configuration()
        cfg.host = api.url
        return k8s.ApiClient(cfg)
    return Clusters(topology, {"a": "kind-gd-a"}, factory)


def test_the_executor_adds_the_token_when_it_applies_the_secret_and_restore_reads_it_back(
        topology: Topology, api: ApiServer) -> None:
    secret = o.admin_secret(topology, "a")
    op = Op(verb="apply", cluster="a", kind="Secret", name=o.ADMIN_SECRET, body=secret)
    c = _clusters(topology, api)
    c.set_admin_token("t0ken-of-this-run")
    c.execute(op)
    stored = api.objects[("Secret", o.NAMESPACE, o.ADMIN_SECRET)]
    assert base64.b64decode(stored["data"][o.ADMIN_TOKEN_KEY]).decode() == "t0ken-of-this-run"
    assert "stringData" not in dict(op.body or {}), "the plan's object was not changed"
    assert "t0ken" not in repr(c) and "t0ken" not in repr(op)
    again = _clusters(topology, api)  # gameday restore: a new process, the token read from the Secret
    assert again.admin_token("a") == "t0ken-of-this-run"


def test_without_the_secret_admin_calls_are_refused_before_any_call(topology: Topology, api: ApiServer) -> None:
    with pytest.raises(Exception, match=r"cannot read the admin token from Secret gameday/gameday-admin"):
        _clusters(topology, api).admin_token("a")


class _Guarded(BaseHTTPRequestHandler):
    """An admin endpoint that wants ``Authorization: Bearer right``."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        ok = self.headers.get("Authorization") == "Bearer right"
        data = json.dumps({"applied": json.loads(body)} if ok else {"error": "admin call refused: wrong token"})
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())


@pytest.fixture
def guarded() -> Iterator[tuple[str, int]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Guarded)
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    try:
        yield ("127.0.0.1", int(server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()
        th.join(5)


def test_admin_requests_carry_the_bearer_token(guarded: tuple[str, int]) -> None:
    ok = http_request(socket.create_connection(guarded), "POST", "/admin/fault", {"readyz": "fail"},
                      token="right", timeout=5)
    assert ok == (200, b'{"applied": {"readyz": "fail"}}')
    wrong = http_request(socket.create_connection(guarded), "POST", "/admin/fault", {"readyz": "fail"},
                         token="wrong", timeout=5)
    none = http_request(socket.create_connection(guarded), "POST", "/admin/fault", {}, token=None, timeout=5)
    assert wrong[0] == none[0] == 401
