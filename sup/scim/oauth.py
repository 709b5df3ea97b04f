"""SCIM connections that push with OAuth access tokens their identity provider issues (`scim.oauth`).

Some IdPs do not send a static secret: they get an access token from an authorization server (their
own, or the site's) and reuse it until it expires. A connection names the issuer and either

- an RFC 7662 introspection endpoint, with the client id and secret SUP holds there: each new token is
  POSTed to it, and accepted only when the answer says `active: true`, names the issuer (`iss`), names
  the connection's audience in `aud`, has an `exp` still ahead and is not an ID or refresh token; or
- nothing more (JWKS): a token must be a JWT signed by a key of the issuer's JWKS, with the same
  claims checked locally (sup/api/oidc.py does the verifying).

A token accepted is the connection `NAME`: it writes as `scim:NAME`, like a static token named NAME.

What a check costs and what bounds it:
- An active token is cached (by its SHA-256, never the token) for `cache_seconds`, never past its
  `exp`: the IdP's next requests with it cost nothing. So a token revoked at the issuer still works
  here for at most `cache_seconds` (default 60).
- A token found inactive is remembered for REFUSED_SECONDS, so a client retrying with it does not
  make SUP ask the issuer again.
- Introspection requests (the ones the caches do not spare) are limited per client address
  (UNCACHED_PER_ADDRESS): made-up tokens from one address cannot turn SUP into a flood against the
  issuer, nor use up the issuer's patience for everybody else.
- An issuer that cannot be reached (or answers garbage) makes the request a 503, not a 401: an IdP
  treats 401 as a wrong credential and may stop provisioning altogether.

Nothing here logs or returns a token, the client secret or the introspection answer.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sup.api.oidc import InvalidToken, OidcVerifier, check_access_token
from sup.api.ratelimit import RateLimiter
from sup.config import OidcSettings, RateLimit, ScimOAuthConnection, ScimSettings

log = logging.getLogger(__name__)

REFUSED_SECONDS = 30.0
MAX_CACHED = 10_000  # tokens; the caches are cleared when full (IdPs reuse a token: they hold few)
UNCACHED_PER_ADDRESS = RateLimit(requests_per_second=2, burst=20)


class IssuerUnavailable(Exception):
    """The issuer could not say whether the token is good (unreachable, an error, not JSON)."""


class TooManyChecks(Exception):
    """This address sent more new tokens than UNCACHED_PER_ADDRESS allows to be checked."""

    def __init__(self, wait: float) -> None:
        super().__init__("too many new tokens from this address")
        self.wait = wait


Post = Callable[[ScimOAuthConnection, bytes], Any]
"""Sends an introspection request body to the connection's endpoint; returns the JSON answer."""


@dataclass(frozen=True)
class _Connection:
    name: str
    settings: ScimOAuthConnection
    verifier: OidcVerifier | None  # JWKS connections


class ScimOAuth:
    """Which OAuth SCIM connection a bearer token belongs to, if any (thread-safe)."""

    def __init__(
        self,
        settings: ScimSettings,
        *,
        post: Post | None = None,
        fetch: Callable[[str], Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`post` and `fetch` replace the HTTP calls (introspection, JWKS) in unit tests."""
        self._connections = [
            _Connection(name, conn, None if conn.introspection_url else OidcVerifier(_jwks(conn), fetch))
            for name, conn in settings.oauth.items()
        ]
        self._post = post or _post_form
        self._clock = clock
        self._active: dict[str, tuple[float, str]] = {}  # token hash -> (valid until, connection)
        self._refused: dict[str, float] = {}  # token hash -> forget at
        self._lock = threading.Lock()
        self._per_address = RateLimiter(UNCACHED_PER_ADDRESS)
        self.introspections = 0

    @property
    def configured(self) -> bool:
        return bool(self._connections)

    def connection_of(self, token: str, address: str) -> str:
        """The name of the connection `token` is a good access token of. InvalidToken (401) when
        it is not; IssuerUnavailable (503) when its issuer cannot say; TooManyChecks (429) when
        `address` has sent too many new tokens. May block on HTTP."""
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        with self._lock:
            cached = self._active.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
            refused_until = self._refused.get(key)
            if refused_until is not None and refused_until > now:
                raise InvalidToken("the bearer token is not valid (inactive, expired or not for SUP)")
        issuer = _unverified_issuer(token)
        candidates = [c for c in self._connections if issuer is None or c.settings.issuer == issuer]
        if issuer is not None and not candidates:
            raise InvalidToken("the token's issuer is not one of SUP's SCIM connections")
        last: InvalidToken | None = None
        for connection in candidates:
            try:
                until = self._check(connection, token, address, now)
            except InvalidToken as refused:
                last = refused
                continue
            self._remember(self._active, key, (until, connection.name))
            return connection.name
        self._remember(self._refused, key, now + REFUSED_SECONDS)
        raise last or InvalidToken("the bearer token is not valid (unknown, revoked or expired)")

    def _remember(self, cache: dict[str, Any], key: str, value: Any) -> None:
        with self._lock:
            if len(cache) >= MAX_CACHED:
                cache.clear()
            cache[key] = value

    def _check(self, connection: _Connection, token: str, address: str, now: float) -> float:
        """Until when the token may be taken without asking again; InvalidToken if it is not good."""
        settings = connection.settings
        if connection.verifier is not None:
            claims = connection.verifier.verified_claims(token)  # signature, iss, aud, exp, nbf, typ
            return min(float(claims["exp"]), now + settings.cache_seconds)
        wait = self._per_address.acquire(address)
        if wait > 0:
            raise TooManyChecks(wait)
        body = urllib.parse.urlencode({"token": token, "token_type_hint": "access_token"}).encode()
        self.introspections += 1
        try:
            answer = self._post(settings, body)
        except IssuerUnavailable:
            raise
        except Exception as exc:
            # The type only: a message may quote what the issuer sent.
            log.warning(
                "SCIM connection %s: the introspection endpoint cannot be used: %s",
                connection.name,
                type(exc).__name__,
            )
            raise IssuerUnavailable("the token's issuer cannot be asked right now") from None
        if not isinstance(answer, dict):
            log.warning("SCIM connection %s: the introspection answer is not a JSON object", connection.name)
            raise IssuerUnavailable("the token's issuer gave an answer SUP cannot read")
        return _introspected_until(settings, answer, now)


def _introspected_until(settings: ScimOAuthConnection, answer: dict[str, Any], now: float) -> float:
    """Check an RFC 7662 answer as the connection requires; until when it may be reused."""
    if answer.get("active") is not True:
        raise InvalidToken("the bearer token is not active (revoked, expired or unknown to its issuer)")
    if answer.get("iss") != settings.issuer:
        raise InvalidToken("the token is not for SUP: wrong iss")
    audience = answer.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if settings.expected_audience not in audiences:
        raise InvalidToken("the token is not for SUP: wrong aud")
    expires = answer.get("exp")
    if isinstance(expires, bool) or not isinstance(expires, int | float):
        raise InvalidToken("the token has no expiry (exp): SUP takes only tokens that expire")
    if expires + settings.leeway_seconds <= now:
        raise InvalidToken("the token has expired")
    not_before = answer.get("nbf", 0)
    if isinstance(not_before, bool) or not isinstance(not_before, int | float):
        raise InvalidToken("the token's nbf is not a number")
    if not_before > now + settings.leeway_seconds:
        raise InvalidToken("the token is not valid yet (its nbf is in the future)")
    check_access_token({}, answer)  # Keycloak's `typ`: an ID or refresh token is no access token
    return min(float(expires), now + settings.cache_seconds)


def _unverified_issuer(token: str) -> str | None:
    """The `iss` a JWT claims (unverified: only to pick the connection that will verify it); None
    for an opaque token."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    issuer = payload.get("iss") if isinstance(payload, dict) else None
    return issuer if isinstance(issuer, str) else None


def _jwks(connection: ScimOAuthConnection) -> OidcSettings:
    return OidcSettings(
        issuer=connection.issuer,
        audience=connection.expected_audience,
        jwks_url=connection.jwks_url,
        jwks_cache_seconds=connection.jwks_cache_seconds,
        leeway_seconds=connection.leeway_seconds,
        verify_tls=connection.verify_tls,
        ca_file=connection.ca_file,
        allow_insecure_http=connection.allow_insecure_http,
    )


def _post_form(settings: ScimOAuthConnection, body: bytes) -> Any:
    """POST an introspection request, authenticated with HTTP Basic (RFC 7662 §2.1, RFC 6749 §2.3.1)."""
    url, client_id, secret = settings.introspection_url, settings.client_id, settings.client_secret
    if url is None or client_id is None or secret is None:
        raise IssuerUnavailable("the connection has no introspection endpoint or client")
    context = ssl.create_default_context(cafile=settings.ca_file)
    if not settings.verify_tls:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    quote = urllib.parse.quote
    pair = f"{quote(client_id, safe='')}:{quote(secret.get_secret_value(), safe='')}"
    request = urllib.request.Request(  # noqa: S310 - the URL is https unless the settings allow http
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
            "Authorization": "Basic " + base64.b64encode(pair.encode()).decode(),
        },
    )
    try:
        timeout = settings.timeout_seconds
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:  # noqa: S310
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        # 401 here means SUP's own client id or secret is wrong: the operator's problem, not the IdP's.
        log.warning(
            "the introspection endpoint %s answered %d%s",
            url,
            exc.code,
            " (check the connection's client_id and client_secret)" if exc.code in (400, 401, 403) else "",
        )
        raise IssuerUnavailable("the token's issuer cannot be asked right now") from None
