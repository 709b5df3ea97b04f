"""The listening gateway: host key, the state its connections share, heartbeats to SUP.

`Gateway(settings, api, host_key)` then `await gateway.start()`; `await gateway.close()` stops
accepting, closes the connections, the heartbeat and the idle reporters' poll (idle_poll.py). Where
a pod is reached is pluggable (`address`): by default `gateway.pod_address` filled in with the
route's Service and namespace, and the route's port (an idle reporter: the awake answer's port)."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import asyncssh

from sup.config.gateway import GatewaySettings
from sup.domain.login_pods import PodRoute
from sup.gateway import metrics
from sup.gateway.activity import Activity, used_body
from sup.gateway.connection import GatewayConnection
from sup.gateway.idle_poll import IdlePoller
from sup.gateway.limits import Admission, EventBudget, SessionCounts, SourceLimits
from sup.gateway.recheck import RouteRecheck
from sup.gateway.routes import GatewayApi, RouteCache, SupUnavailable

log = logging.getLogger(__name__)

PodAddress = Callable[[PodRoute], tuple[str, int]]
REFUSED_EVENTS_PER_MINUTE = 20  # per source address


def template_address(template: str) -> PodAddress:
    """`gateway.pod_address` ("{service}.{namespace}.svc") filled in; the port is the route's."""

    def address(pod: PodRoute) -> tuple[str, int]:
        host = template.format(service=pod.service, namespace=pod.namespace, name=pod.name, kind=pod.kind)
        return host, pod.port

    return address


def read_host_key(path: str) -> asyncssh.SSHKey:
    try:
        return asyncssh.read_private_key(path)
    except (OSError, ValueError, asyncssh.KeyImportError) as exc:
        raise ValueError(f"cannot read the gateway's host key {path}: {type(exc).__name__}") from None


@dataclass(frozen=True)
class OpenTunnel:
    pod: PodRoute
    username: str
    source: str
    since: dt.datetime
    buffered: Callable[[], int]


class Gateway:
    def __init__(
        self,
        settings: GatewaySettings,
        api: GatewayApi,
        host_key: asyncssh.SSHKey,
        *,
        address: PodAddress | None = None,
        replica: str | None = None,
    ) -> None:
        self.settings = settings
        self.api = api
        self.address = address or template_address(settings.pod_address)
        self.replica = replica or f"{socket.gethostname()}-{os.getpid()}"
        self.routes = RouteCache(api.route, settings.route_cache_seconds)
        self.recheck = RouteRecheck(self.routes.get)  # held tunnels whose route is gone are cut
        self.admission = Admission(
            settings.max_connections,
            settings.max_new_per_second,
            time.monotonic(),
            SourceLimits(
                settings.max_connections_per_source,
                settings.max_unauthenticated_per_source,
                settings.max_new_per_second_per_source,
                settings.new_burst_per_source,
            ),
        )
        self.sessions = SessionCounts(settings.max_sessions_per_person)
        self.budget = EventBudget(REFUSED_EVENTS_PER_MINUTE)
        self.tunnels: dict[int, OpenTunnel] = {}
        self.activity = Activity()  # tunnel opens and closes for the heartbeat's `used`
        self._host_key = host_key
        self._ids = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._polling: asyncio.Task[None] | None = None
        self.idle = IdlePoller(api.awake, self.address, self.held_pods)
        metrics.RELAY_BUFFERED.set_function(self.buffered_bytes)  # one Gateway per process

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(
        self, host: str | None = None, port: int | None = None, sock: socket.socket | None = None
    ) -> int:
        """Listen (host and port default to the settings; port 0 picks a free one), or accept on an
        inherited listening `sock` (`sup gateway` with workers); the port."""
        settings = self.settings
        self._acceptor = await asyncssh.listen(
            None if sock is not None else settings.listen_host if host is None else host,
            None if sock is not None else settings.listen_port if port is None else port,
            sock=sock,
            server_factory=lambda: GatewayConnection(self),
            server_host_keys=[self._host_key],
            public_key_auth=True,
            password_auth=False,
            kbdint_auth=False,
            host_based_auth=False,
            gss_host=None,
            allow_scp=False,
            agent_forwarding=False,
            x11_forwarding=False,
            login_timeout=settings.login_grace_seconds,
            reuse_port=True,
            backlog=1024,
        )
        self._heartbeat = asyncio.create_task(self._beat())
        self._polling = asyncio.create_task(self.idle.run(settings.heartbeat_seconds))
        self.spawn(self.recheck.run(settings.route_recheck_seconds))  # cancelled by close()
        return int(self._acceptor.sockets[0].getsockname()[1])

    async def close(self) -> None:
        for task in (self._heartbeat, self._polling):
            if task is not None:
                task.cancel()
        await self.idle.close()
        if self._acceptor is not None:
            self._acceptor.close()
            await self._acceptor.wait_closed()
        for task in list(self._tasks):
            task.cancel()

    # -- what the connections report ---------------------------------------------------------------

    def tunnel_opened(self, pod: PodRoute, username: str, source: str, buffered: Callable[[], int]) -> int:
        ticket = next(self._ids)
        now = dt.datetime.now(dt.UTC)
        self.tunnels[ticket] = OpenTunnel(pod, username, source, now, buffered)
        self.activity.note((pod.kind, pod.owner), now)
        metrics.SESSIONS.inc()
        return ticket

    def held_pods(self) -> set[tuple[str, str]]:
        """The pods (kind, owner) this replica holds a session to: their reporters need no asking."""
        return {(tunnel.pod.kind, tunnel.pod.owner) for tunnel in self.tunnels.values()}

    def buffered_bytes(self) -> int:
        """Bytes the relay holds now, all tunnels together."""
        return sum(tunnel.buffered() for tunnel in self.tunnels.values())

    def tunnel_closed(self, ticket: int) -> None:
        tunnel = self.tunnels.pop(ticket, None)
        if tunnel is not None:
            metrics.SESSIONS.dec()
            self.activity.note((tunnel.pod.kind, tunnel.pod.owner), dt.datetime.now(dt.UTC))

    def event(self, kind: str, connection: GatewayConnection, *, reason: str | None, pod: str | None) -> None:
        """Post a login or refusal to SUP's audit log, in the background (a slow SUP never holds a
        connection). Only the fingerprint of a key, never the key."""
        body = {
            "event": kind,
            "username": connection.username or "",
            "fingerprint": connection.fingerprint,
            "source": connection.source,
            "reason": reason,
            "pod": pod,
        }
        self.spawn(self._post_event(body))

    async def _post_event(self, body: dict[str, Any]) -> None:
        try:
            await self.api.event(body)
        except SupUnavailable as exc:
            log.warning("gateway event not recorded: %s", exc)

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- heartbeats --------------------------------------------------------------------------------

    def used_report(self) -> dict[tuple[str, str], dt.datetime]:
        """The pods this replica used since SUP's last accepted heartbeat (activity.py)."""
        return self.activity.report(self.held_pods(), dt.datetime.now(dt.UTC))

    def heartbeat_body(self, used: dict[tuple[str, str], dt.datetime] | None = None) -> dict[str, Any]:
        return {
            "gateway": self.replica,
            "sessions": [
                {
                    "kind": tunnel.pod.kind,
                    "name": tunnel.pod.owner,
                    "username": tunnel.username,
                    "since": tunnel.since.isoformat().replace("+00:00", "Z"),
                    "source": tunnel.source,
                }
                for tunnel in self.tunnels.values()
            ],
            "busy": self.idle.busy(),  # what the idle reporters of the pods near sleep said
            "used": used_body(self.used_report() if used is None else used),
        }

    async def _beat(self) -> None:
        while True:
            used = self.used_report()
            try:
                await self.api.heartbeat(self.heartbeat_body(used))
                self.activity.delivered(used)
            except SupUnavailable as exc:
                log.warning("heartbeat not delivered: %s", exc)
            await asyncio.sleep(self.settings.heartbeat_seconds)
