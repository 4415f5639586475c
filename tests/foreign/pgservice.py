"""A team's tiny stateful HTTP service on PostgreSQL: one process per region (Debian's
``python3-psycopg``, run with the system's ``python3``; the standard library's HTTP server).

    python3 pgservice.py --region a --listen 127.0.221.1:PORT --conninfo "host=... port=...,..."

Each request connects anew with libpq's multi-host connection string and
``target_session_attrs=read-write``, so it reaches whichever node is the primary now: once a
standby is promoted, the service writes to it without being told.

``POST /data/<id>``
    ``INSERT`` the id into the current primary (autocommit: the answer comes after the commit):
    201 ``{"id", "node", "seq"}`` (``node``: the server's ``cluster_name``). 503
    ``{"written": false}`` when no primary could be reached (nothing was sent), 409 when the id
    exists; 504 ``{"written": null}`` when the connection broke after the statement was sent:
    it may or may not have been committed.
``GET /data/<id>``
    200 ``{"id", "seq", "node"}`` when the current primary has it, 404 when not, 503 when no
    primary answers.
``GET /`` and anything else
    200 ``ok`` with ``X-Served-By: <region>`` (what the drill's load and health checks ask for).
"""

from __future__ import annotations

import argparse
import http.server
import json
import re
import socketserver
from typing import Any

import psycopg  # Debian's python3-psycopg (the system's python3 runs this file)
import psycopg.errors

ID = re.compile(r"^/data/([A-Za-z0-9_-]{1,64})$")
INSERT = "INSERT INTO writes (id, region) VALUES (%s, %s) RETURNING seq, current_setting('cluster_name')"


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def handler(region: str, conninfo: str) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, body: Any) -> None:
            data = (json.dumps(body) if not isinstance(body, str) else body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if not isinstance(body, str) else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Served-By", region)
            self.end_headers()
            self.wfile.write(data)

        def _connect(self) -> psycopg.Connection[Any]:
            return psycopg.connect(conninfo, autocommit=True, application_name=f"pgservice-{region}")

        def do_GET(self) -> None:
            m = ID.match(self.path)
            if m is None:
                self._send(200, "ok\n")
                return
            wid = m.group(1)
            try:
                with self._connect() as conn:
                    row = conn.execute("SELECT seq, current_setting('cluster_name') FROM writes WHERE id = %s",
                                       (wid,)).fetchone()
            except psycopg.Error as exc:
                self._send(503, {"id": wid, "error": f"{type(exc).__name__}: {exc}"[:200]})
                return
            if row is None:
                self._send(404, {"id": wid, "found": False})
            else:
                self._send(200, {"id": wid, "seq": row[0], "node": row[1]})

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            m = ID.match(self.path)
            if m is None:
                self._send(404, {"error": "POST /data/<id>"})
                return
            wid = m.group(1)
            try:
                conn = self._connect()
            except psycopg.Error as exc:  # no primary reached: nothing was sent
                self._send(503, {"id": wid, "written": False, "error": f"{type(exc).__name__}: {exc}"[:200]})
                return
            try:
                with conn:
                    seq, node = conn.execute(INSERT, (wid, region)).fetchone() or (None, None)
            except psycopg.errors.UniqueViolation:
                self._send(409, {"id": wid, "error": "exists"})
                return
            except psycopg.errors.ReadOnlySqlTransaction as exc:  # refused before anything was written
                self._send(503, {"id": wid, "written": False, "error": str(exc)[:200]})
                return
            except psycopg.Error as exc:  # sent; the commit's fate is unknown
                self._send(504, {"id": wid, "written": None, "error": f"{type(exc).__name__}: {exc}"[:200]})
                return
            self._send(201, {"id": wid, "node": node, "seq": seq, "region": region})

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--region", required=True)
    p.add_argument("--listen", required=True, help="HOST:PORT")
    p.add_argument("--conninfo", required=True)
    args = p.parse_args()
    host, port = args.listen.rsplit(":", 1)
    server = Server((host, int(port)), handler(args.region, args.conninfo))
    print(f"pgservice {args.region} listening on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
