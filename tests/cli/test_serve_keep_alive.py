"""`sup serve` keeps an idle client connection open as long as `api.keep_alive_seconds` says: a
pooled client (an IdP's SCIM client, a load balancer) that reuses a connection within that time is
answered on it, instead of having its request reset as SUP closes it. uvicorn's own default, 5 s,
is what SUP used before (and httpx's pool keeps connections exactly as long)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sup.store import migrate
from tests.support.cli import sup_env
from tests.support.server import SupServer

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: sup\r\nConnection: keep-alive\r\n\r\n"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[SupServer]:
    url = f"sqlite:///{tmp_path / 'sup.db'}"
    migrate.upgrade(url)
    server = SupServer(sup_env(SUP_DATABASE_URL=url, SUP_API__KEEP_ALIVE_SECONDS="8"), tmp_path / "serve.log")
    try:
        yield server
    finally:
        server.stop()


def _answer(conn: socket.socket) -> bytes:
    """One response (headers and the small body /healthz sends), or b"" when the server closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in lines if line.startswith(b"content-length"))
    while len(body) < length:
        body += conn.recv(4096)
    return head


def test_a_connection_idle_past_five_seconds_is_still_answered(served: SupServer) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(REQUEST)
        assert _answer(conn).startswith(b"HTTP/1.1 200")
        time.sleep(5.5)  # idle past uvicorn's default, within the 8 s configured
        conn.sendall(REQUEST)
        assert _answer(conn).startswith(b"HTTP/1.1 200")  # answered on the same connection
