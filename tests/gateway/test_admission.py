"""One source address cannot take the gateway from everyone else (limits.py, per-source admission):
a flood from 127.0.0.2 (loopback holds all of 127/8, so a client socket bound there is another
source) while a person connects from 127.0.0.1 with OpenSSH's `ssh -J` and lands in their pod.

Loopback only; every loop is bounded."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from tests.gateway.scenario import GatewayScenario

FLOODER = "127.0.0.2"


def _first_bytes(sock: socket.socket) -> bytes:
    """What the gateway sends first: its version line (admitted or busy), or nothing (dropped)."""
    try:
        return sock.recv(64)
    except ConnectionResetError:
        return b""


def test_one_address_holding_many_unauthenticated_connections_does_not_lock_others_out(
    scenario: GatewayScenario,
) -> None:
    """250 connections from one address that never authenticate (a scan, or a slowloris in the
    login grace), against a process limit of 150: before per-source limits all 250 were held and
    everyone else was told "gateway busy"."""
    gateway = scenario.open_for_alice(max_connections=150)
    flood: list[socket.socket] = []
    try:
        for _ in range(250):
            sock = socket.create_connection(
                ("127.0.0.1", gateway.port), timeout=30, source_address=(FLOODER, 0)
            )
            flood.append(sock)
        answered = [_first_bytes(sock) for sock in flood]  # every one seen by the gateway by now

        landed = scenario.ssh(scenario.alice, "login", "whoami")

        assert landed.returncode == 0, landed.stderr
        assert landed.stdout == "root\n"  # the stand-in pod's account: she is in
        share = 2 * gateway.settings.max_unauthenticated_per_source  # admitted, then told "busy"
        assert sum(line.startswith(b"SSH-2.0-") for line in answered) == share
        assert answered.count(b"") == 250 - share  # the rest closed without a handshake
        assert gateway.call(lambda: gateway.gateway.admission.held(FLOODER)) == (share, share)
    finally:
        for sock in flood:
            sock.close()


def test_one_address_opening_connections_fast_does_not_lock_others_out(scenario: GatewayScenario) -> None:
    """One address opens and closes connections as fast as it can, far above the process's rate
    (40/s here): before per-source limits it took every token and a person's connection was told
    "gateway busy"; now it gets its own rate and three logins in a row all land."""
    gateway = scenario.open_for_alice(max_new_per_second=40)
    stop = threading.Event()
    opened = [0]

    def flood() -> None:
        deadline = time.monotonic() + 120  # bounded, whatever happens to the test
        while not stop.is_set() and time.monotonic() < deadline and opened[0] < 200_000:
            with contextlib.suppress(OSError):
                socket.create_connection(
                    ("127.0.0.1", gateway.port), timeout=5, source_address=(FLOODER, 0)
                ).close()
            opened[0] += 1

    flooders = [threading.Thread(target=flood, daemon=True) for _ in range(2)]
    for thread in flooders:
        thread.start()
    try:
        waited = time.monotonic() + 60
        while opened[0] < 500 and time.monotonic() < waited:  # well past the process's 40 tokens
            time.sleep(0.05)
        assert opened[0] >= 500
        results = [scenario.ssh(scenario.alice, "login", "whoami") for _ in range(3)]
        flooded = opened[0]
    finally:
        stop.set()
        for thread in flooders:
            thread.join()

    for landed in results:
        assert landed.returncode == 0, landed.stderr
        assert landed.stdout == "root\n"
    assert flooded > 500  # the flood went on while she connected
