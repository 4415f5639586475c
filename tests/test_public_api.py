"""The public API: every name ``gameday`` exports resolves, and importing it loads nothing heavy."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gameday


def test_every_exported_name_resolves() -> None:
    for name in gameday.__all__:
        assert getattr(gameday, name) is not None, name
    assert issubclass(gameday.DrillRefused, gameday.GamedayError)
    assert "gateway_down" in gameday.FAULTS


def test_importing_gameday_is_cheap() -> None:
    """Each reference-app component imports ``gameday`` (via gameday.fedapp): it must not
    pull in the harness, pytest or the HTTP client."""
    code = ("import sys, gameday; heavy = [m for m in ('pytest', 'httpx', 'gameday.drill', 'gameday.targets') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_all_and_the_lazy_table_agree() -> None:
    assert set(gameday.__all__) == {"__version__", *gameday._EXPORTS}


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        gameday.NoSuchThing  # noqa: B018
