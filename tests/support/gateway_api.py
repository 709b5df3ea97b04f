"""A stand-in for SUP's /api/v1/gateway/* (the contract in docs/ssh-gateway.md), for the gateway tests.

It answers routes from a dict and the awake pods from a list, records wakes, uses, events and heartbeats,
checks the bearer token, and calls `on_wake` (e.g. to start the stand-in pod's sshd) before
answering a wake. The end-to-end test
against real `sup serve` lives beside the API's own tests."""

from __future__ import annotations

import contextlib
import json
import ssl
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "gateway-test-token"


class GatewayApiStandIn:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        """`tls`: serve https with this server context (SUP behind a TLS terminator)."""
        self.routes: dict[str, dict[str, Any]] = {}
        self.refusal_reasons: dict[str, str] = {}
        self.route_calls: list[str] = []
        self.wakes: list[dict[str, Any]] = []
        self.used: list[dict[str, Any]] = []  # tunnel opens to awake pods told to SUP
        self.used_awake = True  # what POST used answers (false: a sleep came first)
        self.events: list[dict[str, Any]] = []
        self.heartbeats: list[dict[str, Any]] = []
        self.awake: list[dict[str, Any]] = []  # what GET awake answers (pods with the reporter's port)
        self.on_wake: Callable[[dict[str, Any]], None] | None = None
        self.wake_status = 200
        self.routes_status: int | None = None  # set: every routes call answers it, with no reason
        self.changed = threading.Condition()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            # Keep-alive and TCP_NODELAY, as SUP's uvicorn: not a new connection per call, and no
            # 40 ms stall of a response sent in two writes on a kept connection (Nagle against the
            # gateway's delayed ACK).
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the gateway stopped
                    self.wfile.write(data)

            def _authorized(self) -> bool:
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._answer(401, {"detail": "not authenticated"})
                    return False
                return True

            def do_GET(self) -> None:
                if not self._authorized():
                    return
                if self.path == "/api/v1/gateway/awake":
                    self._answer(200, stand_in.awake)
                    return
                prefix = "/api/v1/gateway/routes/"
                if not self.path.startswith(prefix):
                    self._answer(404, {"detail": "not found"})
                    return
                username = self.path[len(prefix) :]
                stand_in.record(stand_in.route_calls, username)
                if stand_in.routes_status is not None:  # SUP down, or a proxy's 404 in front of it
                    self._answer(stand_in.routes_status, {"detail": "not SUP's answer"})
                    return
                route = stand_in.routes.get(username)
                if route is None:
                    reason = stand_in.refusal_reasons.get(username, "unknown")
                    self._answer(404, {"detail": "no route", "reason": reason})
                else:
                    self._answer(200, route)

            def do_POST(self) -> None:
                if not self._authorized():
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path == "/api/v1/gateway/wake":
                    stand_in.record(stand_in.wakes, body)
                    if stand_in.wake_status != 200:
                        self._answer(stand_in.wake_status, {"detail": "wake failed"})
                        return
                    stand_in.wake(body)
                    self._answer(200, {"awake": True})
                elif self.path == "/api/v1/gateway/used":
                    stand_in.record(stand_in.used, body)
                    self._answer(200, {"awake": stand_in.used_awake})
                elif self.path == "/api/v1/gateway/events":
                    stand_in.record(stand_in.events, body)
                    self._answer(204)
                elif self.path == "/api/v1/gateway/heartbeat":
                    stand_in.record(stand_in.heartbeats, body)
                    self._answer(204)
                else:
                    self._answer(404, {"detail": "not found"})

        class Server(ThreadingHTTPServer):
            request_queue_size = 1024  # a burst of logins posts as many events at once
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(
                    sys.exc_info()[1], ConnectionError
                ):  # a kept connection the gateway dropped
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "http" if tls is None else "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def record(self, into: list[Any], item: Any) -> None:
        with self.changed:
            into.append(item)
            self.changed.notify_all()

    def wake(self, body: dict[str, Any]) -> None:
        for route in self.routes.values():
            for pod in route["pods"]:
                if pod["kind"] == body["kind"] and pod["owner"] == body["name"]:
                    pod["awake"] = True
        if self.on_wake is not None:
            self.on_wake(body)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 60) -> None:
        """Until `predicate()` holds (checked at each recorded call); AssertionError after `timeout`
        (a guard against a hang, not a timing assertion)."""
        with self.changed:
            if not self.changed.wait_for(predicate, timeout=timeout):
                raise AssertionError("the stand-in SUP API never saw what the test waits for")

    def start(self) -> GatewayApiStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def pod(
    name: str, owner: str, port: int, *, kind: str = "user", awake: bool = True, service: str | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "owner": owner,
        "service": service or f"{'login' if kind == 'user' else 'group'}-{owner}",
        "namespace": "sup-test",
        "port": port,
        "awake": awake,
    }
