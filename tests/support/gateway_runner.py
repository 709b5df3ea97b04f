"""`sup gateway`'s server run in process, on its own event loop in a thread, for the tests."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import asyncssh

from sup.config.gateway import GatewaySettings
from sup.gateway import Gateway, PodRoute, SupApi
from tests.support.gateway_api import TOKEN

T = TypeVar("T")


def loopback(pod: PodRoute) -> tuple[str, int]:
    """Every pod on 127.0.0.1 at the route's port (the stand-in pods' sshd)."""
    return "127.0.0.1", pod.port


def write_host_key(path: Path) -> Path:
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(path))
    return path


def resolving(loop: asyncio.AbstractEventLoop, resolve: Callable[[str], list[str]]) -> None:
    """Make `loop` resolve names ending in `.svc` with `resolve` (in a thread: it may block), a
    name with no address, or no answer, failing as the system's resolver fails (socket.gaierror, an
    OSError, which the gateway retries), for asyncio's connections and httpx's (anyio asks the
    running loop)."""
    system = loop.getaddrinfo

    async def getaddrinfo(
        host: bytes | str | None, port: bytes | str | int | None, *, family: int = 0, type: int = 0,
        proto: int = 0, flags: int = 0,
    ) -> list[tuple[Any, ...]]:  # fmt: skip
        name = host.decode() if isinstance(host, bytes) else host
        if name is None or not name.rstrip(".").endswith(".svc"):
            return await system(host, port, family=family, type=type, proto=proto, flags=flags)
        try:
            addresses = await loop.run_in_executor(None, resolve, name)
        except Exception as exc:  # the DNS server did not answer: as the system's EAI_AGAIN
            raise socket.gaierror(socket.EAI_AGAIN, f"{name}: {exc!r}") from None
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: no address in the cluster's DNS")
        number = int(port) if port is not None else 0
        kind = type or socket.SOCK_STREAM
        return [(socket.AF_INET, kind, proto, "", (address, number)) for address in addresses]

    loop.getaddrinfo = getaddrinfo  # type: ignore[method-assign]


class RunningGateway:
    def __init__(
        self,
        api_url: str,
        host_key: Path,
        *,
        token: str = TOKEN,
        address: Callable[[PodRoute], tuple[str, int]] | None = loopback,
        resolve: Callable[[str], list[str]] | None = None,
        port: int = 0,
        **settings: Any,
    ) -> None:
        """`token`: SUP's gateway token (the stand-in's by default); `address`: where a route's pod
        is reached (by default 127.0.0.1 at the route's port; None: the gateway's own,
        `gateway.pod_address` with the route's port). `resolve`: how the gateway's loop resolves
        names ending in `.svc` (the host does not use the cluster's DNS: e.g.
        `KubeCluster.resolve`), so that the gateway looks a pod's name up at each connection
        attempt, as in a pod; other names as the host resolves them. `port`: where it listens on
        127.0.0.1 (0: a free one, in `self.port`)."""
        self.settings = GatewaySettings(**{"heartbeat_seconds": 1, "metrics_port": None, **settings})
        self._loop = asyncio.new_event_loop()
        if resolve is not None:
            resolving(self._loop, resolve)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.api = self.call(lambda: SupApi(api_url, token))
        self.sent: list[dict[str, Any]] = []  # heartbeats SUP accepted
        heartbeat = self.api.heartbeat

        async def recorded(body: dict[str, Any]) -> None:
            await heartbeat(body)
            self.sent.append(body)

        self.api.heartbeat = recorded  # type: ignore[method-assign]
        key = asyncssh.read_private_key(str(host_key))
        self.gateway: Gateway = self.call(lambda: Gateway(self.settings, self.api, key, address=address))
        self.port: int = self._run(self.gateway.start("127.0.0.1", port))

    def _run(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=60)

    def call(self, fn: Callable[[], T]) -> T:
        """`fn()` on the gateway's loop (its state is not thread-safe)."""

        async def run() -> T:
            return fn()

        result: T = self._run(run())
        return result

    def heartbeats(self) -> list[dict[str, Any]]:
        """The heartbeats SUP has accepted from this gateway, oldest first."""
        return self.call(lambda: list(self.sent))

    def tunnels(self) -> int:
        return self.call(lambda: len(self.gateway.tunnels))

    def open_connections(self) -> int:
        return self.call(lambda: self.gateway.admission.open)

    def stop(self) -> None:
        self._run(self.gateway.close())
        self._run(self.api.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
