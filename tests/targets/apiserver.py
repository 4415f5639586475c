"""A tiny stand-in Kubernetes API server on a loopback port, for the profile faults' executor.

Test infrastructure, deliberately small and not a cluster: it serves only the requests the
profile faults make (a workload's ``scale`` subresource, a Service, a NetworkPolicy) the way
the API server documents them, so the real ``kubernetes`` client, its serialisation and
content types are exercised end to end:

- ``GET``/``PATCH`` ``.../deployments|statefulsets/{name}/scale`` (``autoscaling/v1`` Scale,
  ``application/merge-patch+json``);
- ``GET``/``PATCH`` ``/api/v1/namespaces/{ns}/services/{name}`` (JSON merge patch, RFC 7386:
  a ``null`` removes a key);
- ``PATCH`` (server-side apply, ``application/apply-patch+yaml``, ``fieldManager`` and
  ``force`` required) and ``DELETE`` of ``.../networkpolicies/{name}`` (404 when absent);
- server-side apply and ``GET`` of ``/api/v1/namespaces/{ns}/secrets/{name}`` (``stringData``
  is write-only: stored base64-encoded in ``data``);
- ``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``: the review's
  ``spec.resourceAttributes`` answered ``allowed`` unless :attr:`ApiServer.denied` holds
  ``(verb, group, resource, subresource)`` (``subresource`` "" for none); every review asked
  is recorded in :attr:`ApiServer.reviews`.

Every object it stores is validated strictly against the real schemas (kubernetes-validate)
first; a request it does not know is a 404 and is recorded in :attr:`ApiServer.unknown`.
No controllers, no pods: scaling changes ``spec.replicas`` and nothing else.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes_validate

from gameday.targets.k8s import objects as o

Key = tuple[str, str, str]
"""(kind, namespace, name)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class ApiServer:
    """The objects, by (kind, namespace, name), and the HTTP server serving them."""

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        """(method, path, content type) of every request, in order."""
        self.unknown: list[str] = []
        self.denied: set[tuple[str, str, str, str]] = set()
        """(verb, group, resource, subresource) this server's token may not do."""
        self.reviews: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> ApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(5)

    def put(self, obj: dict[str, Any]) -> None:
        kubernetes_validate.validate(obj, o.SCHEMA_VERSION, strict=True)
        m = obj["metadata"]
        self.objects[(obj["kind"], m["namespace"], m["name"])] = copy.deepcopy(obj)

    def state(self) -> dict[Key, dict[str, Any]]:
        return copy.deepcopy(self.objects)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str) -> None:
                self._send(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                                  "reason": reason, "message": reason})

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"null")

            def _route(self) -> None:
                parts = urlsplit(self.path)
                ctype = self.headers.get("Content-Type")
                with server._lock:
                    server.requests.append((self.command, parts.path, ctype))
                    try:
                        self._dispatch(parts.path, parse_qs(parts.query), ctype)
                    except kubernetes_validate.ValidationError as exc:  # what the API server rejects too
                        server.unknown.append(f"invalid {self.command} {parts.path}: {exc}")
                        self._status(422, f"Invalid: {exc}")

            def _dispatch(self, path: str, query: dict[str, list[str]], ctype: str | None) -> None:
                objs = server.objects
                if path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" and self.command == "POST":
                    review = self._body()
                    kubernetes_validate.validate(review, o.SCHEMA_VERSION, strict=True)
                    attrs = review["spec"]["resourceAttributes"]
                    server.reviews.append(attrs)
                    key = (attrs["verb"], attrs.get("group", ""), attrs["resource"], attrs.get("subresource", ""))
                    allowed = key not in server.denied
                    status = {"allowed": allowed, **({} if allowed else {"reason": "RBAC: not granted"})}
                    return self._send(201, {**review, "status": status})
                m = re.fullmatch(r"/apis/apps/v1/namespaces/([^/]+)/(deployments|statefulsets)/([^/]+)/scale", path)
                if m:
                    kind = "Deployment" if m[2] == "deployments" else "StatefulSet"
                    key = (kind, m[1], m[3])
                    if key not in objs:
                        return self._status(404, "NotFound")
                    if self.command == "PATCH":
                        if ctype != "application/merge-patch+json":
                            return self._status(415, f"UnsupportedMediaType {ctype}")
                        patch = self._body()
                        objs[key]["spec"]["replicas"] = int(patch["spec"]["replicas"])
                    n = objs[key]["spec"]["replicas"]
                    return self._send(200, {"apiVersion": "autoscaling/v1", "kind": "Scale",
                                            "metadata": {"name": m[3], "namespace": m[1]},
                                            "spec": {"replicas": n}, "status": {"replicas": n}})
                m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/services/([^/]+)", path)
                if m:
                    key = ("Service", m[1], m[2])
                    if key not in objs:
                        return self._status(404, "NotFound")
                    if self.command == "PATCH":
                        if ctype != "application/merge-patch+json":
                            return self._status(415, f"UnsupportedMediaType {ctype}")
                        patched = merge_patch(objs[key], self._body())
                        kubernetes_validate.validate(patched, o.SCHEMA_VERSION, strict=True)
                        objs[key] = patched
                    return self._send(200, objs[key])
                m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/secrets/([^/]+)", path)
                if m:
                    key = ("Secret", m[1], m[2])
                    if self.command == "PATCH":
                        if ctype != "application/apply-patch+yaml" or "fieldManager" not in query:
                            return self._status(415, "server-side apply needs apply-patch+yaml and a field manager")
                        body = self._body()
                        kubernetes_validate.validate(body, o.SCHEMA_VERSION, strict=True)
                        # as the API server does: stringData is write-only, merged into data as base64
                        string = body.pop("stringData", {})
                        body["data"] = {**body.get("data", {}),
                                        **{k: base64.b64encode(v.encode()).decode() for k, v in string.items()}}
                        objs[key] = body
                    if key not in objs:
                        return self._status(404, "NotFound")
                    return self._send(200, objs[key])
                m = re.fullmatch(r"/apis/networking.k8s.io/v1/namespaces/([^/]+)/networkpolicies/([^/]+)", path)
                if m:
                    key = ("NetworkPolicy", m[1], m[2])
                    if self.command == "DELETE":
                        if objs.pop(key, None) is None:
                            return self._status(404, "NotFound")
                        return self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
                    if self.command == "PATCH":
                        if ctype != "application/apply-patch+yaml" or "fieldManager" not in query:
                            return self._status(415, f"server-side apply needs apply-patch+yaml and a field "
                                                     f"manager, got {ctype} {query}")
                        body = self._body()
                        kubernetes_validate.validate(body, o.SCHEMA_VERSION, strict=True)
                        if (body["metadata"]["namespace"], body["metadata"]["name"]) != (m[1], m[2]):
                            return self._status(400, "BadRequest: name/namespace differ from the URL")
                        objs[key] = body
                        return self._send(200, body)
                server.unknown.append(f"{self.command} {path}")
                return self._status(404, "NotFound")

            do_GET = do_PATCH = do_DELETE = do_POST = do_PUT = _route

        return Handler
