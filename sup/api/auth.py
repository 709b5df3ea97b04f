"""The bearer lookup: which stored token a request's `Authorization: Bearer sup_...` is."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.api.token_cache import CachedToken, TokenCache
from sup.domain.tokens import hash_token, may_be_token
from sup.store.models import ApiToken, utcnow

# Don't write last_used_at on every request: once a minute is plenty to spot unused tokens.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def authenticate(session: Session, secret: str) -> ApiToken | None:
    """The live token with this secret, or None. Updates last_used_at (coarsely)."""
    if not may_be_token(secret):
        return None
    token = session.scalars(select(ApiToken).where(ApiToken.token_hash == hash_token(secret))).one_or_none()
    if token is None:
        return None
    now = utcnow()
    if token.expires_at is not None and token.expires_at <= now:
        return None
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        token.last_used_at = now
    return token


def lookup(sessions: sessionmaker[Session], secret: str, cache: TokenCache) -> CachedToken | None:
    """The stored token behind `secret` (one transaction), cached when found."""
    generation = cache.generation
    with sessions.begin() as session:
        token = authenticate(session, secret)
        if token is None:
            return None
        found = CachedToken(name=token.name, role=token.role, expires_at=token.expires_at)
    cache.put(hash_token(secret), found, generation)
    return found
