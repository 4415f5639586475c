"""Every Kubernetes API call of the kube and kind targets, one ApiClient per cluster.

The thin executor under :class:`gameday.targets.k8s.kube.KubeTarget`: it turns the
:class:`~gameday.targets.k8s.plan.Op` values that :mod:`gameday.targets.k8s.plan`
plans into calls of the official client (``kubernetes``), and reads the little the
plans need (replica counts, node addresses, readiness, pod logs). It raises the
client's own errors (:data:`API_ERRORS`); the kube target translates them into
:mod:`gameday.errors` at its boundary. With :mod:`gameday.targets.k8s.kube` it is the only
module that imports ``kubernetes``.
"""

from __future__ import annotations

import base64
import http.client
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.stream import portforward

from gameday.errors import ConfigError, TargetError, TargetUnreachable
from gameday.model.topology import Topology
from gameday.targets.k8s import objects as o
from gameday.targets.k8s.plan import Op

FIELD_MANAGER = "gameday"
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
REQUEST_TIMEOUT = 15.0
"""Seconds one API call may take."""
WAIT_TIMEOUT = 300.0
"""Seconds a cluster's workloads, or one rollout, may take to become available."""
ClientFactory = Callable[[str], Any]
"""kubeconfig context -> ``kubernetes.client.ApiClient``."""

PROBE_TIMEOUT = 5.0
"""Seconds the session-start check waits for an API server's ``/version``: a reachable
server answers in milliseconds; 5 s tolerates a slow VPN without stalling a run for long."""

API_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError)

# kind -> (API class, method stem, namespaced)
_KINDS: dict[str, tuple[type[Any], str, bool]] = {
    "Namespace": (client.CoreV1Api, "namespace", False),
    "ConfigMap": (client.CoreV1Api, "namespaced_config_map", True),
    "Secret": (client.CoreV1Api, "namespaced_secret", True),
    "Service": (client.CoreV1Api, "namespaced_service", True),
    "Deployment": (client.AppsV1Api, "namespaced_deployment", True),
    "StatefulSet": (client.AppsV1Api, "namespaced_stateful_set", True),
    "PodDisruptionBudget": (client.PolicyV1Api, "namespaced_pod_disruption_budget", True),
    "NetworkPolicy": (client.NetworkingV1Api, "namespaced_network_policy", True),
}


def default_client_factory(context: str) -> Any:
    """An ``ApiClient`` for *context* of the default kubeconfig (``$KUBECONFIG`` or ~/.kube/config).

    Raises:
        TargetError: no kubeconfig, or it has no such context.
    """
    try:
        return config.new_client_from_config(context=context, persist_config=False)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError) as exc:
        why = " ".join(str(exc).split())[:300]
        raise TargetError(
            f"kubeconfig context {context!r}: {why} (check $KUBECONFIG and `kubectl config get-contexts`)"
        ) from exc


def probe_api_server(cluster: str, context: str, factory: ClientFactory = default_client_factory,
                     timeout: float = PROBE_TIMEOUT) -> None:
    """One ``GET /version`` on *context*'s API server, without retries.

    Raises:
        TargetError: the kubeconfig has no such context (from *factory*).
        TargetUnreachable: the server did not answer; one line naming the context, the
            server's address and the cause.
    """
    api = factory(context)
    try:
        host = str(getattr(getattr(api, "configuration", None), "host", "?"))
        try:
            client.VersionApi(api).get_code(_request_timeout=timeout, _preload_content=True)
        except API_ERRORS as exc:
            cause = _root_cause(exc)
            raise TargetUnreachable(
                f"kube context {context!r} (cluster {cluster!r}): its API server {host} is unreachable ({cause}); "
                "check the kubeconfig ($KUBECONFIG, `kubectl --context "
                f"{context} version`) and the network, or plan only with --gameday-dry-run"
            ) from exc
    finally:
        close = getattr(api, "close", None)
        if callable(close):
            close()


def _root_cause(exc: BaseException) -> str:
    """The innermost reason (``[Errno 111] Connection refused``), on one line."""
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    reason: BaseException = exc
    while True:
        inner = getattr(reason, "reason", None) or reason.__cause__ or reason.__context__
        if not isinstance(inner, BaseException) or inner is reason:
            break
        reason = inner
    text = str(reason).split(": ", 1)[-1] if isinstance(reason, urllib3.exceptions.HTTPError) else str(reason)
    return " ".join(text.split())[:200] or type(reason).__name__


class Clusters:
    """Lazily opened ApiClients for the clusters of one topology, and the calls made with them.

    Args:
        topology: the federation (for label selectors).
        contexts: cluster -> kubeconfig context (already allow-list checked by the caller).
        factory: context -> ApiClient.
    """

    def __init__(self, topology: Topology, contexts: Mapping[str, str], factory: ClientFactory) -> None:
        self.topology = topology
        self.contexts = dict(contexts)
        self._factory = factory
        self._clients: dict[str, Any] = {}
        self._admin_token: dict[str, str] = {}
        """Cluster -> the admin token (kept here only: never in a plan, a record or a message)."""

    def __repr__(self) -> str:
        return f"Clusters(contexts={self.contexts!r})"

    def set_admin_token(self, token: str) -> None:
        """The token this deploy writes into every cluster's admin Secret and signs admin calls with."""
        self._admin_token = dict.fromkeys(self.contexts, token)

    def admin_token(self, cluster: str) -> str:
        """The cluster's admin token: the one set by this deploy, else read from its Secret
        (``gameday restore``, a reused deployment).

        Raises:
            TargetError: no such Secret or key (the federation was not deployed by gameday).
        """
        if cluster not in self._admin_token:
            core = client.CoreV1Api(self.client(cluster))
            try:
                sec = core.read_namespaced_secret(o.ADMIN_SECRET, o.NAMESPACE, _request_timeout=REQUEST_TIMEOUT)
                raw = (sec.data or {})[o.ADMIN_TOKEN_KEY]
                self._admin_token[cluster] = base64.b64decode(raw).decode("utf-8").strip()
            except (ApiException, KeyError, ValueError) as exc:
                why = brief(exc) if isinstance(exc, ApiException) else f"no key {o.ADMIN_TOKEN_KEY!r}"
                raise TargetError(f"cluster {cluster!r}: cannot read the admin token from Secret "
                                  f"{o.NAMESPACE}/{o.ADMIN_SECRET} ({why}); admin calls need it") from None
        return self._admin_token[cluster]

    def access_review(self, cluster: str, attributes: Mapping[str, str | None]) -> tuple[bool, str]:
        """Whether this cluster's credentials may do what *attributes* say (``namespace``, ``verb``,
        ``group``, ``resource``, ``subresource``): one ``SelfSubjectAccessReview``
        (``authorization.k8s.io/v1``); ``(False, why)`` when the server says no or cannot answer."""
        attrs = client.V1ResourceAttributes(**attributes)
        review = client.V1SelfSubjectAccessReview(
            api_version="authorization.k8s.io/v1", kind="SelfSubjectAccessReview",
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs))
        try:
            answer = client.AuthorizationV1Api(self.client(cluster)).create_self_subject_access_review(
                review, _request_timeout=REQUEST_TIMEOUT)
        except API_ERRORS as exc:
            return False, f"the access review failed: {brief(exc)}"
        status = answer.status
        if status is not None and status.allowed:
            return True, ""
        return False, (status.reason or "") if status is not None else "no answer"

    def read_replicas(self, cluster: str, kind: str, name: str, namespace: str = o.NAMESPACE) -> int:
        """``spec.replicas`` of a Deployment or StatefulSet, through its scale subresource."""
        api = client.AppsV1Api(self.client(cluster))
        deployment = kind == "Deployment"
        read = api.read_namespaced_deployment_scale if deployment else api.read_namespaced_stateful_set_scale
        scale = read(name, namespace, _request_timeout=REQUEST_TIMEOUT)
        return int(scale.spec.replicas or 0) if scale.spec else 0

    def read_service_selector(self, cluster: str, namespace: str, name: str) -> dict[str, str]:
        """``spec.selector`` of a Service (empty: it has none)."""
        svc = client.CoreV1Api(self.client(cluster)).read_namespaced_service(
            name, namespace, _request_timeout=REQUEST_TIMEOUT)
        return dict((svc.spec.selector if svc.spec else None) or {})

    def entry_pods(self, region: str) -> list[Any]:
        """The region's gateway and proxy pods."""
        core = client.CoreV1Api(self.client(region))
        selector = f"{o.LABEL_COMPONENT} in (gateway,proxy)"
        return list(
            core.list_namespaced_pod(
                o.NAMESPACE, label_selector=selector, _request_timeout=REQUEST_TIMEOUT
            ).items
        )

    def pod_log(self, region: str, pod: str, *, since_seconds: int | None) -> str:
        """The pod's log with RFC 3339 timestamps, the last *since_seconds* only if given."""
        core = client.CoreV1Api(self.client(region))
        return str(
            core.read_namespaced_pod_log(
                pod,
                o.NAMESPACE,
                timestamps=True,
                since_seconds=since_seconds,
                _request_timeout=REQUEST_TIMEOUT,
            )
        )

    def client(self, cluster: str) -> Any:
        """The cluster's ApiClient, opened on first use."""
        if cluster not in self._clients:
            self._clients[cluster] = self._factory(self.contexts[cluster])
        return self._clients[cluster]

    def execute(self, op: Op) -> None:
        """Make *op*'s API call(s). Raises the client's errors (see :data:`API_ERRORS`)."""
        if op.verb == "connect":
            self.client(op.cluster)
        elif op.verb == "apply":
            self._apply(op)
        elif op.verb == "scale":
            api = client.AppsV1Api(self.client(op.cluster))
            patch = (
                api.patch_namespaced_deployment_scale
                if op.kind == "Deployment"
                else api.patch_namespaced_stateful_set_scale
            )
            patch(
                op.name,
                str(op.namespace),
                {"spec": {"replicas": op.replicas}},
                _content_type=MERGE_PATCH,
                _request_timeout=REQUEST_TIMEOUT,
            )
        elif op.verb == "delete":
            self._delete(op)
        elif op.verb == "wait":
            self._wait_available(op.cluster, WAIT_TIMEOUT)
        elif op.verb == "patch":
            api, stem, namespaced = self._api(op)
            args = (op.name, op.namespace) if namespaced else (op.name,)
            getattr(api, f"patch_{stem}")(
                *args, dict(op.body or {}), _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT
            )
        elif op.verb == "rollout":
            self._wait_rollout(op.cluster, op.name, WAIT_TIMEOUT)
        elif op.verb == "admin":
            assert op.port is not None
            assert op.path is not None
            assert op.selector is not None
            self.pod_admin(op.cluster, op.selector, op.port, op.path, body=dict(op.body or {}))
        else:
            raise ConfigError(f"kube target: unknown operation verb {op.verb!r}")

    def _api(self, op: Op) -> tuple[Any, str, bool]:
        try:
            api_cls, stem, namespaced = _KINDS[op.kind]
        except KeyError:
            raise ConfigError(f"kube target: no API mapping for kind {op.kind!r}") from None
        return api_cls(self.client(op.cluster)), stem, namespaced

    def _apply(self, op: Op) -> None:
        api, stem, namespaced = self._api(op)
        args = (op.name, op.namespace) if namespaced else (op.name,)
        body = dict(op.body or {})
        if op.kind == "Secret" and op.name == o.ADMIN_SECRET:
            # the token joins the object here, at the last moment, and nowhere else
            body["stringData"] = {o.ADMIN_TOKEN_KEY: self.admin_token(op.cluster)}
        getattr(api, f"patch_{stem}")(
            *args,
            body,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type=APPLY_PATCH,
            _request_timeout=REQUEST_TIMEOUT,
        )

    def _delete(self, op: Op) -> None:
        api, stem, namespaced = self._api(op)
        args = (op.name, op.namespace) if namespaced else (op.name,)
        if op.kind == "Namespace":
            try:
                ns = api.read_namespace(op.name, _request_timeout=REQUEST_TIMEOUT)
            except ApiException as exc:
                if exc.status == 404:
                    return
                raise
            owner = (ns.metadata.labels or {}).get(o.LABEL_MANAGED_BY)
            if owner != o.MANAGED_BY:
                raise TargetError(
                    f"refusing to delete namespace {op.name!r} in context "
                    f"{self.contexts[op.cluster]!r}: it is not labelled "
                    f"{o.LABEL_MANAGED_BY}={o.MANAGED_BY} (gameday did not create it)"
                )
        try:
            getattr(api, f"delete_{stem}")(*args, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:  # already gone: the revert is idempotent
                raise

    def not_ready(self, cluster: str) -> list[str]:
        apps = client.AppsV1Api(self.client(cluster))
        out: list[str] = []
        try:
            for d in apps.list_namespaced_deployment(o.NAMESPACE, _request_timeout=REQUEST_TIMEOUT).items:
                want, have = d.spec.replicas or 0, (d.status.available_replicas or 0) if d.status else 0
                if have < want:
                    out.append(f"Deployment {_name(d)} {have}/{want} available")
            for s in apps.list_namespaced_stateful_set(o.NAMESPACE, _request_timeout=REQUEST_TIMEOUT).items:
                want, have = s.spec.replicas or 0, (s.status.ready_replicas or 0) if s.status else 0
                if have < want:
                    out.append(f"StatefulSet {_name(s)} {have}/{want} ready")
        except API_ERRORS as exc:
            raise TargetError(
                f"listing workloads in context {self.contexts[cluster]!r}: {brief(exc)}"
            ) from exc
        return out

    def _wait_available(self, cluster: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            missing = self.not_ready(cluster)
            if not missing:
                return
            if time.monotonic() > deadline:
                raise TargetError(
                    f"cluster {cluster!r} (context {self.contexts[cluster]!r}) not available after "
                    f"{timeout} s: {'; '.join(missing)}; the next clusters were not touched (R12)"
                )
            time.sleep(2.0)

    def _wait_rollout(self, cluster: str, name: str, timeout: float) -> None:
        """Like ``kubectl rollout status``: observed the new generation, every replica updated
        and available, no old replica left."""
        apps = client.AppsV1Api(self.client(cluster))
        deadline = time.monotonic() + timeout
        seen = "no status yet"
        while time.monotonic() < deadline:
            d = apps.read_namespaced_deployment(name, o.NAMESPACE, _request_timeout=REQUEST_TIMEOUT)
            st, want = d.status, (d.spec.replicas if d.spec else None) or 0
            if st is not None and d.metadata is not None:
                done = (
                    (st.observed_generation or 0) >= (d.metadata.generation or 0)
                    and (st.updated_replicas or 0) == want
                    and (st.available_replicas or 0) == want
                    and (st.replicas or 0) == want
                )
                if done:
                    return
                seen = (
                    f"updated {st.updated_replicas or 0}/{want}, available {st.available_replicas or 0}, "
                    f"total {st.replicas or 0}"
                )
            time.sleep(1.0)
        raise TargetError(
            f"rollout of Deployment {name} in cluster {cluster!r} not complete after {timeout} s ({seen})"
        )

    def pod_proxy(
        self, cluster: str, selector: str, port: int, method: str, path: str, *, body: dict[str, Any] | None
    ) -> list[dict[str, Any]]:
        """Call *path* on *port* of every running pod matching the label *selector*, through
        the API server's pod proxy; their JSON answers. Raises TargetError when none runs."""
        api_client = self.client(cluster)
        core = client.CoreV1Api(api_client)
        sel = selector
        pods = [
            p
            for p in core.list_namespaced_pod(
                o.NAMESPACE, label_selector=sel, _request_timeout=REQUEST_TIMEOUT
            ).items
            if p.status and p.status.phase == "Running"
        ]
        if not pods:
            raise TargetError(
                f"no running pod matching {selector!r} in cluster {cluster!r} to {method} {path}"
            )
        answers = []
        for p in pods:
            params = api_client.param_serialize(
                method=method,
                resource_path=f"/api/v1/namespaces/{{namespace}}/pods/{{name}}/proxy{path}",
                path_params={"namespace": o.NAMESPACE, "name": f"{_name(p)}:{port}"},
                header_params={"Content-Type": "application/json", "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
            )
            resp = api_client.call_api(*params, _request_timeout=REQUEST_TIMEOUT)
            data = resp.read()
            if resp.status >= 400:
                raise TargetError(
                    f"{method} {path} on pod {_name(p)} ({cluster}) answered {resp.status}: {data[:200]!r}"
                )
            answers.append(json.loads(data or b"{}"))
        return answers

    def pod_admin(self, cluster: str, selector: str, port: int, path: str, *,
                  body: dict[str, Any]) -> list[dict[str, Any]]:
        """``POST`` *body* to *path* on *port* of every running pod matching *selector*, signed
        with the admin token, through a port-forward of each pod (the API server's pod proxy
        cannot carry it: the API server consumes the ``Authorization`` header). Each
        forward is closed before the next. Their JSON answers.

        Raises:
            TargetError: no pod runs, or one answered >= 400 (its status and body; never the token).
        """
        core = client.CoreV1Api(self.client(cluster))
        pods = [p for p in core.list_namespaced_pod(o.NAMESPACE, label_selector=selector,
                                                    _request_timeout=REQUEST_TIMEOUT).items
                if p.status and p.status.phase == "Running"]
        if not pods:
            raise TargetError(f"no running pod matching {selector!r} in cluster {cluster!r} to POST {path}")
        token = self.admin_token(cluster)
        answers = []
        for p in pods:
            pf = portforward(core.connect_get_namespaced_pod_portforward, _name(p), o.NAMESPACE, ports=str(port))
            try:
                status, data = http_request(pf.socket(port), "POST", path, body, token=token,
                                            timeout=REQUEST_TIMEOUT)
            finally:
                pf.close()
            if status >= 400:
                raise TargetError(f"POST {path} on pod {_name(p)} ({cluster}) answered {status}: {data[:200]!r}")
            answers.append(json.loads(data or b"{}"))
        return answers

    def node_address(self, cluster: str) -> str:
        core = client.CoreV1Api(self.client(cluster))
        try:
            nodes = core.list_node(_request_timeout=REQUEST_TIMEOUT).items
        except API_ERRORS as exc:
            raise TargetError(f"listing nodes in context {self.contexts[cluster]!r}: {brief(exc)}") from exc
        return pick_node_address(cluster, [_node_facts(n) for n in nodes])


class _OnSocket(http.client.HTTPConnection):
    """An HTTP/1.1 connection over a socket that is already open (a port-forward's)."""

    def __init__(self, sock: Any, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.sock = sock

    def connect(self) -> None:  # the socket is connected already
        return


def http_request(sock: Any, method: str, path: str, body: dict[str, Any] | None, *, token: str | None,
                 timeout: float) -> tuple[int, bytes]:
    """One HTTP request on the connected *sock*, ``Authorization: Bearer`` *token* if given;
    ``(status, body)``. The socket is closed after the answer (one request per forward)."""
    conn = _OnSocket(sock, timeout)
    headers = {"Content-Type": "application/json", "Accept": "application/json", "Connection": "close"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        sock.settimeout(timeout)
        conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _node_facts(node: Any) -> dict[str, Any]:
    labels = node.metadata.labels or {}
    conditions = {c.type: c.status for c in (node.status.conditions or [])} if node.status else {}
    return {
        "name": node.metadata.name,
        "control_plane": "node-role.kubernetes.io/control-plane" in labels,
        "ready": conditions.get("Ready") == "True",
        "internal_ip": next(
            (
                a.address
                for a in (node.status.addresses or [])
                if a.type == "InternalIP" and ":" not in a.address
            ),
            None,
        )
        if node.status
        else None,
    }


def pick_node_address(cluster: str, nodes: list[dict[str, Any]]) -> str:
    """The IPv4 InternalIP of the first Ready worker (a control-plane node if there is no worker).

    Raises:
        TargetError: no Ready node with an IPv4 InternalIP.
    """
    ranked = sorted(
        (n for n in nodes if n["ready"] and n["internal_ip"]), key=lambda n: (n["control_plane"], n["name"])
    )
    if not ranked:
        raise TargetError(
            f"cluster {cluster!r}: no Ready node with an IPv4 InternalIP "
            f"(nodes: {[n['name'] for n in nodes]}); NodePorts need one"
        )
    return str(ranked[0]["internal_ip"])


def _name(obj: Any) -> str:
    return str(obj.metadata.name) if obj.metadata is not None else "?"


def brief(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}: {str(exc.body)[:300]}"
    return str(exc)[:300]
