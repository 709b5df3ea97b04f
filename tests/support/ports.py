"""Free loopback ports for the servers the fixtures start."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing holds on `host`; "0.0.0.0" for a server that listens on every address (a port
    free on loopback may be a client connection's on another address, and then not bindable there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
