"""The tests' TCP relay (tests/support/relay.py) carries bytes both ways, unchanged, to the server."""

from __future__ import annotations

import socket
import threading

from tests.support.relay import Relay


def test_a_relay_carries_bytes_both_ways_to_the_server() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo_upper() -> None:
        connection, _ = server.accept()
        with connection:
            while data := connection.recv(65536):
                connection.sendall(data.upper())

    threading.Thread(target=echo_upper, daemon=True).start()
    relay = Relay("127.0.0.1", port)
    try:
        with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as client:
            payload = b"ldap bind " * 20000  # more than one read's worth
            client.sendall(payload)
            received = b""
            while len(received) < len(payload):
                received += client.recv(65536)
        assert received == payload.upper()
    finally:
        relay.stop()
        server.close()
