"""Run settings: every ``--gameday-*`` option, its ini twin and environment variable.

Precedence: command line, then ``[tool.pytest.ini_options]`` (or pytest.ini), then the
environment (``GAMEDAY_*``), then the default. Option defaults are ``None`` so that
"not set" is visible; :func:`resolve` fills in defaults and validates, raising
:class:`ConfigError` whose message names the option, the value and what is valid.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gameday.errors import ConfigError

TargetName = Literal["local", "kind", "kube"]
TARGETS: tuple[str, ...] = ("local", "kind", "kube")


@dataclass(frozen=True, kw_only=True)
class SLO:
    """Service-level objectives a drill is judged by."""

    switchover_limit: float = 180.0
    """Seconds from fault to every surviving entry node routing without the failed
    region. 180 s is article 000's bar: above it the sync chain is broken."""
    error_ratio: float = 0.01
    """Client error ratio allowed in a recovery window, and overload (503/429)
    responses allowed during a drill, as a fraction of requests."""
    utilisation_limit: float = 0.8
    """Highest utilisation (requests / declared capacity) a surviving region may reach."""
    recovery_window: float = 10.0
    """Seconds of the window client recovery is judged over (DESIGN.md §4)."""
    stop_error_ratio: float = 0.5
    """Stop condition: client error ratio above this ..."""
    stop_after: float = 5.0
    """... for this many seconds reverts the fault at once and aborts the drill."""


@dataclass(frozen=True, kw_only=True)
class LoadSettings:
    """How much load a drill runs under."""

    users: int | None = None
    """Simulated clients (default: the topology's ``load.users``)."""
    rate: float | None = None
    """Offered requests/s across all users (default: the topology's ``load.rate``)."""
    locustfile: Path | None = None
    """A user-supplied locustfile instead of the built-in one."""
    workers: int = 0
    """0: one locust process; N: a master with N worker processes."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything a gameday run was configured with."""

    target: str = "local"
    topology: Path | None = None
    seed: int = 0
    seed_was_given: bool = False
    rounds: int = 1
    reports: Path = Path("reports")
    allow_context: tuple[str, ...] = ()
    dry_run: bool = False
    run_destructive: bool = True
    slo: SLO = field(default_factory=SLO)
    load: LoadSettings = field(default_factory=LoadSettings)


@dataclass(frozen=True)
class OptionSpec:
    """One ``--gameday-<name>`` option."""

    name: str
    help: str
    kind: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    flag: bool = False

    @property
    def dest(self) -> str:
        return "gameday_" + self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "GAMEDAY_" + self.name.replace("-", "_").upper()


def _positive_int(v: str) -> int:
    i = int(v)
    if i < 1:
        raise ValueError("must be >= 1")
    return i


def _non_negative_int(v: str) -> int:
    i = int(v)
    if i < 0:
        raise ValueError("must be >= 0")
    return i


def _positive_float(v: str) -> float:
    f = float(v)
    if not f > 0:
        raise ValueError("must be > 0")
    return f


def _ratio(v: str) -> float:
    f = float(v)
    if not 0 <= f <= 1:
        raise ValueError("must be between 0 and 1")
    return f


def _bool(v: str) -> bool:
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("target", "where the federation runs: local (embedded, default), kind, kube", choices=TARGETS),
    OptionSpec("topology", "topology YAML (default: clusters/local.yaml)"),
    OptionSpec("seed", "seed for every random choice (region picks); printed in the header", _non_negative_int),
    OptionSpec("rounds", "repeat each drill N times with seeded random picks", _positive_int),
    OptionSpec("reports", "directory for run data, ledger and figures (default: reports)"),
    OptionSpec("users", "locust users (default: topology load.users)", _positive_int),
    OptionSpec("rate", "offered load in requests/s across all users (default: topology load.rate)",
               _positive_float),
    OptionSpec("locustfile", "your own locustfile instead of the built-in DNS-resolving user"),
    OptionSpec("load-workers", "locust worker processes (0: a single process)", _non_negative_int),
    OptionSpec("switchover-limit", "switchover SLO in seconds (default 180)", _positive_float),
    OptionSpec("error-ratio", "client error ratio SLO, 0..1 (default 0.01)", _ratio),
    OptionSpec("utilisation-limit", "max utilisation of a surviving region, 0..1 (default 0.8)", _ratio),
    OptionSpec("recovery-window", "client-recovery window in seconds (default 10)", _positive_float),
    OptionSpec("stop-error-ratio", "stop condition: abort when client errors exceed this ratio ... (0.5)",
               _ratio),
    OptionSpec("stop-after", "... for this many seconds (default 5)", _positive_float),
    OptionSpec("allow-context", "kube target: kubeconfig context glob allowed to be broken (repeatable, "
               "comma-separated in ini)"),
    OptionSpec("dry-run", "kube target: plan and print every API call, change nothing", flag=True),
)


def resolve(get: Callable[[OptionSpec], tuple[Any, str]]) -> Settings:
    """Build :class:`Settings` from raw option values.

    Args:
        get: returns ``(raw value or None, where it came from)`` for an option, already
            applying CLI > ini > env precedence.

    Raises:
        ConfigError: a value is invalid; the message names option, source and value.
    """
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        raw, source = get(opt)
        if raw is None or raw in ("", []):
            continue
        if opt.flag:
            try:
                values[opt.name] = raw if isinstance(raw, bool) else _bool(raw)
            except ValueError as exc:
                raise ConfigError(f"--gameday-{opt.name} ({source}): got {raw!r}, {exc}") from exc
            continue
        if opt.name == "allow-context":
            items = raw if isinstance(raw, list) else [raw]
            values[opt.name] = tuple(p.strip() for item in items for p in str(item).split(",") if p.strip())
            continue
        if opt.choices is not None and raw not in opt.choices:
            raise ConfigError(
                f"--gameday-{opt.name} ({source}): got {raw!r}, expected one of {', '.join(opt.choices)}",
                field=opt.name,
            )
        try:
            values[opt.name] = opt.kind(raw) if not isinstance(raw, bool) else raw
        except ValueError as exc:
            raise ConfigError(
                f"--gameday-{opt.name} ({source}): got {raw!r}, {exc if str(exc) else 'invalid'}",
                field=opt.name,
            ) from exc
    seed_given = "seed" in values
    seed = values.get("seed", random.SystemRandom().randrange(1, 2**31))
    defaults = SLO()
    slo = SLO(
        switchover_limit=values.get("switchover-limit", defaults.switchover_limit),
        error_ratio=values.get("error-ratio", defaults.error_ratio),
        utilisation_limit=values.get("utilisation-limit", defaults.utilisation_limit),
        recovery_window=values.get("recovery-window", defaults.recovery_window),
        stop_error_ratio=values.get("stop-error-ratio", defaults.stop_error_ratio),
        stop_after=values.get("stop-after", defaults.stop_after),
    )
    locustfile = Path(values["locustfile"]) if "locustfile" in values else None
    if locustfile is not None and not locustfile.is_file():
        raise ConfigError(f"--gameday-locustfile: {locustfile} does not exist", field="locustfile")
    topology = Path(values["topology"]) if "topology" in values else None
    if topology is not None and not topology.is_file():
        raise ConfigError(f"--gameday-topology: {topology} does not exist", field="topology")
    return Settings(
        target=values.get("target", "local"),
        topology=topology,
        seed=seed,
        seed_was_given=seed_given,
        rounds=values.get("rounds", 1),
        reports=Path(values.get("reports", "reports")),
        allow_context=values.get("allow-context", ()),
        dry_run=values.get("dry-run", False),
        slo=slo,
        load=LoadSettings(
            users=values.get("users"),
            rate=values.get("rate"),
            locustfile=locustfile,
            workers=values.get("load-workers", 0),
        ),
    )


def env_value(opt: OptionSpec) -> str | None:
    return os.environ.get(opt.env)
