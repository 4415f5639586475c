"""Run settings: every ``--gameday-*`` option, its ini twin and environment variable.

Precedence: command line, then ``[tool.pytest.ini_options]`` (or pytest.ini), then the
environment (``GAMEDAY_*``), then the default. Option defaults are ``None`` so that
"not set" is visible; :func:`resolve` fills in defaults and validates, raising
:class:`ConfigError` whose message names the option, the value and what is valid.

Every option has one validator (:data:`OPTIONS`), whatever the source: numbers are
finite and within a stated range, an empty value is an error (not "the default"), paths
are checked for what they must be. The ``gameday`` CLI uses the same validators through
:func:`cli_type`, so ``gameday drill --rounds 0`` and ``--gameday-rounds=0`` agree.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gameday.errors import ConfigError
from gameday.runtime.userinput import shown

TARGET_HELP = ("a target plugged in with the pytest_gameday_target_names and pytest_gameday_make_target "
               "hooks (gameday.plugin.hooks)")


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
    prediction_slack: float = 0.3
    """Seconds a figure may lie outside its predicted window, beyond its resolution, and still
    pass its vs-prediction verdict (:mod:`gameday.verdicts.predict`). 0.3 s: above the largest
    measured-minus-predicted of 12 headline drills on the reference federation on a shared
    2-core machine (docs/explanation/predictions.md, "The slack")."""


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
    expect_workers: int = 0
    """Workers on other machines (``python -m gameday.load.worker``) the master waits for."""
    master_bind: tuple[str, int] = ("0.0.0.0", 5557)
    """Where the master listens for them (host, port)."""
    workers_wait: float = 120.0
    """Seconds to wait for them to connect before the drill is refused."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything a gameday run was configured with."""

    target: str = "local"
    topology: Path | None = None
    profile: Path | None = None
    """The federation profile the ``external`` target drills (required by it, unused by the others)."""
    seed: int = 0
    seed_was_given: bool = False
    rounds: int = 1
    round_jitter: float = 0.0
    """Seconds: before the first fault of every drill (every round, the first too), wait a time drawn
    uniformly from 0..round_jitter by a generator seeded with the run's seed, the test and the round
    (:attr:`gameday.drill.Drill.jitter`): rounds run back to back at a steady pace would otherwise
    inject at the same phase of every periodic process of the federation (a health checker's rounds,
    a sync loop), and so measure one phase again and again instead of a random one. With at least
    the longest period, each round's phase is independent of the others'. 0 (default): no wait."""
    cadence_patience: float = 10.0
    """Seconds: the longest stated ``reconcile_interval`` whose slow full pass the R3 check waits for
    (the federation's own pass, observed at its cadence). A longer interval's pass is forced on demand
    (:class:`gameday.interfaces.Reconcilable`), and the check says so in its output and JUnit
    properties. Default 10: a per-commit run does not wait out the default 5 minutes; a nightly run
    gives the interval + a few seconds (``--gameday-cadence-patience=310``)."""
    reports: Path = Path("reports")
    allow_context: tuple[str, ...] = ()
    dry_run: bool = False
    keep_clusters: bool = False
    """kind: leave the clusters (and the federation in them) after the run, also those it created."""
    accept_observed_ttl: bool = False
    """External target: drill although the DNS server's TTL contradicts the profile's
    ``timing.dns_ttl`` (judging with the observed one); by default that drill is refused."""
    fail_on_regression: bool = False
    """Fail the run on a switchover regression against reports/history.jsonl (else only flag it)."""
    ignore_ledger_problems: bool = False
    """Drill although the fault ledger is unreadable or holds entries this run cannot revert
    (said on the console either way). Off: a fault a killed run left may still be in effect,
    and a drill on top of it would measure both."""
    run_destructive: bool = True
    drill_lock_timeout: float = 900.0
    """Seconds a drill on a shared federation waits for another process's drill to finish
    (:mod:`gameday.runtime.drill_lock`) before it fails, nothing injected. 15 min: a drill on kind or
    staging takes minutes, so a few others' can finish; one held longer is stuck."""
    local_drill_slots: int | None = None
    """How many drills on targets that run on this machine (``local``) may be in their fault
    block at once, across every process of this user (:mod:`gameday.runtime.drill_slots`).
    None: one per CPU (parallel drills beyond that starved each other's federations on a
    2-core machine); 0: no limit."""
    slo: SLO = field(default_factory=SLO)
    load: LoadSettings = field(default_factory=LoadSettings)


# -- validators: one per kind of value, shared by resolve() and the gameday CLI -------------------
class _Validator(Protocol):
    @property
    def expected(self) -> str:
        """What a valid value looks like, for messages: ``an integer >= 1 and <= 1000``."""

    def __call__(self, raw: str) -> Any:
        """The parsed value; ``ValueError`` (its message saying what is wrong) if invalid."""


def _g(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class Number:
    """An integer, or a finite float, within bounds (NaN and infinity are never valid)."""

    integer: bool
    lo: float
    hi: float
    lo_open: bool = False
    """True: ``lo < value``; False: ``lo <= value``."""
    hi_text: str | None = None
    """How *hi* reads in messages, when its digits would not (``2**63 - 1``)."""

    @property
    def expected(self) -> str:
        what = "an integer" if self.integer else "a finite number"
        return f"{what} {'>' if self.lo_open else '>='} {_g(self.lo)} and <= {self.hi_text or _g(self.hi)}"

    def __call__(self, raw: str) -> int | float:
        text = str(raw).strip()
        value: int | float
        try:
            value = int(text) if self.integer else float(text)
        except ValueError:
            raise ValueError(f"expected {self.expected}") from None
        if not math.isfinite(value) or value < self.lo or (self.lo_open and value == self.lo) or value > self.hi:
            raise ValueError(f"expected {self.expected}")
        return value


@dataclass(frozen=True)
class Choice:
    choices: tuple[str, ...]

    @property
    def expected(self) -> str:
        return "one of " + ", ".join(self.choices)

    def __call__(self, raw: str) -> str:
        if raw not in self.choices:
            raise ValueError(f"expected {self.expected}")
        return raw


@dataclass(frozen=True)
class TargetName:
    """The form of a target name; whether a target of that name exists is checked by
    :func:`resolve` against the names the registry and the hooks answer."""

    expected: str = "a target name (letters, digits, '_', '-', '.')"

    def __call__(self, raw: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", raw):
            raise ValueError(f"expected {self.expected}")
        return raw


@dataclass(frozen=True)
class Flag:
    expected: str = "true or false (1/0, yes/no, on/off)"

    def __call__(self, raw: str) -> bool:
        s = str(raw).strip().lower()
        if s in ("1", "true", "yes", "on"):
            return True
        if s in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected {self.expected}")


@dataclass(frozen=True)
class ExistingFile:
    what: str

    @property
    def expected(self) -> str:
        return f"an existing {self.what}"

    def __call__(self, raw: str) -> Path:
        p = Path(raw)
        if p.is_dir():
            raise ValueError(f"expected {self.expected}: {p} is a directory")
        if not p.exists():
            raise ValueError(f"expected {self.expected}: {p} does not exist")
        if not p.is_file():
            raise ValueError(f"expected {self.expected}: {p} is not a regular file")
        return p


@dataclass(frozen=True)
class WritableDirectory:
    expected: str = "a directory gameday can write to (created if missing)"

    def __call__(self, raw: str) -> Path:
        p = Path(raw)
        # The nearest existing ancestor decides: nothing is created here (that happens only
        # once the run starts), but a run that could never write its ledger is refused now.
        probe = p.absolute()
        while not os.path.lexists(probe) and probe.parent != probe:
            probe = probe.parent
        if not probe.is_dir():
            why = "is not a directory" if probe == p.absolute() else f"cannot be created: {probe} is not a directory"
            raise ValueError(f"expected {self.expected}: {p} {why}")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise ValueError(f"expected {self.expected}: {probe} is not writable")
        return p


@dataclass(frozen=True)
class Globs:
    expected: str = "kubeconfig context globs, comma-separated"

    def __call__(self, raw: str) -> tuple[str, ...]:
        parts = [q.strip() for q in str(raw).split(",")]
        if not all(parts):
            raise ValueError(f"expected {self.expected}, without empty ones")
        return tuple(parts)


def parse_host_port(value: str, default_port: int) -> tuple[str, int]:
    """``HOST[:PORT]`` -> (host, port). Raises ValueError naming the value."""
    host, sep, port = str(value).strip().rpartition(":")
    if not sep:
        host, port = str(value).strip(), str(default_port)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST[:PORT] with a port in 1..65535, got {value!r}")
    return host, int(port)


@dataclass(frozen=True)
class HostPort:
    default_port: int = 5557
    expected: str = "HOST:PORT"

    def __call__(self, raw: str) -> tuple[str, int]:
        return parse_host_port(raw, self.default_port)


@dataclass(frozen=True)
class OptionSpec:
    """One ``--gameday-<name>`` option: its help and the validator every source goes through."""

    name: str
    help: str
    kind: _Validator
    flag: bool = False

    @property
    def choices(self) -> tuple[str, ...] | None:
        return self.kind.choices if isinstance(self.kind, Choice) else None

    @property
    def dest(self) -> str:
        return "gameday_" + self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "GAMEDAY_" + self.name.replace("-", "_").upper()

    def parse(self, raw: str, source: str) -> Any:
        """Validate one raw value from *source* (``command line``, ``ini gameday_x``, ...).

        Raises:
            ConfigError: names the option, the source, the value (shortened) and the range.
        """
        if not str(raw).strip():
            raise ConfigError(f"--gameday-{self.name} ({source}): empty value, expected {self.kind.expected}; "
                              "leave the option out to use the default", field=self.name)
        try:
            return self.kind(raw)
        except ValueError as exc:
            raise ConfigError(f"--gameday-{self.name} ({source}): got {shown(raw)}, {exc}", field=self.name) from exc


# Bounds: wide enough for any real drill, narrow enough that a typo (1e9, inf) is caught
# before a federation is started rather than as a drill that cannot end.
_RATIO = Number(False, 0, 1)
OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("target", "where the federation runs: local (embedded, default), kind, kube, external, or a "
               "target a plugin adds", TargetName()),
    OptionSpec("topology", "topology YAML (default: clusters/local.yaml)", ExistingFile("topology YAML file")),
    OptionSpec("profile", "federation profile YAML for --gameday-target=external: regions, DNS, sources, faults "
               "as commands", ExistingFile("federation profile YAML file")),
    # 2**63 - 1: the seed must survive JSON, JUnit and Allure readers as a 64-bit integer.
    OptionSpec("seed", "seed for every random choice (region picks); printed in the header",
               Number(True, 0, 2**63 - 1, hi_text="2**63 - 1")),
    OptionSpec("rounds", "repeat each drill N times with seeded random picks", Number(True, 1, 1000)),
    OptionSpec("round-jitter", "before each round's first fault, wait a random 0..SECONDS drawn from the seed, so "
               "that rounds land at independent phases of the federation's periodic processes (its health "
               "checks' cycle: give at least the longest period); default 0, no wait", Number(False, 0, 3600)),
    OptionSpec("cadence-patience", "R3 waits for the federation's own slow full pass when its stated "
               "reconcile_interval is at most SECONDS (default 10); a longer one is forced on demand and the check "
               "says so. Give the interval + a few seconds (310 for the default 300) to observe it at its cadence",
               Number(False, 0, 3600)),
    OptionSpec("reports", "directory for run data, ledger and figures (default: reports)", WritableDirectory()),
    OptionSpec("users", "locust users (default: topology load.users)", Number(True, 1, 10_000)),
    OptionSpec("rate", "offered load in requests/s across all users (default: topology load.rate)",
               Number(False, 0, 100_000, lo_open=True)),
    OptionSpec("locustfile", "your own locustfile instead of the built-in DNS-resolving user",
               ExistingFile("locustfile")),
    OptionSpec("load-workers", "locust worker processes (0: a single process)", Number(True, 0, 64)),
    OptionSpec("load-expect-workers", "locust workers on other machines the master waits for before a drill "
               "(each started with: python -m gameday.load.worker --master HOST:PORT)", Number(True, 0, 1024)),
    OptionSpec("load-master-bind", "where the locust master listens for those workers, HOST:PORT "
               "(default 0.0.0.0:5557)", HostPort()),
    OptionSpec("load-workers-wait", "seconds to wait for those workers to connect before the drill is refused "
               "(default 120)", Number(False, 0, 3600, lo_open=True)),
    # An hour: article 000's bar is 3 minutes; a limit beyond an hour is a unit mistake (ms?).
    OptionSpec("switchover-limit", "switchover SLO in seconds (default 180)", Number(False, 0, 3600, lo_open=True)),
    OptionSpec("error-ratio", "client error ratio SLO, 0..1 (default 0.01)", _RATIO),
    OptionSpec("utilisation-limit", "max utilisation of a surviving region, 0..1 (default 0.8)",
               Number(False, 0, 1, lo_open=True)),
    OptionSpec("recovery-window", "client-recovery window in seconds (default 10)",
               Number(False, 0, 600, lo_open=True)),
    OptionSpec("prediction-slack", "seconds a figure may lie outside the window the federation's own timing "
               "predicts (beyond its resolution) and still pass its vs-prediction verdict (default 0.3)",
               Number(False, 0, 600)),
    OptionSpec("accept-observed-ttl", "external target: when the DNS server answers with another TTL than the "
               "profile's timing.dns_ttl, drill anyway and judge with the observed TTL (default: refuse before "
               "anything is injected)", Flag(), flag=True),
    OptionSpec("stop-error-ratio", "stop condition: abort when client errors exceed this ratio ... (0.5)", _RATIO),
    OptionSpec("stop-after", "... for this many seconds (default 5)", Number(False, 0, 600, lo_open=True)),
    OptionSpec("allow-context", "kube target: kubeconfig context glob allowed to be broken (repeatable, "
               "comma-separated in ini)", Globs()),
    OptionSpec("dry-run", "print each drill's plan (checks, the fault and its exact inverse) and change nothing; "
               "the drill is reported as skipped", Flag(), flag=True),
    OptionSpec("keep-clusters", "kind target: leave the clusters and the federation in place after the run (by "
               "default the clusters it created are deleted, reused ones only lose the federation)", Flag(),
               flag=True),
    # A day: no drill waits longer for another; 0 means "fail at once if another drill holds it".
    OptionSpec("drill-lock-timeout", "seconds a drill on a shared federation (kind, kube, external) waits for "
               "another process's drill on it to finish before failing, nothing injected (default 900; 0: do "
               "not wait)", Number(False, 0, 86_400)),
    OptionSpec("local-drill-slots", "drills on the local target (federations on this machine) that may be in "
               "their fault block at once, across every process of this user; the others wait, nothing injected "
               "meanwhile (default: one per CPU; 0: no limit)", Number(True, 0, 1024)),
    OptionSpec("fail-on-regression", "fail the run when a drill's switchover is more than 50 % above the median "
               "of its previous runs (reports/history.jsonl, at least 3)", Flag(), flag=True),
    OptionSpec("ignore-ledger-problems", "drill although the fault ledger (reports/.gameday/ledger.json) is "
               "unreadable (it is moved aside) or holds entries no target of this run can revert (they are "
               "kept); by default such a run is refused before anything starts", Flag(), flag=True),
)
OPTION: dict[str, OptionSpec] = {o.name: o for o in OPTIONS}


def cli_type(name: str) -> Callable[[str], Any]:
    """An argparse ``type=`` for the ``gameday`` CLI that applies option *name*'s rules.

    ``gameday drill --rounds 0`` is then refused exactly like ``--gameday-rounds=0``.
    """
    opt = OPTION[name]

    def parse(raw: str) -> Any:
        try:
            return opt.parse(raw, "command line")
        except ConfigError as exc:
            # argparse prefixes "argument --rounds: "; keep only what follows the option name
            raise argparse.ArgumentTypeError(str(exc).split("(command line): ", 1)[-1]) from exc

    parse.__name__ = name
    return parse


def resolve(get: Callable[[OptionSpec], tuple[Any, str]], *, targets: Collection[str] | None = None) -> Settings:
    """Build :class:`Settings` from raw option values.

    Args:
        get: returns ``(raw value or None, where it came from)`` for an option, already
            applying CLI > ini > env precedence. ``None`` (and an empty ini line list)
            means not set; an empty string is a value, and an error.
        targets: the target names that exist (the registry's and the hooks'); None: any.

    Raises:
        ConfigError: a value is invalid; the message names option, source and value.
    """
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        raw, source = get(opt)
        if raw is None or raw == []:
            continue
        if isinstance(raw, bool):  # a store_true flag or an ini bool: already parsed
            values[opt.name] = raw
        elif isinstance(raw, list):  # --gameday-allow-context repeated, or ini lines
            values[opt.name] = tuple(g for item in raw for g in opt.parse(str(item), source))
        else:
            values[opt.name] = opt.parse(str(raw), source)
        if opt.name == "target" and targets is not None and values[opt.name] not in targets:
            raise ConfigError(f"--gameday-target ({source}): got {shown(values[opt.name])}, expected one of "
                              f"{', '.join(sorted(targets))}, or {TARGET_HELP}", field="target")
    target = values.get("target", "local")
    if target == "external" and "profile" not in values:
        raise ConfigError("--gameday-target=external needs a federation profile: --gameday-profile FILE (ini "
                          "gameday_profile, env GAMEDAY_PROFILE); see docs/howto/own-federation.md",
                          field="profile")
    if target == "external" and "topology" in values:
        raise ConfigError("--gameday-target=external takes its regions from --gameday-profile; leave "
                          "--gameday-topology out", field="topology")
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
        prediction_slack=values.get("prediction-slack", defaults.prediction_slack),
    )
    return Settings(
        target=target,
        topology=values.get("topology"),
        profile=values.get("profile"),
        seed=seed,
        seed_was_given=seed_given,
        rounds=values.get("rounds", 1),
        round_jitter=values.get("round-jitter", 0.0),
        cadence_patience=values.get("cadence-patience", Settings.cadence_patience),
        reports=values.get("reports", Path("reports")),
        allow_context=values.get("allow-context", ()),
        dry_run=values.get("dry-run", False),
        keep_clusters=values.get("keep-clusters", False),
        fail_on_regression=values.get("fail-on-regression", False),
        ignore_ledger_problems=values.get("ignore-ledger-problems", False),
        accept_observed_ttl=values.get("accept-observed-ttl", False),
        drill_lock_timeout=values.get("drill-lock-timeout", Settings.drill_lock_timeout),
        local_drill_slots=values.get("local-drill-slots"),
        slo=slo,
        load=LoadSettings(
            users=values.get("users"),
            rate=values.get("rate"),
            locustfile=values.get("locustfile"),
            workers=values.get("load-workers", 0),
            expect_workers=values.get("load-expect-workers", 0),
            master_bind=values.get("load-master-bind", ("0.0.0.0", 5557)),
            workers_wait=values.get("load-workers-wait", 120.0),
        ),
    )


def env_value(opt: OptionSpec) -> str | None:
    return os.environ.get(opt.env)
