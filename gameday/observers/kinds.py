"""Source kinds: the names a profile gives its ways of observing, and how each becomes a source.

A profile says how each thing is read by naming a *kind* (DESIGN.md section 7)::

    entry_nodes:  [{name: gateway-a, http_json: {url: ...}}]           # role entry_node
    control_plane: {version: {prometheus: {url: ..., query: ...}}}     # role version
    alarms:       [{log: {path: proxy.log, node: proxy-a, regex: ...}}]  # role alarms
    state:        {replication: async, max_lag: 0.5, http: {write: ...}}  # role state

Each kind is a :class:`SourceKind`: the role it fills, a pydantic model of its fields (the
profile validates them, and every error names the field: ``alarms.0.log.regex: ...``), and
a builder that turns the validated fields into a source (:mod:`gameday.observers.sources`'
protocols). The built-in kinds are registered below; a conftest or a plugin adds its own
the same way, and a profile then names it, without touching gameday::

    from pydantic import BaseModel
    from gameday.observers.kinds import SOURCE_KINDS, SourceKind

    class K8gbStatus(BaseModel):
        url: str

    SOURCE_KINDS.add(SourceKind(role="version", name="k8gb", spec=K8gbStatus,
                                build=lambda spec, ctx: K8gbVersion(spec.url),
                                description="k8gb's Gslb status generation"))

``gameday restore`` re-reads the profile a fault was injected with only for its fault
commands: a kind it does not know there (a conftest's) is kept as written
(:attr:`SourceChoice.raw`), never an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator

from gameday.errors import ConfigError
from gameday.model.base import StrictModel
from gameday.model.tables import Table
from gameday.observers.sources import (
    AlarmSource,
    CommandAlarms,
    EntryNodeSource,
    HttpJsonNode,
    HttpJsonVersion,
    LogFileAlarms,
    MetricsVersion,
    PrometheusVersion,
    VersionSource,
)
from gameday.observers.sources.state import ID_PLACEHOLDER, READ_BACK_PATIENCE, HttpJsonState, StateSource
from gameday.runtime.userinput import shown
from gameday.verdicts.state import StatedReplication

Role = Literal["entry_node", "version", "alarms", "state"]
ROLES: dict[Role, str] = {
    "entry_node": "an entry node's route version and routable regions (regions[].entry_nodes[])",
    "version": "the control plane's route version (control_plane.version)",
    "alarms": "stale-snapshot alarms (alarms[])",
    "state": "the federation's write path and read-back (state)",
}
_PROTOCOL: dict[Role, type] = {"entry_node": EntryNodeSource, "version": VersionSource, "alarms": AlarmSource,
                               "state": StateSource}

LENIENT = "unknown source kinds kept"
"""Validation context key: an unknown kind is kept as written instead of refused (restore)."""


def http_url(v: str) -> str:
    """*v* if it is an http(s) URL with a host; ``ValueError`` saying what was expected."""
    try:
        url = httpx.URL(v)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"got {shown(v)}, expected an http:// or https:// URL ({exc})") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"got {shown(v)}, expected an http:// or https:// URL with a host")
    return v


HttpUrl = Annotated[str, AfterValidator(http_url)]
"""An http(s) URL with a host, kept as written (pydantic's own URL type would normalise it)."""

NonEmpty = Annotated[str, Field(min_length=1, max_length=4096)]


@dataclass(frozen=True)
class ServiceEntry:
    """How a client reaches the service (role ``state``): the name it resolves at the DNS
    server it asks, and the scheme, port and ``Host`` header of the address DNS answered."""

    dns_server: tuple[str, int]
    fqdn: str
    scheme: str
    port: int
    host: str


@dataclass(frozen=True)
class BuildContext:
    """What a builder may need beyond its fields."""

    base_dir: Path
    """The profile's directory: relative paths (log files) resolve here."""
    node: str | None = None
    """Role ``entry_node``: the node's name (``gateway-a``)."""
    region: str | None = None
    """Role ``entry_node``: the region the node belongs to."""
    service: ServiceEntry | None = None
    """Role ``state``: how a client reaches the service (writes go where its clients go)."""
    write_timeout: float = 1.0
    """Role ``state``: seconds a write may take; one not answered in time is indeterminate."""
    stated: StatedReplication | None = None
    """Role ``state``: the replication the profile states (the data-loss prediction's input);
    None: not stated."""
    read_patience: float = READ_BACK_PATIENCE
    """Role ``state``: seconds the read-back keeps trying ids it could not read."""


@dataclass(frozen=True, kw_only=True)
class SourceKind:
    """One way of observing one thing, as a profile names it."""

    role: Role
    name: str
    """The key a profile writes (``http_json``, ``prometheus``, ...)."""
    spec: type[BaseModel]
    """Its fields; validated with the profile (make it strict: :class:`StrictModel`)."""
    build: Callable[[Any, BuildContext], object]
    """``(validated spec, context) -> source`` implementing the role's protocol."""
    description: str

    @property
    def key(self) -> str:
        return f"{self.role}:{self.name}"

    def wrapper(self) -> type[BaseModel]:
        """A model of ``{name: spec}``: validating through it puts the kind's name in
        every error's field path."""
        return _wrapper(self.name, self.spec)


_WRAPPERS: dict[tuple[str, type[BaseModel]], type[BaseModel]] = {}


def _wrapper(name: str, spec: type[BaseModel]) -> type[BaseModel]:
    if (name, spec) not in _WRAPPERS:
        fields: dict[str, Any] = {name: (spec, ...)}
        _WRAPPERS[name, spec] = create_model(f"_{name}_choice", __config__=ConfigDict(extra="forbid"), **fields)
    return _WRAPPERS[name, spec]


@dataclass(frozen=True, eq=False)
class SourceChoice:
    """What a profile chose for one source: a kind and its validated fields (two are equal
    when they read the same: the same kind and fields, defaults filled in)."""

    kind: SourceKind | None
    """None only in a leniently read profile (``gameday restore``): a kind it does not know."""
    spec: BaseModel | None
    raw: Mapping[str, Any]
    """As written: ``{kind name: fields}``."""

    @property
    def name(self) -> str:
        return next(iter(self.raw))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SourceChoice) and self.kind == other.kind and self.dump() == other.dump()

    def __hash__(self) -> int:
        return hash(json.dumps(self.dump(), sort_keys=True, default=str))

    def build(self, ctx: BuildContext) -> Any:
        """The source, checked against its role's protocol.

        Raises:
            ConfigError: the kind is unknown here, or its builder returned something that is
                not the role's source (a plugin's bug, named).
        """
        if self.kind is None or self.spec is None:
            raise ConfigError(f"source kind {shown(self.name)} is not registered in this process "
                              f"(known: {', '.join(SOURCE_KINDS.names())})")
        source = self.kind.build(self.spec, ctx)
        protocol = _PROTOCOL[self.kind.role]
        if not isinstance(source, protocol):
            raise ConfigError(f"source kind {self.kind.name!r} ({self.kind.role}) built {type(source).__name__}, "
                              f"expected a {protocol.__name__}")
        return source

    def dump(self) -> dict[str, Any]:
        """As a profile writes it (a round trip through :func:`choose` gives it back)."""
        if self.spec is None:
            return dict(self.raw)
        return {self.name: self.spec.model_dump(mode="json")}


class SourceKindTable(Table[SourceKind]):
    """The source kinds a profile may name, by role and name."""

    def __init__(self) -> None:
        super().__init__("source kind")

    def add(self, kind: SourceKind, *, replace: bool = False) -> SourceKind:
        """Register *kind* (a conftest or plugin: at import or in ``pytest_configure``)."""
        if kind.role not in ROLES:
            raise ConfigError(f"source kind {kind.name!r}: role {kind.role!r} is not one of {sorted(ROLES)}")
        return self.register(kind.key, kind, replace=replace)

    def remove(self, role: Role, name: str) -> None:
        self.unregister(f"{role}:{name}")

    def of(self, role: Role) -> dict[str, SourceKind]:
        """Name -> kind, for one role."""
        return {k.name: k for k in self.values() if k.role == role}


SOURCE_KINDS = SourceKindTable()
"""The one table profiles are validated against; extend it with :meth:`SourceKindTable.add`."""


def choose(role: Role, data: Any, *, lenient: bool = False) -> SourceChoice:
    """Validate ``{kind: fields}`` for *role*.

    Raises:
        ValueError: not exactly one key, or a kind the table does not have (names the known ones).
        ValidationError: the kind's fields are invalid (paths start with the kind's name).
    """
    kinds = SOURCE_KINDS.of(role)
    known = ", ".join(kinds)
    if not isinstance(data, Mapping) or len(data) != 1:
        given = sorted(map(str, data)) if isinstance(data, Mapping) else shown(data)
        raise ValueError(f"got {given or 'none'}, expected exactly one of {known}")
    name = str(next(iter(data)))
    kind = kinds.get(name)
    if kind is None:
        if lenient:
            return SourceChoice(None, None, dict(data))
        raise ValueError(f"got {shown(name)}, expected exactly one of {known} (a source kind a conftest or plugin "
                         "adds is named the same way: gameday.observers.kinds.SOURCE_KINDS)")
    validated = kind.wrapper().model_validate(dict(data))
    return SourceChoice(kind, getattr(validated, name), dict(data))


# -- the built-in kinds ---------------------------------------------------------------------------
class HttpJsonNodeSpec(StrictModel):
    """An entry node's status as JSON over HTTP; dotted field paths, ``null``: not provided.

    The defaults are the profile format's documented names (docs/reference/profile.md),
    which it shares with the reference app: a federation built to the format writes only the
    URL. They are the profile's wire contract, not a reference-app detail the observer relies
    on: the reference app's own sources name every path (:mod:`gameday.observers.reference`).
    """

    url: HttpUrl
    """The node's status document (JSON)."""
    version: str | None = "version"
    """Path of the route version it routes by (an integer)."""
    routable: str | None = "routable_regions"
    """Path of the list of region names it routes to."""
    stale: str | None = "stale"
    """Path of its stale-snapshot flag (a boolean)."""


class HttpJsonVersionSpec(StrictModel):
    url: HttpUrl
    """The control plane's status document (JSON)."""
    field: str = "version"
    """Dotted path of the version; the default is the profile format's documented name (as
    for :class:`HttpJsonNodeSpec`)."""


class PrometheusSpec(StrictModel):
    url: HttpUrl
    """The Prometheus server (``/api/v1/query`` is added)."""
    query: NonEmpty
    """PromQL whose value is the version."""


class MetricsSpec(StrictModel):
    url: HttpUrl
    """A ``/metrics`` text endpoint."""
    metric: NonEmpty
    """The metric whose value is the version."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels the sample must carry (empty: any)."""


class _Matcher(StrictModel):
    node: str = Field(min_length=1, max_length=63)
    """The node whose alarms these are (a ``node`` named group in *regex* overrides it)."""
    regex: str | None = None
    """A line matching it raises the alarm."""
    clear_regex: str | None = None
    """A line matching it clears the alarm."""
    json_event_field: str | None = None
    """Or: JSON lines whose field (dotted path) is ``stale_snapshot`` / ``stale_snapshot_cleared``."""
    time_field: str | None = None
    """JSON lines: the field holding the line's CLOCK_MONOTONIC stamp, if they carry one."""
    detail_field: str | None = None
    """JSON lines: the field holding the alarm's detail, if they carry one."""

    @model_validator(mode="after")
    def _one_matcher(self) -> _Matcher:
        if (self.regex is None) == (self.json_event_field is None):
            raise ValueError("regex: give exactly one of regex or json_event_field")
        for name in ("regex", "clear_regex"):
            pattern = getattr(self, name)
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"{name}: got {shown(pattern)}, expected a regular expression ({exc})") from exc
        return self


class LogAlarmSpec(_Matcher):
    path: NonEmpty
    """The log file (relative: to the profile's directory)."""


class CommandAlarmSpec(_Matcher):
    argv: list[NonEmpty] = Field(min_length=1)
    """A command whose output lines are matched (e.g. ``journalctl -f -o cat -u proxy``)."""


def _url_path(v: str, *, with_id: bool) -> str:
    if not v.startswith("/") or any(c.isspace() for c in v) or "#" in v:
        raise ValueError(f"got {shown(v)}, expected a URL path starting with / (no spaces)")
    n = v.count(ID_PLACEHOLDER)
    if with_id and n != 1:
        raise ValueError(f"got {shown(v)}, expected a URL path with {ID_PLACEHOLDER} once (where the write's id "
                         "goes, e.g. /data/{id})")
    if not with_id and n:
        raise ValueError(f"got {shown(v)}, expected a URL path without {ID_PLACEHOLDER} (the ids go in the body)")
    return v


IdPath = Annotated[str, Field(max_length=1024), AfterValidator(lambda v: _url_path(v, with_id=True))]
"""A URL path with ``{id}`` once, where a write's id goes (``/data/{id}``)."""
PlainPath = Annotated[str, Field(max_length=1024), AfterValidator(lambda v: _url_path(v, with_id=False))]


class HttpWriteSpec(StrictModel):
    """How one write is sent: ``METHOD <scheme>://<address DNS answered>:<port><path>`` with the
    service's ``Host`` header and the body ``{"id": "<id>"}``; a 2xx answer acknowledges it.
    The defaults are the reference app's (``POST /data/{id}`` -> 201 ``{region, seq, ...}``)."""

    method: Literal["POST", "PUT"] = "POST"
    """The HTTP method of a write."""
    path: IdPath = "/data/{id}"
    """Where a write goes, ``{id}`` replaced by the write's id."""
    acked_by: NonEmpty | None = "region"
    """Dotted path, in the acknowledgement, of the region or node that acknowledged it; null: not said."""
    seq: NonEmpty | None = "seq"
    """Dotted path of the epoch or sequence the acknowledgement carries (a whole number); null: none."""


class HttpReadBackSpec(StrictModel):
    """How the writes are read back once the federation is steady again: exactly one of
    ``get`` (one GET per id: 200 stored, 404 not stored, anything else not read) and
    ``lookup`` (``POST {"ids": [...]}`` -> ``{"found": {id: seq}, "failed": [...]}``)."""

    get: IdPath | None = None
    """One ``GET`` per id at this path (``{id}`` replaced)."""
    lookup: PlainPath | None = None
    """Or one ``POST {"ids": [...]}`` at this path for many ids."""
    concurrency: int = Field(8, ge=1, le=64, strict=True)
    """``get``: requests at once."""

    @model_validator(mode="after")
    def _one_way(self) -> HttpReadBackSpec:
        if (self.get is None) == (self.lookup is None):
            raise ValueError("get: give exactly one of get (a path with {id}: GET per id, 200 stored, 404 not) "
                             "or lookup (a path: POST {\"ids\": [...]})")
        if self.lookup is not None and "concurrency" in self.model_fields_set:
            raise ValueError("concurrency: only with get (a lookup is one request per 2000 ids)")
        return self


class HttpStateSpec(StrictModel):
    """The write path and read-back over HTTP, through the service's DNS name as its clients
    reach it (the built-in ``http`` kind of role ``state``)."""

    write: HttpWriteSpec = Field(default_factory=HttpWriteSpec)
    """How one write is sent and what its acknowledgement says."""
    read_back: HttpReadBackSpec | None = None
    """None: ``GET`` each id at ``write.path`` (200 stored, 404 not stored)."""


def _state(spec: HttpStateSpec, ctx: BuildContext) -> HttpJsonState:
    if ctx.service is None:
        raise ConfigError("state kind http: the build context names no service (BuildContext.service): the "
                          "writes go where the service's clients go")
    s, rb = ctx.service, spec.read_back
    get_path = spec.write.path if rb is None else rb.get
    return HttpJsonState(dns_server=s.dns_server, fqdn=s.fqdn, port=s.port, scheme=s.scheme, host=s.host,
                         timeout=ctx.write_timeout, method=spec.write.method, write_path=spec.write.path,
                         acked_by=spec.write.acked_by, seq=spec.write.seq, get_path=get_path,
                         lookup_path=rb.lookup if rb is not None else None,
                         concurrency=rb.concurrency if rb is not None else 8, stated=ctx.stated,
                         read_patience=ctx.read_patience)


def _node(spec: HttpJsonNodeSpec, ctx: BuildContext) -> HttpJsonNode:
    return HttpJsonNode(name=ctx.node or "?", region=ctx.region or "?", url=spec.url, version=spec.version,
                        routable=spec.routable, stale=spec.stale)


def _log(m: LogAlarmSpec, ctx: BuildContext) -> LogFileAlarms:
    return LogFileAlarms(path=ctx.base_dir / m.path, node=m.node, regex=m.regex, clear_regex=m.clear_regex,
                         json_event_field=m.json_event_field, time_field=m.time_field, detail_field=m.detail_field)


def _command(c: CommandAlarmSpec, ctx: BuildContext) -> CommandAlarms:
    return CommandAlarms(argv=c.argv, node=c.node, regex=c.regex, clear_regex=c.clear_regex,
                         json_event_field=c.json_event_field, time_field=c.time_field, detail_field=c.detail_field)


BUILT_IN: tuple[SourceKind, ...] = (
    SourceKind(role="entry_node", name="http_json", spec=HttpJsonNodeSpec, build=_node,
               description="the node's status as JSON over HTTP (route version, routable regions, stale flag)"),
    SourceKind(role="version", name="http_json", spec=HttpJsonVersionSpec,
               build=lambda spec, ctx: HttpJsonVersion(url=spec.url, field=spec.field),
               description="a field of a JSON document over HTTP"),
    SourceKind(role="version", name="prometheus", spec=PrometheusSpec,
               build=lambda spec, ctx: PrometheusVersion(url=spec.url, query=spec.query),
               description="a PromQL query's value from a Prometheus server"),
    SourceKind(role="version", name="metrics", spec=MetricsSpec,
               build=lambda spec, ctx: MetricsVersion(url=spec.url, metric=spec.metric, labels=spec.labels),
               description="a metric of a /metrics text endpoint"),
    SourceKind(role="alarms", name="log", spec=LogAlarmSpec, build=_log,
               description="lines of a log file (relative paths: to the profile's directory)"),
    SourceKind(role="alarms", name="command", spec=CommandAlarmSpec, build=_command,
               description="lines a command prints (e.g. journalctl -f)"),
    SourceKind(role="state", name="http", spec=HttpStateSpec, build=_state,
               description="writes over HTTP through the service's DNS name, read back by GET per id or a lookup"),
)
for _kind in BUILT_IN:
    SOURCE_KINDS.add(_kind)


__all__ = [
    "BUILT_IN",
    "LENIENT",
    "ROLES",
    "SOURCE_KINDS",
    "BuildContext",
    "HttpUrl",
    "NonEmpty",
    "ServiceEntry",
    "SourceChoice",
    "SourceKind",
    "SourceKindTable",
    "StrictModel",
    "choose",
    "http_url",
]
