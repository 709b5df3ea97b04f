"""One SSH connection to the gateway, from arrival to close (docs/ssh-gateway.md, "The flow of one
connection").

Publickey only. The person's route is asked for at `begin_auth`; a username SUP will not route has
an empty key set, so every key fails the same way whoever asks. Nothing is touched before the
signature is verified (`auth_completed`) except the optional wake banner. After that, only
`direct-tcpip` opens to a pod of the route (by name, never by the client's address) are served;
session channels get the help text and exit status 1; every forwarding request on this outer
connection is refused (asyncssh refuses them unless we accept)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import asyncssh

from sup.domain.login_pods import PodRoute
from sup.gateway import metrics, texts
from sup.gateway.activity import in_use
from sup.gateway.limits import Verdict, source_key
from sup.gateway.recheck import HeldTunnel
from sup.gateway.relay import Tunnel, connect_pod
from sup.gateway.routes import NoRoute, PersonRoute, SupUnavailable

if TYPE_CHECKING:
    from sup.gateway.server import Gateway

STALE_AWAKE_SECONDS = 3.0  # a pod said awake that does not answer this long is woken
log = logging.getLogger(__name__)


class HelpSession(asyncssh.SSHServerSession[str]):
    """A session channel (a shell or a command on the gateway itself): the help text, exit status 1."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._chan: asyncssh.SSHServerChannel[str] | None = None

    def connection_made(self, chan: asyncssh.SSHServerChannel[str]) -> None:
        self._chan = chan

    def pty_requested(self, term_type: str, term_size: Any, term_modes: Any) -> bool:
        return True

    def shell_requested(self) -> bool:
        return True

    def exec_requested(self, command: str) -> bool:
        return True

    def session_started(self) -> None:
        assert self._chan is not None
        self._chan.write_stderr(self._text)
        self._chan.exit(1)


def disconnect_first(conn: asyncssh.SSHServerConnection, reason: str) -> None:
    """Disconnect with `reason` sent before anything else. asyncssh's `disconnect()` closes the
    channels first, and OpenSSH's `ssh -W` (the jump of `ssh -J`) exits at its channel's close
    without reading further, so the person would never see why. This sends the message the way
    asyncssh itself does for a DisconnectError raised while it handles a packet (the "busy"
    refusal): the packet, then the connection closed at once."""
    send = getattr(conn, "_send_disconnect", None)  # asyncssh 2.x; without it, the public way
    if send is None:
        conn.disconnect(asyncssh.DISC_BY_APPLICATION, reason)
        return
    send(asyncssh.DISC_BY_APPLICATION, reason, asyncssh.DEFAULT_LANG)
    conn.abort()


class GatewayConnection(asyncssh.SSHServer):
    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._conn: asyncssh.SSHServerConnection | None = None
        self.source = "?"
        self._source_host = "?"
        self._source_key = "?"
        self._verdict = Verdict.ADMIT
        self.username: str | None = None
        self._lookup: PersonRoute | NoRoute | None = None
        self._tried: set[str] = set()
        self.fingerprint: str | None = None  # the key that authenticated, or the last one offered
        self.authenticated = False
        self._bannered = False
        self._tunnels: set[Tunnel] = set()

    # -- arrival and close -------------------------------------------------------------------------

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        peer = conn.get_extra_info("peername") or ("?", 0)
        self._source_host = str(peer[0])
        self.source = f"{peer[0]}:{peer[1]}"
        self._source_key = source_key(self._source_host, self._gateway.settings.source_ipv6_prefix)
        self._verdict = self._gateway.admission.arrive(self._source_key, time.monotonic())
        if self._verdict is Verdict.DROP:
            metrics.CONNECTIONS.labels("dropped").inc()
            conn.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._verdict is Verdict.DROP:
            return
        for tunnel in list(self._tunnels):  # also those whose channel never got confirmed
            tunnel.close()
        self._gateway.admission.leave(self._source_key, time.monotonic(), authenticated=self.authenticated)
        if self._verdict is Verdict.BUSY:
            return
        if not self.authenticated and self.username is not None:
            reason = self._lookup.reason if isinstance(self._lookup, NoRoute) else "wrong_key"
            self._refused(reason)

    # -- authentication ----------------------------------------------------------------------------

    async def begin_auth(self, username: str) -> bool:
        if self._verdict is Verdict.BUSY:
            metrics.CONNECTIONS.labels("busy").inc()
            raise asyncssh.DisconnectError(asyncssh.DISC_TOO_MANY_CONNECTIONS, texts.BUSY)
        self.username = username
        try:
            self._lookup = await self._gateway.routes.get(username)
        except SupUnavailable as exc:
            log.warning("route lookup failed, refusing the login: %s", exc)
            self._lookup = NoRoute("sup_unavailable")
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        fingerprint = self._trying(key)
        lookup = self._lookup
        if not isinstance(lookup, PersonRoute) or fingerprint not in lookup.fingerprints:
            return False
        self._banner(lookup)
        return True

    def validate_ca_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        """A certificate signed by `key`: taken when SUP names `key` one of the CAs it trusts for this
        person (so a suspended or unknown person's certificates are refused with their routes).
        asyncssh itself checks the rest: a user certificate, `username` among its principals, valid
        now, the source-address option; the client proves it holds the certified key."""
        fingerprint = self._trying(key, certificate=True)
        lookup = self._lookup
        if not isinstance(lookup, PersonRoute) or fingerprint not in lookup.authorities:
            return False
        self._banner(lookup)
        return True

    def _trying(self, key: asyncssh.SSHKey, *, certificate: bool = False) -> str:
        """Count a key (or a CA's certificate) offered, and remember the first for the audit event
        (a certificate as `cert:` + its CA's fingerprint); too many: disconnect."""
        fingerprint: str = key.get_fingerprint("sha256")
        self._tried.add(("cert:" if certificate else "") + fingerprint)
        if not self.authenticated:
            self.fingerprint = ("cert:" if certificate else "") + fingerprint
        if len(self._tried) > self._gateway.settings.max_auth_tries:
            raise asyncssh.DisconnectError(asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE, texts.TOO_MANY_KEYS)
        return fingerprint

    def _banner(self, lookup: PersonRoute) -> None:
        if (
            self._gateway.settings.wake_banner
            and not self._bannered
            and lookup.pods
            and not lookup.pods[0].awake
        ):
            self._bannered = True  # asyncssh asks twice per key (the query, then the signed request)
            assert self._conn is not None
            self._conn.send_auth_banner(texts.WAKE_BANNER)

    def auth_completed(self) -> None:
        self.authenticated = True
        self._gateway.admission.authenticated(self._source_key)
        metrics.CONNECTIONS.labels("ok").inc()
        self._gateway.event("login", self, reason=None, pod=None)

    def _refused(self, reason: str, pod: str | None = None) -> None:
        metrics.REFUSALS.labels(reason).inc()
        if pod is None:
            metrics.CONNECTIONS.labels("refused").inc()
        if self._gateway.budget.allow(self._source_host, time.monotonic()):
            self._gateway.event("refused", self, reason=reason, pod=pod)

    # -- channels ----------------------------------------------------------------------------------

    def session_requested(self) -> HelpSession:
        return HelpSession(texts.help_text(self.username or "you", self._gateway.settings.public_host))

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> Any:
        lookup = self._lookup
        pod = lookup.pod(dest_host) if isinstance(lookup, PersonRoute) else None
        if pod is None or self.username is None:
            self._refused("no_such_pod", pod=texts.printable(dest_host))
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, texts.no_such_pod(dest_host)
            )
        if not self._gateway.sessions.acquire(self.username):
            self._refused("too_many_sessions", pod=pod.name)
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_RESOURCE_SHORTAGE, texts.too_many_sessions(self._gateway.sessions.limit)
            )
        return self._open(pod, self.username)

    async def _open(self, pod: PodRoute, username: str) -> Tunnel:
        gateway = self._gateway
        try:
            started = time.monotonic()
            timeout = gateway.settings.wake_timeout_seconds
            current = await self._current(pod, username)
            deadline = started + timeout
            host, port = gateway.address(current)
            # awake: SUP stamps it in use before the relay starts (or says a sleep came first)
            woke = not current.awake or not await in_use(gateway.api, current)
            if woke:
                await self._wake(current, username)
                side = await connect_pod(host, port, deadline, timeout)
            else:
                try:
                    first = min(deadline, time.monotonic() + STALE_AWAKE_SECONDS)
                    side = await connect_pod(host, port, first, timeout)
                except asyncssh.ChannelOpenError:
                    # The route said awake (cached for route_cache_seconds, or a sleep raced it) but
                    # nothing answers: ask SUP to wake it (a read when it is up) and wait as for a
                    # sleeping pod.
                    woke = True
                    await self._wake(current, username)
                    side = await connect_pod(host, port, deadline, timeout)
        except BaseException:
            gateway.sessions.release(username)
            raise
        elapsed = time.monotonic() - started
        metrics.CONNECT_SECONDS.observe(elapsed)
        if woke:
            metrics.WAKE_SECONDS.observe(elapsed)
        ticket: int | None = None
        held: HeldTunnel | None = None

        def closed() -> None:
            gateway.sessions.release(username)
            if ticket is not None:
                gateway.tunnel_closed(ticket)
            if held is not None:
                gateway.recheck.release(held)
            self._tunnels.discard(tunnel)

        tunnel = Tunnel(side, closed)
        self._tunnels.add(tunnel)
        ticket = gateway.tunnel_opened(current, username, self.source, tunnel.buffered)
        held = gateway.recheck.hold(
            username, current.name, lambda reason: self._cut(tunnel, current.name, reason)
        )
        return tunnel

    def _cut(self, tunnel: Tunnel, pod: str, reason: str) -> None:
        """SUP says this person may no longer reach `pod` (recheck.py): close the tunnel, and a
        connection left with none is disconnected with a reason OpenSSH prints on the person's
        terminal (nothing can be written into the tunnel: it carries their own SSH connection)."""
        if tunnel not in self._tunnels:
            return
        metrics.CUTS.labels(reason).inc()
        self._gateway.event("cut", self, reason=reason, pod=pod)
        if self._tunnels == {tunnel} and self._conn is not None:
            disconnect_first(self._conn, texts.access_removed(pod))
        tunnel.close()

    async def _wake(self, pod: PodRoute, username: str) -> None:
        try:
            await self._gateway.api.wake(pod)
        except SupUnavailable as exc:
            log.warning("waking %s %s failed: %s", pod.kind, pod.owner, exc)
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, texts.cannot_wake()) from None
        self._gateway.routes.forget(username)

    async def _current(self, pod: PodRoute, username: str) -> PodRoute:
        """The pod as SUP sees it now (awake or not), within the route cache's time. A person
        suspended, or no longer a member, since this connection logged in opens no new tunnel."""
        try:
            lookup = await self._gateway.routes.get(username)
        except SupUnavailable:
            return pod  # SUP unreachable: the route this connection logged in with still holds
        fresh = lookup.pod(pod.name) if isinstance(lookup, PersonRoute) else None
        if fresh is None:
            self._refused("no_such_pod", pod=pod.name)
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, texts.no_such_pod(pod.name)
            )
        return fresh
