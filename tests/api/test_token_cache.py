"""The bearer-token cache (sup/api/token_cache.py): a cached token costs no lookup, and a token
revoked outside this process stops working within TOKEN_CACHE_SECONDS."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete, event
from sqlalchemy.orm import Session, sessionmaker

from sup.api.token_cache import TOKEN_CACHE_SECONDS, CachedToken, TokenCache
from sup.app import create_app
from sup.config import Settings
from sup.domain.roles import Role
from sup.store.models import ApiToken, utcnow
from sup.tokens.service import create_token
from tests.conftest import ACTOR, bearer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cached_client(settings: Settings, engine: Engine, clock: Clock) -> Iterator[TestClient]:
    app = create_app(settings, engine)
    app.state.token_cache = TokenCache(clock=clock)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_a_token_revoked_elsewhere_stops_working_within_the_bound(
    cached_client: TestClient, tokens: dict[str, str], sessions: sessionmaker[Session], clock: Clock
) -> None:
    viewer = bearer(tokens["viewer"])
    assert cached_client.get("/api/v1/users", headers=viewer).status_code == 200
    with sessions.begin() as session:  # as `sup token revoke` or another replica would
        session.execute(delete(ApiToken).where(ApiToken.name == "viewer-token"))
    clock.now += TOKEN_CACHE_SECONDS - 0.5
    assert cached_client.get("/api/v1/users", headers=viewer).status_code == 200  # the stated bound
    clock.now += 0.5
    assert cached_client.get("/api/v1/users", headers=viewer).status_code == 401


def test_a_cached_token_needs_no_lookup(
    cached_client: TestClient, tokens: dict[str, str], engine: Engine
) -> None:
    viewer = bearer(tokens["viewer"])
    statements: list[str] = []

    def seen(*args: Any) -> None:
        statements.append(str(args[2]))

    assert cached_client.get("/api/v1/users", headers=viewer).status_code == 200
    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert cached_client.get("/api/v1/users", headers=viewer).status_code == 200
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert statements, "the request itself reads the store"
    assert not [s for s in statements if "api_tokens" in s]


def test_a_cached_token_stops_at_its_expiry(
    cached_client: TestClient, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        _, secret = create_token(
            session, ACTOR, "brief", Role.viewer, expires_at=utcnow() + timedelta(seconds=1)
        )
    assert cached_client.get("/api/v1/users", headers=bearer(secret)).status_code == 200
    time.sleep(1.1)  # the fake clock stands still: only the expiry can refuse it
    assert cached_client.get("/api/v1/users", headers=bearer(secret)).status_code == 401


def test_a_lookup_begun_before_a_clear_is_not_cached() -> None:
    cache = TokenCache()
    token = CachedToken(name="t", role="viewer", expires_at=None)
    generation = cache.generation
    cache.clear()  # a revocation committed while the lookup ran
    cache.put("hash", token, generation)
    assert cache.get("hash") is None
    cache.put("hash", token, cache.generation)
    assert cache.get("hash") == token
