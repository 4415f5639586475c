"""Targets by name: the built-in factories and attach functions, and how restore finds any target.

Each entry is ``(name, factory, attach)``:

- ``factory(topology, settings, workdir) -> Target``: the target, not yet up. It checks
  what it needs (tools, kubeconfig contexts, the allow-list, a profile) and raises a
  :class:`~gameday.errors.GamedayError` naming what is missing, before anything is created.
- ``attach(ref) -> Target``: the same target again from the dict its ``ref()`` returned, as
  written to the fault ledger; ``gameday restore`` uses it without pytest.

A kind may also name a ``check(topology, settings) -> None``: what the target needs from
the machine (tools, a reachable API server, allow-listed contexts), run by the plugin at
session start, before collection, so a missing piece is one ``UsageError`` line and nothing
is created (:meth:`TargetRegistry.check`).

Either may be given as an import path, ``"package.module:Class.method"``, imported on
first use: the kind and kube targets import ``kubernetes``, and a target may not be part of
this installation at all (``external``, until its module is). The pytest plugin asks the
``pytest_gameday_make_target`` hook first (:mod:`gameday.plugin.hooks`) and falls back to
:func:`make`, as pytest-xdist falls back to its own schedulers.

**Restore of a target that is not built in.** The drill records in each ledger entry the
import path of the target's ``attach`` (its class's ``attach`` classmethod, e.g.
``"mypkg.targets:MyTarget.attach"``) whenever it differs from the built-in of that name
(:func:`attach_path`). ``gameday restore`` imports it from there (:func:`reattach`), so the
package that provides the target must be importable where restore runs; a class defined in
a ``conftest.py`` or inside a function is not, and restore says so.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gameday.errors import ConfigError, TargetError
from gameday.interfaces import Reattachable
from gameday.runtime.userinput import shown

if TYPE_CHECKING:
    from gameday.interfaces import Target
    from gameday.model.topology import Topology
    from gameday.runtime.settings import Settings

log = logging.getLogger(__name__)

Factory = Callable[["Topology", "Settings", Path], "Target"]
Attach = Callable[[dict[str, Any]], "Target"]
Check = Callable[["Topology", "Settings"], None]


def load(path: str, *, what: str) -> Any:
    """The object at import path ``"module:attr.attr"``.

    Raises:
        TargetError: the module or attribute cannot be imported; names *what* and the path.
    """
    module, sep, attrs = path.partition(":")
    if not sep or not module or not attrs:
        raise ConfigError(f"{what}: {shown(path)} is not an import path 'package.module:Name.attribute'")
    try:
        obj: Any = importlib.import_module(module)
        for part in attrs.split("."):
            obj = getattr(obj, part)
    except ImportError as exc:
        raise TargetError(f"{what}: cannot import {path} ({exc}); is the package that provides it installed "
                          "and importable here?") from exc
    except AttributeError as exc:
        raise TargetError(f"{what}: {path} not found ({exc})") from exc
    return obj


@dataclass(frozen=True)
class TargetKind:
    """One registered target: its name, factory and attach function (or their import paths)."""

    name: str
    factory: Factory | str
    attach: Attach | str
    check: Check | str | None = None
    """What the target needs from the machine, checked at session start (None: nothing)."""

    def _resolve(self, fn: Callable[..., Any] | str, role: str) -> Callable[..., Any]:
        if isinstance(fn, str):
            obj = load(fn, what=f"target {self.name!r} ({role})")
            if not callable(obj):
                raise TargetError(f"target {self.name!r} ({role}): {fn} is not callable")
            return obj  # type: ignore[no-any-return]
        return fn

    def make(self, topology: Topology, settings: Settings, workdir: Path) -> Target:
        target: Target = self._resolve(self.factory, "factory")(topology, settings, workdir)
        return target

    def reattach(self, ref: dict[str, Any]) -> Target:
        target: Target = self._resolve(self.attach, "attach")(ref)
        return target

    def run_check(self, topology: Topology, settings: Settings) -> None:
        if self.check is not None:
            self._resolve(self.check, "check")(topology, settings)


class TargetRegistry:
    """Name -> :class:`TargetKind`."""

    def __init__(self) -> None:
        self._kinds: dict[str, TargetKind] = {}

    def register(self, name: str, factory: Factory | str, attach: Attach | str, *,
                 check: Check | str | None = None, replace: bool = False) -> TargetKind:
        """Register target *name*.

        Raises:
            ConfigError: *name* is taken and *replace* is false.
        """
        if name in self._kinds and not replace:
            raise ConfigError(f"target {shown(name)} is already registered; pass replace=True to override it")
        kind = TargetKind(name, factory, attach, check)
        self._kinds[name] = kind
        return kind

    def unregister(self, name: str) -> None:
        self._kinds.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._kinds)

    def __contains__(self, name: object) -> bool:
        return name in self._kinds

    def get(self, name: str) -> TargetKind:
        """Raises :class:`ConfigError` naming the known targets."""
        kind = self._kinds.get(name)
        if kind is None:
            raise ConfigError(f"unknown target {shown(name)}; expected one of {', '.join(self.names())}")
        return kind

    def make(self, name: str, topology: Topology, settings: Settings, workdir: Path) -> Target:
        """Build target *name* (not yet up). Raises what its factory raises."""
        return self.get(name).make(topology, settings, workdir)

    def check(self, name: str, topology: Topology, settings: Settings) -> None:
        """Check what target *name* needs from this machine, creating nothing (a name not
        registered here, e.g. a hook's own, has nothing to check).

        Raises:
            GamedayError: one line naming what is missing and what to install or allow.
        """
        kind = self._kinds.get(name)
        if kind is not None:
            kind.run_check(topology, settings)

    def attach(self, name: str, ref: dict[str, Any]) -> Target:
        """Re-attach to target *name* from its ledger reference."""
        return self.get(name).reattach(ref)

    def attach_path(self, target: Target) -> str | None:
        """The import path of *target*'s ``attach`` for the ledger, or None when its name
        alone finds it again (a built-in) or it has no ``attach`` (restore then says so)."""
        name = target.name
        cls = type(target)
        if not isinstance(target, Reattachable):
            if name not in self._kinds:
                log.warning("target %r (%s) has no attach classmethod: `gameday restore` cannot re-attach to it "
                            "after a killed run; its faults must then be reverted by hand", name, cls.__qualname__)
            return None
        path = f"{cls.__module__}:{cls.__qualname__}.attach"
        known = self._kinds.get(name)
        if known is not None and known.attach == path:
            return None
        return path


REGISTRY = TargetRegistry()
"""The process's registry; the built-ins below, plus whatever a program registers."""

# The built-ins, by import path: nothing is imported until a target is used.
REGISTRY.register("local", "gameday.targets.local:LocalTarget.from_settings",
                  "gameday.targets.local:LocalTarget.attach")
REGISTRY.register("kind", "gameday.targets.k8s.kind:KindTarget.from_settings",
                  "gameday.targets.k8s.kind:KindTarget.attach", check="gameday.targets.k8s.kind:KindTarget.check")
REGISTRY.register("kube", "gameday.targets.k8s.kube:KubeTarget.from_settings",
                  "gameday.targets.k8s.kube:KubeTarget.attach", check="gameday.targets.k8s.kube:KubeTarget.check")
REGISTRY.register("external", "gameday.targets.external:ExternalTarget.from_settings",
                  "gameday.targets.external:ExternalTarget.attach")

register = REGISTRY.register
names = REGISTRY.names
make = REGISTRY.make
check = REGISTRY.check
attach_path = REGISTRY.attach_path


def attach(name: str, ref: dict[str, Any], attach_fn: str | None = None) -> Target:
    """Re-attach to a target for ``gameday restore``: through *attach_fn* (the import path
    the ledger recorded, for a target that is not built in) or the registry by *name*.

    Raises:
        GamedayError: the name is unknown and no attach path was recorded, or the path
            cannot be imported, or the attach function fails.
    """
    if attach_fn is not None:
        fn = load(attach_fn, what=f"target {name!r} (attach, as the ledger recorded it)")
        target: Target = fn(ref)
        return target
    if name not in REGISTRY:
        raise TargetError(f"cannot restore target {name!r}: no target of that name is registered "
                          f"({', '.join(REGISTRY.names())}) and the ledger entry records no attach function")
    return REGISTRY.attach(name, ref)
