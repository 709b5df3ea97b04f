"""What SUP says a person may reach through the gateway, and the gateway's other calls to SUP.

The contract is SUP's /api/v1/gateway/* (docs/ssh-gateway.md): `GET routes/{username}` answers the
person's key fingerprints and login pods, or 404 for anyone who may not pass (unknown, inactive, not
provisioned, no pod: the gateway treats all of them as an empty key set, so every key fails the same
way). `RouteCache` keeps one answer per person for `route_cache_seconds`, so a burst of connections by
one person costs one request, and a suspension holds at the edge within that time.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from sup.domain.login_pods import PodRoute, RefusalReason

log = logging.getLogger(__name__)


def skip_absent_sniffio() -> None:
    """httpcore runs `import sniffio` several times per request; sniffio is not installed (anyio no
    longer needs it), and a failed import is not remembered, so each one searches sys.path again:
    about 0.1 ms each, some 0.6 ms of the gateway's CPU per call to SUP, a tenth of a connection's.
    A None in sys.modules makes that import fail at once, as it would anyway (httpcore then assumes
    asyncio, which this is). Nothing changes when sniffio is installed."""
    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


MAX_USERNAME = 256  # longer names are not asked about: nobody has one
BACKGROUND_CONNECTIONS = 20  # to SUP for events and heartbeats; lookups have a pool of their own
CACHE_ENTRIES = 10_000  # a scan with many names must not grow the cache without bound
SUP_REASONS = frozenset(reason.value for reason in RefusalReason)


class SupUnavailable(Exception):
    """SUP did not answer as the contract says (down, 5xx, a malformed body)."""


@dataclass(frozen=True)
class PersonRoute:
    username: str
    fingerprints: frozenset[str]
    pods: tuple[PodRoute, ...]  # own pod first
    # SHA256 fingerprints of the CAs whose certificates for this username SUP takes (ssh_ca); empty
    # from a SUP that signs none (or predates certificates)
    authorities: frozenset[str] = frozenset()

    def pod(self, name: str) -> PodRoute | None:
        return next((pod for pod in self.pods if pod.name == name), None)


@dataclass(frozen=True)
class NoRoute:
    """Nobody may pass as this username; `reason` (SUP's RefusalReason value) is for the audit call
    and the metrics, never for the client. `definite`: SUP itself said so (a 404 naming one of its
    reasons); a 404 from anything else (a proxy, a wrong path) refuses a login all the same but never
    cuts a held tunnel (recheck.py)."""

    reason: str
    definite: bool = True


Lookup = PersonRoute | NoRoute


class GatewayApi(Protocol):
    async def route(self, username: str) -> Lookup: ...
    async def wake(self, pod: PodRoute) -> None: ...
    async def used(self, pod: PodRoute) -> bool: ...
    async def event(self, body: dict[str, Any]) -> None: ...
    async def heartbeat(self, body: dict[str, Any]) -> None: ...
    async def awake(self) -> list[PodRoute]: ...


def _pod(pod: Any, *, awake: bool) -> PodRoute:
    """One pod of a routes or awake answer (KeyError, TypeError, ValueError if malformed)."""
    return PodRoute(
        name=str(pod["name"]),
        kind="group" if pod["kind"] == "group" else "user",
        owner=str(pod["owner"]),
        service=str(pod["service"]),
        namespace=str(pod["namespace"]),
        port=int(pod["port"]),
        awake=awake,
    )


def parse_route(body: Any) -> PersonRoute:
    """The 200 body of the routes endpoint; SupUnavailable if it is not the contract's shape."""
    try:
        pods = tuple(_pod(pod, awake=bool(pod["awake"])) for pod in body["pods"])
        authorities = frozenset(str(f) for f in body.get("certificate_authorities", ()))
        fingerprints = frozenset(str(f) for f in body["fingerprints"])
        return PersonRoute(str(body["username"]), fingerprints, pods, authorities)
    except (KeyError, TypeError, ValueError) as exc:
        raise SupUnavailable(f"routes answer malformed: {type(exc).__name__}") from None


def parse_awake(body: Any) -> list[PodRoute]:
    """The 200 body of the awake endpoint (`port`: the idle reporter's); SupUnavailable if malformed."""
    try:
        return [_pod(pod, awake=True) for pod in body]
    except (KeyError, TypeError, ValueError) as exc:
        raise SupUnavailable(f"awake answer malformed: {type(exc).__name__}") from None


def tls_context(ca_file: str) -> ssl.SSLContext:
    """How an https sup_url is checked with gateway.sup_ca_file (e.g. the in-cluster CA that signed
    the certificate of SUP's TLS terminator): verified, chain and host name, against that CA only.
    OSError or ssl.SSLError for a file that cannot be read or holds no certificate."""
    return ssl.create_default_context(cafile=ca_file)


class SupApi:
    """SUP's gateway endpoints over HTTP(S), with a bearer token of role `gateway` (never logged)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10,
        transport: httpx.AsyncBaseTransport | None = None,
        ca_file: str | None = None,
    ) -> None:
        skip_absent_sniffio()
        options: dict[str, Any] = {
            "base_url": base_url.rstrip("/") + "/api/v1/gateway",
            "headers": {"Authorization": f"Bearer {token}"},
            "timeout": timeout,
            "transport": transport,
            "verify": tls_context(ca_file) if ca_file else True,  # True: httpx's CA bundle
        }
        # Two pools: route lookups and wakes (a person waits on them) never queue behind the audit
        # events and heartbeats posted in the background, of which a burst of logins to a slow SUP
        # would otherwise hold every connection (seen in bench/gateway_bench.py beyond capacity:
        # route lookups timed out waiting for the pool and people with good keys were refused).
        self._client = httpx.AsyncClient(**options)
        self._background = httpx.AsyncClient(
            **options, limits=httpx.Limits(max_connections=BACKGROUND_CONNECTIONS)
        )

    async def close(self) -> None:
        await self._client.aclose()
        await self._background.aclose()

    async def _send(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, background: bool = False
    ) -> httpx.Response:
        client = self._background if background else self._client
        try:
            return await client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise SupUnavailable(f"{method} {path}: {type(exc).__name__}") from None

    async def route(self, username: str) -> Lookup:
        if not username or len(username) > MAX_USERNAME:
            return NoRoute("unknown")
        response = await self._send("GET", f"/routes/{quote(username, safe='')}")
        if response.status_code == 404:
            try:
                reason = response.json().get("reason")
            except (ValueError, AttributeError):
                reason = None
            if reason in SUP_REASONS:
                return NoRoute(str(reason))
            return NoRoute("unknown", definite=False)
        return parse_route(_json(response, "routes"))

    async def wake(self, pod: PodRoute) -> None:
        response = await self._send("POST", "/wake", {"kind": pod.kind, "name": pod.owner})
        if response.status_code != 200:
            raise SupUnavailable(f"wake answered {response.status_code}")

    async def used(self, pod: PodRoute) -> bool:
        """SUP stamps the pod in use; False if it is asleep. An older SUP without the endpoint (404):
        True, as before it (the heartbeat's `used` still tells it)."""
        response = await self._send("POST", "/used", {"kind": pod.kind, "name": pod.owner})
        if response.status_code == 404:
            return True
        body = _json(response, "used")
        if not isinstance(body, dict) or not isinstance(body.get("awake"), bool):
            raise SupUnavailable("used answer malformed")
        return bool(body["awake"])

    async def event(self, body: dict[str, Any]) -> None:
        response = await self._send("POST", "/events", body, background=True)
        if response.status_code >= 300:
            raise SupUnavailable(f"events answered {response.status_code}")

    async def heartbeat(self, body: dict[str, Any]) -> None:
        response = await self._send("POST", "/heartbeat", body, background=True)
        if response.status_code == 422 and "used" in body:  # a SUP older than `used` (a rollout)
            older = {key: value for key, value in body.items() if key != "used"}
            response = await self._send("POST", "/heartbeat", older, background=True)
        if response.status_code >= 300:
            raise SupUnavailable(f"heartbeat answered {response.status_code}")

    async def awake(self) -> list[PodRoute]:
        return parse_awake(_json(await self._send("GET", "/awake"), "awake"))


def _json(response: httpx.Response, endpoint: str) -> Any:
    """The body of a 200 answer; SupUnavailable for another status or a body that is not JSON."""
    if response.status_code != 200:
        raise SupUnavailable(f"{endpoint} answered {response.status_code}")
    try:
        return response.json()
    except ValueError:
        raise SupUnavailable(f"{endpoint} answer is not JSON") from None


class RouteCache:
    """One route lookup per person per `seconds`; concurrent lookups of one name share one request.

    A failed lookup (SupUnavailable) is not cached: the next connection asks again."""

    def __init__(
        self,
        fetch: Callable[[str], Awaitable[Lookup]],
        seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = CACHE_ENTRIES,
    ) -> None:
        self._fetch = fetch
        self._seconds = seconds
        self._clock = clock
        self._max_entries = max_entries
        self._entries: dict[str, tuple[float, Lookup]] = {}
        self._pending: dict[str, asyncio.Future[Lookup]] = {}

    async def get(self, username: str) -> Lookup:
        now = self._clock()
        entry = self._entries.get(username)
        if entry is not None and entry[0] > now:
            return entry[1]
        pending = self._pending.get(username)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Lookup] = asyncio.get_running_loop().create_future()
        self._pending[username] = future
        try:
            result = await self._fetch(username)
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here: waiters get it too, no "never retrieved" warning
            raise
        except BaseException:
            future.cancel()
            raise
        finally:
            del self._pending[username]
        future.set_result(result)
        self._store(username, result)
        return result

    def forget(self, username: str) -> None:
        """Drop one person's answer (after a wake: the next connection must see the pod awake)."""
        self._entries.pop(username, None)

    def _store(self, username: str, result: Lookup) -> None:
        if self._seconds <= 0:
            return
        now = self._clock()
        if len(self._entries) >= self._max_entries:
            self._entries = {name: entry for name, entry in self._entries.items() if entry[0] > now}
            if len(self._entries) >= self._max_entries:
                self._entries.pop(next(iter(self._entries)))
        self._entries[username] = (now + self._seconds, result)
