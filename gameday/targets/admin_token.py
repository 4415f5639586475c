"""The per-run admin token, harness side: issue it to a file only its owner can read, and
send it as ``Authorization: Bearer`` on every admin call.

The components check it (:func:`gameday.fedapp.common.admin_guard`) against the file
``$GAMEDAY_ADMIN_TOKEN_FILE`` names. Where the token may travel: the token file and the
header. Where it never goes: ``state.json`` and the ledger (they hold the file's path),
logs, reports, error messages and ``repr`` (:class:`AdminAuth` reads the file when it
signs a request, so no caller's frame or object holds the token).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Generator
from pathlib import Path

import httpx

from gameday.errors import FaultError
from gameday.fedapp.common import ADMIN_TOKEN_ENV, AdminTokenUnreadable, read_admin_token

__all__ = ["ADMIN_TOKEN_ENV", "AdminAuth", "issue_admin_token", "new_admin_token"]

TOKEN_BYTES = 32
"""Random bytes per token (256 bits; ``secrets.token_urlsafe`` turns them into 43 characters)."""


def new_admin_token() -> str:
    """A fresh token (URL-safe text, so it fits a header and a Kubernetes Secret as is)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def issue_admin_token(path: Path) -> None:
    """Write a fresh token to *path*, mode 0600, replacing any earlier one.

    It is written to a temporary file created with ``O_EXCL`` and mode 0600 (the umask can
    only take bits away), so no other user can read it at any moment, then renamed over
    *path* in one step: a component never reads half a token.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)  # exactly 0600 even under a umask that would leave the owner out
        os.write(fd, new_admin_token().encode("ascii"))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    os.replace(tmp, path)


class AdminAuth(httpx.Auth):
    """``auth=`` for httpx: adds ``Authorization: Bearer <token>``, the token read from
    *path* for each request (a restarted run's new token is picked up).

    Raises (from the request):
        FaultError: the token file cannot be read (the message names the file, never the token).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"AdminAuth(path={str(self.path)!r})"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        try:
            request.headers["Authorization"] = f"Bearer {read_admin_token(self.path)}"
        except AdminTokenUnreadable as exc:
            raise FaultError(f"cannot sign {request.method} {request.url.path}: {exc}") from exc
        yield request
