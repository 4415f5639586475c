"""Errors raised by gameday.

Every error gameday raises on purpose derives from :class:`GamedayError`::

    GamedayError
    ├── ConfigError                 invalid topology / option / config file (permanent)
    ├── TargetError                 the target cannot be brought up or reached
    │   ├── TargetUnreachable       health pre-check failed; nothing was injected
    │   └── ComponentFailed         a component exited or never became ready
    ├── FaultError                  a fault could not be injected or reverted
    │   └── RestoreIncomplete       a revert failed; the ledger still holds the entry
    ├── LoadError                   the load generator failed to start or report
    ├── DrillAborted                a stop condition fired; the fault was reverted
    │   ├── ComponentDied           a component exited that the fault does not stop
    │   └── LoadCollapsed           the load generator exited or stopped offering the load
    ├── DrillRefused                the drill would break more than capacity allows; nothing injected
    │   └── DrillLockTimeout        another process's drill held the federation's drill lock too long
    ├── DrillLockError              the drill lock cannot be taken at all (its file, or held by this process)
    ├── ReportError                 `gameday report`: no results, unreadable results, the generator failed
    ├── HarnessStarved              a verdict's observation was starved (inconclusive: neither pass nor fail)
    └── TransientError              a retryable failure (timeouts, connection refused)

SLO breaches are *not* errors: they are plain ``AssertionError`` whose message says
what was expected, what was seen, where and when.
"""

from __future__ import annotations

from typing import Protocol


class Casualty(Protocol):
    """What :class:`ComponentDied` and :class:`LoadCollapsed` carry (the watcher's
    :class:`gameday.model.timeline.Casualty`): named here by shape, so this bottom module imports
    nothing of the layers above it."""

    @property
    def name(self) -> str:
        """The component (``proxy-b``, ``nats``, ``locust``)."""

    @property
    def message(self) -> str:
        """The whole sentence: what, which pid, when, what was reverted."""


class Holder(Protocol):
    """Who holds a drill lock (:class:`gameday.runtime.drill_lock.Holder`), by shape."""

    @property
    def pid(self) -> int: ...

    def describe(self) -> str:
        """``pid 4242 (worker gw1, test suites/x.py::test_y) since 14:03:07``."""


class GamedayError(Exception):
    """Root of every error gameday raises on purpose."""


class ConfigError(GamedayError):
    """A configuration value is invalid.

    The message names the file, the field, the value seen and what was expected.
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None) -> None:
        self.source = source
        self.field = field
        super().__init__(message)



class FaultUnavailable(ConfigError):
    """The target cannot do the fault asked for (an external profile declares no commands for
    it). A drill that asks for it is misconfigured; a conformance check that needs it is not
    applicable on this target and skips, saying which fault to declare."""


class TargetError(GamedayError):
    """The target (federation) could not be brought up, reached or torn down."""


class TargetUnreachable(TargetError):
    """The target failed its health pre-check; no fault was injected."""


class ComponentFailed(TargetError):
    """A federation component exited unexpectedly or never became ready."""


class ReportError(GamedayError):
    """``gameday report`` cannot make the report: no or empty results, an unreadable result
    file (named), an output directory it must not overwrite, or the generator failed (its
    command and the tail of its output in the message)."""


class FaultError(GamedayError):
    """A fault could not be injected or reverted."""


class RestoreIncomplete(FaultError):
    """Reverting a fault failed; its ledger entry is kept so `gameday restore` can retry."""


class LoadError(GamedayError):
    """The load generator failed to start, run or report its records."""


class DrillAborted(GamedayError):
    """A stop condition fired during a drill; the fault was reverted at once."""


class ComponentDied(DrillAborted):
    """A federation component exited mid-drill that the fault in effect does not stop; every
    fault was reverted at once. ``casualty`` (a :class:`gameday.model.timeline.Casualty`) says
    which component, its pid, when, and whether the fault caused it."""

    def __init__(self, message: str, *, casualty: Casualty | None = None) -> None:
        self.casualty = casualty
        super().__init__(message)


class LoadCollapsed(DrillAborted):
    """The load generator exited, or its achieved rate collapsed, mid-drill: the verdicts
    would judge a load nobody offered, so every fault was reverted at once."""

    def __init__(self, message: str, *, casualty: Casualty | None = None) -> None:
        self.casualty = casualty
        super().__init__(message)


class DrillRefused(GamedayError):
    """A drill was refused up front (e.g. N-2 capacity does not hold); nothing was injected."""


class DrillLockTimeout(DrillRefused):
    """Another process held the federation's drill lock (:mod:`gameday.runtime.drill_lock`) for longer
    than ``--gameday-drill-lock-timeout``; nothing was injected. ``holder`` says who (None
    when it has not written who it is), ``key`` which federation."""

    def __init__(self, message: str, *, key: str, holder: Holder | None = None) -> None:
        self.key = key
        self.holder = holder
        super().__init__(message)


class DrillLockError(GamedayError):
    """The drill lock cannot be taken at all: its file cannot be opened or locked, or this
    very process already holds it (a second drill inside the first); nothing was injected."""


class HarnessStarved(GamedayError):
    """A verdict that would have failed was observed by a starved harness: *inconclusive*.

    The observer could not read the federation at the rate the figure's resolution needs (its
    own loop, or a source that answered but was read at under half the asked rate or with a
    long gap: the machine, not the federation, was too busy). The federation is neither passed
    nor failed; the message names the measured rates and gaps and what the verdict would have
    said (:mod:`gameday.verdicts.harness`). Not an ``AssertionError``: pytest reports the test
    ``INCONCLUSIVE``, Allure *broken* in its own category, the run exits 6
    (:data:`gameday.verdicts.harness.EXIT_INCONCLUSIVE`) when every failure is one, and a CI
    may rerun it once (``--only-rerun HarnessStarved``)."""


class TransientError(GamedayError):
    """A failure that may succeed on retry (timeout, connection refused)."""
