"""A short-lived, per-process cache of successful bearer-token lookups.

Every request authenticates its bearer token; without a cache that is a transaction of its own (pool
checkout, SELECT, COMMIT) before the request's real work. A successful lookup is kept here, keyed by
the token's hash (never the secret), for `TOKEN_CACHE_SECONDS`. The bound it gives:
- a token revoked through this process's API stops working at once (the revocation clears the cache);
- a token revoked elsewhere (another `sup serve` process or replica, `sup token revoke`) stops working
  here within TOKEN_CACHE_SECONDS;
- an expired token stops working at its expiry (the expiry is kept and checked on every hit).
Failed lookups are never cached: an unknown token always reaches the store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sup.store.models import utcnow

TOKEN_CACHE_SECONDS = 5.0
MAX_ENTRIES = 10_000  # a bound on memory: tokens are few, the cache is cleared when it is full


@dataclass(frozen=True)
class CachedToken:
    name: str
    role: str
    expires_at: datetime | None


class TokenCache:
    def __init__(self, ttl: float = TOKEN_CACHE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._entries: dict[str, tuple[float, CachedToken]] = {}
        self._lock = threading.Lock()
        self.generation = 0  # bumped by clear(): a lookup begun before a revocation is not cached

    def get(self, token_hash: str) -> CachedToken | None:
        """The token cached under this hash, if it was looked up less than `ttl` ago and is unexpired."""
        entry = self._entries.get(token_hash)
        if entry is None:
            return None
        stored_at, token = entry
        if self._clock() - stored_at >= self.ttl or (
            token.expires_at is not None and token.expires_at <= utcnow()
        ):
            with self._lock:
                if self._entries.get(token_hash) is entry:
                    del self._entries[token_hash]
            return None
        return token

    def put(self, token_hash: str, token: CachedToken, generation: int) -> None:
        """Cache a lookup that began at `generation` (unless the cache was cleared since)."""
        with self._lock:
            if generation != self.generation:
                return
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[token_hash] = (self._clock(), token)

    def clear(self) -> None:
        """Forget every lookup (a token was revoked or changed in this process)."""
        with self._lock:
            self._entries.clear()
            self.generation += 1
