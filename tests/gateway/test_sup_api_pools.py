"""The gateway's calls to SUP over a real loopback HTTP connection: a SUP that is slow to take audit
events must not hold up the route lookups logins wait on (bench/gateway_bench.py beyond capacity saw
people with good keys refused when the events held every pooled connection)."""

from __future__ import annotations

import asyncio
import contextlib
import json

from sup.gateway import PersonRoute, SupApi

ROUTE = {
    "username": "alice",
    "fingerprints": ["SHA256:abc"],
    "pods": [
        {
            "name": "login",
            "kind": "user",
            "owner": "alice",
            "service": "login-k1",
            "namespace": "ns",
            "port": 22,
            "awake": True,
        }
    ],
}
EVENTS = (
    300  # 100 in httpx's default pool, the rest queued for it ahead of the lookup (each waits its timeout)
)


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers routes at once (keep-alive); never answers an event."""
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            path = head.split(" ", 2)[1]
            length = next(
                (
                    int(line.split(":", 1)[1])
                    for line in head.split("\r\n")
                    if line.lower().startswith("content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            if path.endswith("/events"):
                await asyncio.sleep(3600)
            body = json.dumps(ROUTE).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()


def test_route_lookups_do_not_wait_behind_unanswered_events() -> None:
    async def run() -> object:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        api = SupApi(f"http://127.0.0.1:{port}", "secret-token", timeout=2)
        events = [asyncio.create_task(api.event({"event": "login"})) for _ in range(EVENTS)]
        await asyncio.sleep(0.2)  # the events have taken what connections they can
        try:
            return await api.route("alice")
        finally:
            for task in events:
                task.cancel()
            await asyncio.gather(*events, return_exceptions=True)
            await api.close()
            server.close()

    lookup = asyncio.run(run())
    assert isinstance(lookup, PersonRoute) and lookup.username == "alice"
