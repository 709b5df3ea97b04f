"""ASGI middleware: request ids, the request-body size limit, the write rate limit, and HTTP metrics.

Written as plain ASGI (not BaseHTTPMiddleware) so that streaming bodies are counted as they arrive:
a body over the limit is refused with 413 before it is all read, whether or not it has a
Content-Length.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Mapping

from prometheus_client import Counter, Histogram
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sup.api.oidc import VERIFIED_OIDC, OidcVerifier, looks_like_jwt, verified_or_none
from sup.api.ratelimit import (
    ClientLimiter,
    address_key,
    bearer_secret,
    oidc_client_key,
    retry_after_seconds,
    token_key,
)
from sup.api.token_cache import TokenCache
from sup.config import RateLimit
from sup.domain.tokens import hash_token, may_be_token
from sup.logs import request_id_var

_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

HTTP_REQUESTS = Counter("sup_http_requests_total", "HTTP requests answered", ["method", "route", "status"])
HTTP_DURATION = Histogram(
    "sup_http_request_duration_seconds", "Time to answer an HTTP request", ["method", "route"]
)


class RequestIdMiddleware:
    """Take a safe X-Request-ID from the client or make one; echo it and keep it in request.state."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers", [])).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _SAFE_REQUEST_ID.fullmatch(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        token = request_id_var.set(request_id)  # every log record of this request carries it

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode()))
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id_var.reset(token)


ErrorRenderer = Callable[[int, str], Response]
"""Renders an error a middleware answers by itself (status, detail) the way one API's clients expect."""


class BodyLimitMiddleware:
    """413 for a body over `max_bytes`. The answer is problem+json, or what `error_renderers` gives
    for the longest path prefix it names (the composition root registers SCIM's Error bodies for
    /scim/v2, RFC 7644 §3.12): this layer knows no API above it."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, error_renderers: Mapping[str, ErrorRenderer] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        # Longest prefix first, so that a more specific registration wins.
        self.error_renderers = sorted((error_renderers or {}).items(), key=lambda item: -len(item[0]))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"the request body is larger than {self.max_bytes} bytes"
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._send_413(scope, send, too_large)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # Raised inside the handler's body read; FastAPI lets HTTPException through.
                    raise HTTPException(413, too_large)
            return message

        await self.app(scope, counting_receive, send)

    async def _send_413(self, scope: Scope, send: Send, detail: str) -> None:
        from sup.api.errors import problem  # local: errors imports models, keep this module light

        path = str(scope.get("path", ""))
        render = next((r for prefix, r in self.error_renderers if path.startswith(prefix)), None)
        response: Response
        if render is not None:
            response = render(413, detail)
        else:
            response = problem(None, 413, detail, request_id=scope.get("state", {}).get("request_id"))
        await response(scope, _no_body, send)


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RATE_LIMITED = Counter("sup_http_rate_limited_total", "Requests refused with 429 by a rate limit", ["api"])


class WriteRateLimitMiddleware:
    """A token bucket per client for writes under `prefix` (the admin API): 429 + Retry-After past it.

    Applied before the route's authentication, so a flood of writes with bad tokens is refused
    without running any route. The client is its bearer token's identity when the token verifies (a
    known, unexpired SUP token's SHA-256, never the secret itself; an OIDC token's issuer and
    subject), else its address: every made-up token from one address shares that address's bucket
    (sup/api/ratelimit.py). SCIM (/scim/v2) has its own limiter per connection, with SCIM error
    bodies (sup/scim/router.py).
    """

    def __init__(
        self,
        app: ASGIApp,
        limit: RateLimit,
        prefix: str,
        *,
        setting: str = "api.rate_limit",
        exclude: str | None = None,
        api: str = "admin",
        what: str = "writes",
    ) -> None:
        """`setting`: the limit's settings key, named in the 429; `exclude`: a path prefix under
        `prefix` that another instance limits (the SSH gateway's endpoints have their own); `api`:
        the label of sup_http_rate_limited_total; `what`: what the 429 says there were too many of."""
        self.app = app
        self.prefix = prefix
        self.exclude = exclude
        self.setting = setting
        self.api = api
        self.what = what
        self.limiter = ClientLimiter(limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in WRITE_METHODS
            or not str(scope.get("path", "")).startswith(self.prefix)
            or (self.exclude is not None and str(scope.get("path", "")).startswith(self.exclude))
        ):
            await self.app(scope, receive, send)
            return
        key, verified = await _client_key(scope)
        wait = self.limiter.acquire(key, verified=verified)
        if wait <= 0:
            await self.app(scope, receive, send)
            return
        from sup.api.errors import problem  # local: errors imports models, keep this module light

        RATE_LIMITED.labels(self.api).inc()
        seconds = retry_after_seconds(wait)
        response = problem(
            None,
            429,
            f"too many {self.what} from this client ({self.setting}: {self.limiter.rate:g} per second, "
            f"burst {self.limiter.burst:g}); retry after {seconds} s",
            headers={"Retry-After": str(seconds)},
            request_id=scope.get("state", {}).get("request_id"),
        )
        await response(scope, _no_body, send)


async def _client_key(scope: Scope) -> tuple[str, bool]:
    """Who is writing, as sup/api/ratelimit.py says, and whether their credentials verified."""
    authorization = dict(scope.get("headers", [])).get(b"authorization", b"").decode("latin-1")
    secret = bearer_secret(authorization)
    client = scope.get("client")
    address = address_key(str(client[0]) if client else "?")
    state = getattr(scope.get("app"), "state", None)
    verifier = getattr(state, "oidc", None)
    if secret is not None and isinstance(verifier, OidcVerifier) and looks_like_jwt(secret):
        identity = await run_in_threadpool(verified_or_none, verifier, secret)
        if identity is None:
            return address, False
        scope.setdefault("state", {})[VERIFIED_OIDC] = (secret, identity)  # auth takes it from here
        return oidc_client_key(verifier.settings.issuer, identity), True
    if secret is not None and may_be_token(secret) and await _known_token(state, secret):
        return token_key(hash_token(secret)), True
    return address, False


async def _known_token(state: object, secret: str) -> bool:
    """Whether `secret` is a live SUP token: cached (the route's authentication then finds it there
    too), else looked up once. A store that cannot answer makes it unverified: the route's own
    authentication then answers as it does when the store is down."""
    cache = getattr(state, "token_cache", None)
    sessions = getattr(state, "sessions", None)
    if not isinstance(cache, TokenCache) or not isinstance(sessions, sessionmaker):
        return False
    if cache.get(hash_token(secret)) is not None:
        return True
    from sup.api.auth import lookup  # local: auth imports models, keep this module light

    try:
        found = await run_in_threadpool(lookup, sessions, secret, cache)
    except SQLAlchemyError:
        return False
    return found is not None


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


class MetricsMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = _route_template(scope)
            HTTP_REQUESTS.labels(scope["method"], route, str(status["code"])).inc()
            HTTP_DURATION.labels(scope["method"], route).observe(time.perf_counter() - started)


def _route_template(scope: Scope) -> str:
    """The route's path template (`/api/v1/users/{username}`), never the raw path: bounded labels."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"
