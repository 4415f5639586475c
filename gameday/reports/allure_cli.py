"""The Allure command line (Allure 2, npm ``allure-commandline``, a Java program), as
``gameday report`` runs it.

Where it is looked for, first hit wins: ``$GAMEDAY_ALLURE`` (the ``allure`` executable),
``allure`` on ``PATH``, then where ``tests/report/install-report-tools.sh`` installs it:
``$GAMEDAY_ALLURE_HOME/node_modules/.bin/allure`` (default home
``~/.cache/gameday/allure``, under ``$XDG_CACHE_HOME`` when that is set).

Allure keeps its Trend and History in the report's ``history/`` directory: the previous
report's is handed to the generator as an extra results directory, so each new report
carries the runs before it. A new report is generated beside the old one and swapped in
only when the generator succeeded, so a failing generator leaves the previous report (and
its history) as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gameday.errors import ReportError

ALLURE_ENV = "GAMEDAY_ALLURE"
HOME_ENV = "GAMEDAY_ALLURE_HOME"

GENERATE_TIMEOUT = 300.0
"""Seconds the generator may take (a few seconds for a drill's results; Java starts in ~1 s)."""

VERSION_TIMEOUT = 60.0


@dataclass(frozen=True, kw_only=True)
class Allure:
    path: Path
    version: str


def default_home() -> Path:
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV])
    cache = Path(os.environ["XDG_CACHE_HOME"]) if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return cache / "gameday" / "allure"


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _npm_version(path: Path) -> str | None:
    """The version of the npm package *path* belongs to (``allure-commandline``), read from its
    package.json: that spares starting Java just to ask."""
    for parent in list(path.resolve().parents)[:4]:
        manifest = parent / "package.json"
        if manifest.is_file():
            try:
                raw = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            if not isinstance(raw, dict) or raw.get("name") != "allure-commandline":
                return None
            version = raw.get("version")
            return version if isinstance(version, str) else None
    return None


def _version(path: Path) -> str:
    npm = _npm_version(path)
    if npm is not None:
        return npm
    try:
        proc = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReportError(f"{path} --version: cannot run it ({exc})") from exc
    if proc.returncode != 0:
        raise ReportError(f"{path} --version exited {proc.returncode}:\n{_tail(proc.stderr + proc.stdout)}")
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "?"


def find_allure() -> Allure | None:
    """The Allure 2 command line, or None when none is installed. Raises ReportError when
    ``$GAMEDAY_ALLURE`` names something that is not an executable Allure 2."""
    explicit = os.environ.get(ALLURE_ENV)
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ReportError(f"${ALLURE_ENV}={explicit}: not an executable file (it should name the allure "
                              "command line; unset it to use the one on PATH)")
        candidates = [path]
    else:
        on_path = shutil.which("allure")
        candidates = [Path(on_path)] if on_path else []
        installed = default_home() / "node_modules" / ".bin" / "allure"
        if installed.is_file() and os.access(installed, os.X_OK):
            candidates.append(installed)
    for path in candidates:
        version = _version(path)
        if version.split(".", 1)[0] == "2":
            return Allure(path=path, version=version)
        if explicit:
            raise ReportError(f"${ALLURE_ENV}={explicit} is Allure {version}; gameday report drives Allure 2 "
                              "(npm allure-commandline)")
    return None


def generate(allure: Allure, results: Path, output: Path) -> None:
    """``allure generate`` *results* into *output*, carrying *output*'s previous ``history/``.

    Raises ReportError with the command and the tail of its output when it fails."""
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        fresh = staging / "report"
        sources = [results]
        if (output / "history").is_dir():
            shutil.copytree(output / "history", staging / "previous" / "history")
            sources.append(staging / "previous")
        argv = [str(allure.path), "generate", "--clean", "-o", str(fresh), *map(str, sources)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=GENERATE_TIMEOUT, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ReportError(f"{' '.join(argv)}: still running after {GENERATE_TIMEOUT:.0f} s; stopped it") from exc
        except OSError as exc:
            raise ReportError(f"{' '.join(argv)}: cannot run it ({exc})") from exc
        if proc.returncode != 0 or not (fresh / "index.html").is_file():
            why = f"exited {proc.returncode}" if proc.returncode else "wrote no index.html"
            raise ReportError(f"the Allure generator {why}: {' '.join(argv)}\n"
                              f"{_tail(proc.stderr + chr(10) + proc.stdout) or '(it printed nothing)'}")
        old = staging / "old"
        if output.exists():
            output.rename(old)
        fresh.rename(output)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
