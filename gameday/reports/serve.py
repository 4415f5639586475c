"""Serving a report directory on loopback HTTP: Allure's report loads its data with
requests a browser refuses to make from ``file://``, so ``gameday report --open`` serves it
the way ``allure open`` does."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: the terminal shows the report's address only."""


@contextmanager
def serve_directory(directory: Path, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve *directory* on a free port of *host* while the block runs; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer((host, 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="gameday-report-http", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
