"""A conformance check's "a request through it" (FederationView.request_served): a request the
federation serves, retried at most twice when one spends its budget on a busy machine."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gameday.conformance.view import FederationView
from gameday.model.parts import Endpoints


@pytest.fixture
def flaky() -> Iterator[tuple[str, list[int]]]:
    """A loopback server answering each request with the next status of its list (then 200)."""
    statuses: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code = statuses.pop(0) if statuses else 200
            self.send_response(code)
            self.send_header("X-Route-Version", "57")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/call/work", statuses
    finally:
        server.shutdown()
        server.server_close()


def _view() -> FederationView:
    return FederationView(Endpoints(dns_server=("127.0.0.1", 53), fqdn="app.example.", gateway_port=1), [])


def test_a_request_that_spent_its_budget_is_tried_again_and_a_node_that_never_serves_still_fails(
        flaky: tuple[str, list[int]]) -> None:
    url, statuses = flaky
    view = _view()
    statuses[:] = [502, 502]
    reply = view.request_served(url)
    assert (reply.status, reply.route_version, statuses) == (200, 57, [])
    statuses[:] = [502, 502, 502, 502]
    reply = view.request_served(url)
    assert reply.status == 502 and statuses == [502]  # three tries, no more: the last reply is what fails
