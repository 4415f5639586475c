"""Secrets out of what a report shows: settings, topology and profile as attached.

:func:`redact` walks plain data (dicts, lists, strings) and replaces with ``***``:

- the value of any key that names a secret (``token``, ``password``, ``secret``,
  ``api_key``, ``authorization``, ``credentials``, ``private_key``, ...);
- the user information of a URL (``https://user:pw@host`` -> ``https://***@host``);
- secret query parameters (``?token=abc`` -> ``?token=***``);
- ``Authorization: Bearer abc`` / ``Basic abc`` headers and ``password=abc``-like pairs
  inside strings (commands of an external profile's faults).

Names stay readable: a reviewer sees *that* a token was set, not what it was.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

MASK = "***"

_WORDS = frozenset({"password", "passwd", "passphrase", "pwd", "secret", "secrets", "token", "auth",
                    "authorization", "credential", "credentials", "apikey", "cookie", "bearer", "privatekey"})
_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key"), ("session", "key"),
                    ("client", "secret"), ("pass", "word")})
_SUFFIXES = ("password", "passwd", "token", "secret", "apikey")
"""Run-together names: PGPASSWORD, GITHUBTOKEN, csrftoken."""
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<userinfo>[^/@\s]+)@")
_QUERY = re.compile(r"(?P<key>[?&;](?P<name>[A-Za-z0-9_.\-]+)=)(?P<value>[^&#\s;\"']*)")
_AUTH_HEADER = re.compile(r"(?P<key>\b(?:proxy-)?authorization\s*[:=]\s*(?:(?:bearer|basic|token|digest)\s+)?)"
                          r"(?P<value>[^\s\"',;]+)", re.IGNORECASE)
_PAIR = re.compile(r"(?P<key>(?<![\w\-])(?P<flag>--)?(?P<name>[A-Za-z][A-Za-z0-9_.\-]*)"
                   r"(?P<sep>(?(flag)(?:\s*[=:]\s*|\s+)|\s*[=:]\s*)))"
                   r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"',;&]+)")


def _words(key: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key)  # camelCase -> camel_Case
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def secret_key(key: str) -> bool:
    """True when a mapping key names a secret (``token``, ``db_password``, ``apiKey``, ...);
    whole words only (``author``, ``passing``, ``bypass`` are not)."""
    words = _words(key)
    return any(w in _WORDS or w.endswith(_SUFFIXES) for w in words) or any(
        p in _PAIRS for p in itertools.pairwise(words))


def redact_text(text: str) -> str:
    """*text* with credentials in URLs, secret query parameters, authorization headers and
    ``password=...`` / ``--token VALUE`` pairs masked."""
    out = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    out = _QUERY.sub(lambda m: f"{m['key']}{MASK}" if secret_key(m["name"]) else m[0], out)
    out = _AUTH_HEADER.sub(lambda m: f"{m['key']}{MASK}", out)

    def pair(m: re.Match[str]) -> str:
        if not secret_key(m["name"]) or m["value"] == MASK or m["value"].lower() in ("bearer", "basic"):
            return m[0]
        return f"{m['key']}{MASK}"

    return _PAIR.sub(pair, out)


def redact(value: Any, *, key: str | None = None) -> Any:
    """A copy of plain data *value* with secrets masked (see the module docstring).

    Mappings, lists and tuples are walked; strings are scanned; other scalars are kept
    unless their key names a secret. Keys are never changed.
    """
    if key is not None and secret_key(key) and value not in (None, "", [], {}):
        return MASK
    if isinstance(value, dict):
        return {k: redact(v, key=str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
