"""Rate limits: a token bucket per client (a SCIM connection, an admin API token), answered with 429
and Retry-After by whoever uses it (the write limit in sup/api/middleware.py, the SCIM routes).

RFC 7644 §3.12 leaves throttling to HTTP: 429 (RFC 6585 §4) with Retry-After, which Entra ID and
Okta honour by backing off. Buckets live in the process: with several SUP replicas behind a load
balancer each replica allows the configured rate.

Who the client of an admin API write is (decided by the middleware before the route runs): the
identity of a bearer token that verified, never the raw header, so that `bearer X`, `Bearer X` and
`Bearer  X` are one client:
- a SUP token that is known and unexpired (the token cache, else one indexed lookup, which the
  cache then spares the route's authentication): its SHA-256, as the store keys it;
- an OIDC token: the issuer and subject it verifies to, so each new token of a person shares their
  bucket (a signature check against the cached JWKS, no database);
- anything else (no token, a made-up or revoked `sup_...` token, a JWT that does not verify): the
  client's address, one bucket for all of them, so that made-up credentials never each get a
  fresh bucket.
Verified clients and addresses are kept in two pools (`ClientLimiter`): however many addresses or
made-up tokens a flood brings, forgetting buckets to bound memory never drops a verified client's
(which would reset its limit).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sup.api.oidc import OidcIdentity
from sup.config import RateLimit


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """`rate` requests per second sustained, `burst` at once, per key (the connection's token name)."""

    def __init__(
        self, limit: RateLimit, clock: Callable[[], float] = time.monotonic, max_keys: int = 10000
    ) -> None:
        self.rate = limit.requests_per_second
        self.burst = float(limit.burst)
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str) -> float:
        """Take one token for `key`: 0 if allowed, else the seconds until a token is available."""
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= self.max_keys:
                    self._forget(now)
                bucket = self._buckets[key] = _Bucket(tokens=self.burst, updated=now)
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / self.rate

    def _forget(self, now: float) -> None:
        """Bound memory when keys are many (the admin API keys by whatever token a client sends):
        drop the buckets that have refilled (a new bucket is the same), else the least recently used
        half. Called with the lock held."""
        full = [k for k, b in self._buckets.items() if b.tokens + (now - b.updated) * self.rate >= self.burst]
        for key in full:
            del self._buckets[key]
        if len(self._buckets) >= self.max_keys:
            by_age = sorted(self._buckets, key=lambda k: self._buckets[k].updated)
            for key in by_age[: len(by_age) // 2 + 1]:
                del self._buckets[key]


def retry_after_seconds(wait: float) -> int:
    """Retry-After carries whole seconds (RFC 9110 §10.2.3): round up, at least 1."""
    return max(1, math.ceil(wait))


def bearer_secret(authorization: str | None) -> str | None:
    """The credentials of an `Authorization: Bearer ...` header: the scheme in any case (RFC 9110
    §11.1), whitespace around either part ignored. None for no header or another scheme."""
    parts = (authorization or "").split(None, 1)
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1].strip() or None


def token_key(token_hash: str) -> str:
    """The bucket of a SUP token that verified (its SHA-256, as the store keys it)."""
    return "token:" + token_hash


def address_key(address: str) -> str:
    """The bucket of a client whose credentials did not verify (or who sent none)."""
    return "address:" + address


def oidc_client_key(issuer: str | None, identity: OidcIdentity) -> str:
    """The bucket of a client whose JWT verified: the person, whichever of their tokens it is."""
    return f"oidc:{issuer} {identity.subject}"


class ClientLimiter:
    """One limit in two pools of buckets: clients whose credentials verified, and addresses (everyone
    else). Each pool bounds its own memory, so a flood from many addresses or with made-up tokens
    only ever makes the address pool forget buckets, never a verified client's."""

    def __init__(
        self, limit: RateLimit, clock: Callable[[], float] = time.monotonic, max_keys: int = 10000
    ) -> None:
        self.verified = RateLimiter(limit, clock, max_keys)
        self.anonymous = RateLimiter(limit, clock, max_keys)
        self.rate = self.verified.rate
        self.burst = self.verified.burst

    def acquire(self, key: str, *, verified: bool) -> float:
        """Take one token for `key` in its pool: 0 if allowed, else the seconds until one is."""
        return (self.verified if verified else self.anonymous).acquire(key)
