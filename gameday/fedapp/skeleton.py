"""The HTTP skeleton every federation component serves: one set of own endpoints, one way.

Every component (app instance, gateway, local proxy, region agent, control plane, GSLB)
subclasses :class:`HttpComponent` and supplies only what is its own:

``GET /livez``
    ``{"live": true}`` (200) for every component: liveness says "restart me" and nothing
    else (R11). :meth:`HttpComponent.live` may say otherwise (the app's ``livez`` fault),
    then ``{"live": false}`` (500).
``GET /readyz``
    503 ``{"ready": false, "reason": "fault"}`` while the component's :class:`ReadyzFault`
    fails; 503 ``{"ready": false, "reason": R}`` while :meth:`HttpComponent.unready_reason`
    gives a reason R (e.g. ``starting``); else 200 ``{"ready": true, ...}`` with
    :meth:`HttpComponent.ready_detail`.
``GET /status``, ``GET /metrics``
    :meth:`HttpComponent.status` as JSON, :meth:`HttpComponent.metrics` as Prometheus text.
``POST /admin/fault``
    A JSON object: the readiness hooks of :class:`ReadyzFault` and the component's own keys
    (:meth:`HttpComponent.apply_fault`). A malformed body or a bad value is 400 with the
    reason, and then *nothing* is applied (the readiness part is staged, the component
    validates before it changes anything). The answer is :meth:`HttpComponent.fault_state`.
``/admin/<anything else>``
    :meth:`HttpComponent.admin_routes` (e.g. the agent's ``/admin/slow``), else 404: an
    admin path is never routed on as data (the gateway forwards every other path).

plus :meth:`HttpComponent.public_routes` (the data paths: ``/work``, ``/call/...``, the
gateway's catch-all, ``/snapshot``), added after the skeleton's own.

Where admin is served
---------------------
Every admin path, however spelled (:func:`~gameday.fedapp.common.is_admin_path`), needs the
run's bearer token (:func:`~gameday.fedapp.common.admin_guard`). By default it shares the
public port. With an admin address, the component's entry in the spec's ``admin`` (the
local target plans one for each component on its own loopback address) or else
:data:`ADMIN_LISTEN_ENV` set to ``host:port`` (the Kubernetes pods), the admin paths are served *only* there (bound to
exactly that address, never widened by ``GAMEDAY_BIND_HOST``), still token-guarded; the
public port answers them 404 and logs ``admin_refused`` with the reason.
On Kubernetes the admin address is ``127.0.0.1`` inside the pod, which only a port-forward
(through the kubelet) reaches.
"""

from __future__ import annotations

import copy
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from gameday.fedapp.common import (
    ADMIN_TOKEN_ENV,
    AdminTokenUnreadable,
    Json,
    JsonLog,
    ReadyzFault,
    admin_guard,
    admin_token_from_env,
    bind_host,
    is_admin_path,
    json_response,
    read_json,
)
from gameday.fedapp.spec import Endpoint
from gameday.fedapp.wire import FAULT_PATH

ADMIN_LISTEN_ENV = "GAMEDAY_ADMIN_LISTEN"
"""``host:port`` of the component's own admin listener; unset or empty: admin shares the
public port."""

READYZ_KEYS = frozenset({"readyz", "seconds", "period", "down"})
"""The keys of an admin fault body that belong to :class:`ReadyzFault`."""

RouteHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    """One extra route a component adds: *method* (``*`` for any), *path*, *handler*."""

    method: str
    path: str
    handler: RouteHandler


class HttpComponent(ABC):
    """The skeleton a component subclasses (see the module docstring for the endpoints).

    A subclass sets :attr:`log` and :attr:`ready_fault` and implements :meth:`status` and
    :meth:`metrics`; the other hooks have defaults.
    """

    log: JsonLog
    ready_fault: ReadyzFault
    fault_event = "fault"
    """The log event of an applied ``POST /admin/fault`` (its fields are the body)."""

    # -- what a component supplies -----------------------------------------------------------
    @abstractmethod
    def status(self) -> Json:
        """The ``/status`` JSON."""

    @abstractmethod
    def metrics(self) -> str:
        """The ``/metrics`` Prometheus text."""

    def live(self) -> bool:
        """False makes ``/livez`` answer 500 (a fault hook; nothing else fails liveness)."""
        return True

    def unready_reason(self) -> str | None:
        """Why the component is not ready apart from its readiness fault, or None."""
        return None

    def ready_detail(self) -> Json:
        """Extra fields of a ready answer."""
        return {}

    def apply_fault(self, body: Json) -> None:
        """Apply the component's own keys of an admin fault *body*.

        Validate every key first and raise ``ValueError`` (the 400's reason) before changing
        anything: the readiness part is applied only after this returns. By default a
        component has no keys of its own (the agent).
        """
        del body

    def fault_state(self) -> Json:
        """The answer to ``POST /admin/fault``: the fault hooks' state after the call."""
        return {"readyz": self.ready_fault.describe()}

    def admin_routes(self) -> Sequence[Route]:
        """Further admin routes (paths under ``/admin/``), token-guarded like the fault hook."""
        return ()

    def public_routes(self) -> Sequence[Route]:
        """The component's data paths, after the skeleton's own (a catch-all comes last)."""
        return ()

    # -- the skeleton's handlers ---------------------------------------------------------------
    async def _livez(self, _: web.Request) -> web.Response:
        return json_response({"live": True}) if self.live() else json_response({"live": False}, status=500)

    async def _readyz(self, _: web.Request) -> web.Response:
        if self.ready_fault.failing():
            return json_response({"ready": False, "reason": "fault"}, status=503)
        reason = self.unready_reason()
        if reason is not None:
            return json_response({"ready": False, "reason": reason}, status=503)
        return json_response({"ready": True, **self.ready_detail()})

    async def _status(self, _: web.Request) -> web.Response:
        return json_response(self.status())

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=self.metrics(), content_type="text/plain")

    async def _fault(self, request: web.Request) -> web.Response:
        body = await read_json(request)
        staged = copy.copy(self.ready_fault)
        try:
            staged.configure(body)
            self.apply_fault(body)
        except ValueError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from exc
        vars(self.ready_fault).update(vars(staged))
        self.log(self.fault_event, **body)
        return json_response(self.fault_state())

    @staticmethod
    async def _no_admin(request: web.Request) -> web.Response:
        return json_response({"error": f"no admin endpoint {request.method} {request.path}"}, status=404)

    # -- assembling the applications -------------------------------------------------------------
    def _add_admin(self, app: web.Application) -> None:
        app.router.add_post(FAULT_PATH, self._fault)
        for r in self.admin_routes():
            app.router.add_route(r.method, r.path, r.handler)
        app.router.add_route("*", "/admin/{tail:.*}", self._no_admin)

    def web_apps(self, *, separate_admin: bool) -> tuple[web.Application, web.Application | None]:
        """The public application and, with *separate_admin*, the admin one (else None: the
        admin routes are on the public one)."""
        public = web.Application()
        for path, handler in (("/livez", self._livez), ("/readyz", self._readyz),
                              ("/status", self._status), ("/metrics", self._metrics)):
            public.router.add_get(path, handler)
        admin: web.Application | None = None
        if separate_admin:
            admin = web.Application()
            self._add_admin(admin)
        else:
            self._add_admin(public)
        for r in self.public_routes():
            public.router.add_route(r.method, r.path, r.handler)
        return public, admin


def admin_listen_from_env(environ: Mapping[str, str] = os.environ) -> tuple[str, int] | None:
    """The ``(host, port)`` of ``$GAMEDAY_ADMIN_LISTEN``, or None when unset or empty.

    Raises:
        ValueError: the value is not ``host:port`` with a port in 1..65535 (the message
            names the variable and the value).
    """
    raw = environ.get(ADMIN_LISTEN_ENV, "").strip()
    if not raw:
        return None
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{ADMIN_LISTEN_ENV}: got {raw!r}, expected host:port with a port in 1..65535")
    return host.strip("[]"), int(port)


def admin_elsewhere(log: JsonLog) -> Middleware:
    """The public port's middleware when admin has its own listener: every admin path is
    answered 404 and logged ``admin_refused`` (method, path, peer, reason)."""

    @web.middleware
    async def refuse(request: web.Request, handler: Handler) -> web.StreamResponse:
        if is_admin_path(request.path):
            reason = "admin is not served on the public port"
            log("admin_refused", method=request.method, path=request.path, peer=request.remote, reason=reason)
            return json_response({"error": f"no admin endpoint {request.method} {request.path}: {reason}"},
                                 status=404)
        return await handler(request)

    return refuse


@dataclass
class Servers:
    """The running listeners of one component; :meth:`cleanup` closes them all."""

    runners: list[web.AppRunner]

    async def cleanup(self) -> None:
        for runner in self.runners:
            await runner.cleanup()


async def _serve(app: web.Application, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True, backlog=1024)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


async def start_http(component: HttpComponent, host: str, port: int, log: JsonLog,
                     admin: Endpoint | None = None) -> Servers:
    """Serve *component* on host:port (:func:`bind_host` applies; SO_REUSEADDR so a restarted
    component gets its port back), and its admin paths on *admin* (the component's entry in
    :attr:`FederationSpec.admin`) when given, else on ``$GAMEDAY_ADMIN_LISTEN`` when set,
    else on the same port; every admin path behind :func:`admin_guard` with the token
    :func:`admin_token_from_env` reads. The admin listener starts first, so a component whose
    public port answers already has its admin port open.

    Raises:
        SystemExit: ``$GAMEDAY_ADMIN_TOKEN_FILE`` names a file that cannot be used (logged
            first as ``admin_token_unreadable``), or ``$GAMEDAY_ADMIN_LISTEN`` is malformed
            (logged as ``admin_listen_invalid``).
    """
    try:
        token = admin_token_from_env()
    except AdminTokenUnreadable as exc:
        log("admin_token_unreadable", error=str(exc))
        raise SystemExit(f"{ADMIN_TOKEN_ENV}: {exc}") from exc
    admin_at = (admin.host, admin.port) if admin is not None else None
    if admin_at is None:
        try:
            admin_at = admin_listen_from_env()
        except ValueError as exc:
            log("admin_listen_invalid", error=str(exc))
            raise SystemExit(str(exc)) from exc
    if token is None:
        log("admin_disabled", reason=f"{ADMIN_TOKEN_ENV} is not set: every admin call is refused")
    public, admin_app = component.web_apps(separate_admin=admin_at is not None)
    runners: list[web.AppRunner] = []
    if admin_app is not None and admin_at is not None:
        admin_app.middlewares.insert(0, admin_guard(token, log))
        public.middlewares.insert(0, admin_elsewhere(log))
        runners.append(await _serve(admin_app, *admin_at))
        log("admin_listening", admin=f"{admin_at[0]}:{admin_at[1]}")
    else:
        public.middlewares.insert(0, admin_guard(token, log))
    try:
        runners.append(await _serve(public, bind_host(host), port))
    except BaseException:
        await Servers(runners).cleanup()
        raise
    return Servers(runners)
