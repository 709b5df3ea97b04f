"""Request-size and rate limits on every write path (issue 10): each POST, PUT, PATCH and DELETE route
the app serves, found by walking its routes (so a new router is covered without editing this test),
answers 413 to an oversized body and, under /api/v1, 429 past the write rate limit; SCIM answers
in SCIM's own error format. Reads are not rate limited by the write limit."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.types import ASGIApp, Receive, Scope, Send

from sup.api.middleware import WriteRateLimitMiddleware
from sup.api.ratelimit import RateLimiter
from sup.app import create_app
from sup.config import GatewaySettings, RateLimit, Settings
from sup.domain.roles import Role
from sup.tokens.service import create_token
from tests.conftest import ACTOR

WRITE = {"POST", "PUT", "PATCH", "DELETE"}
SCIM_ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"


def _write_routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every write operation of the OpenAPI schema (path parameters filled with `x`)."""
    routes = [
        (method.upper(), re.sub(r"\{[^}]+\}", "x", path))
        for path, operations in app.openapi()["paths"].items()
        for method in operations
        if method.upper() in WRITE
    ]
    assert len(routes) >= 15, routes  # users, groups, members, accounts, tokens, reconcile, SCIM...
    return routes


@pytest.fixture
def limited(settings: Settings, engine: Engine) -> Iterator[tuple[FastAPI, TestClient]]:
    strict = settings.model_copy(
        update={
            "api": settings.api.model_copy(
                update={
                    "max_body_bytes": 2048,
                    "rate_limit": settings.api.rate_limit.model_copy(
                        update={"requests_per_second": 0.001, "burst": 2}
                    ),
                }
            )
        }
    )
    app = create_app(strict, engine)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield app, client


def test_every_write_path_refuses_an_oversized_body_with_413(
    limited: tuple[FastAPI, TestClient], admin: dict[str, str]
) -> None:
    app, client = limited
    body = b'{"name": "' + b"x" * 4096 + b'"}'
    for method, path in _write_routes(app):
        # A fresh token value per request: the rate limit (applied first) stays out of the way.
        headers = {**admin, "Content-Type": "application/json", "X-Test": path}
        response = client.request(method, path, content=body, headers=headers)
        assert response.status_code == 413, (method, path, response.status_code, response.text)
        if path.startswith("/scim/v2"):
            assert SCIM_ERROR in response.json()["schemas"], (method, path)
            assert response.json()["status"] == "413"
        else:
            assert response.headers["content-type"] == "application/problem+json"
            assert "larger than 2048 bytes" in response.json()["detail"]


def test_every_admin_write_path_is_rate_limited_per_token_with_429(
    limited: tuple[FastAPI, TestClient], tokens: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    app, client = limited
    routes = [(method, path) for method, path in _write_routes(app) if path.startswith("/api/v1")]
    with sessions.begin() as session:  # a viewer's token per path: the writes themselves are 403
        secrets = [create_token(session, ACTOR, f"limited-{i}", Role.viewer)[1] for i in range(len(routes))]
    for (method, path), secret in zip(routes, secrets, strict=True):
        # Each path with its own token: its bucket holds 2, the third write is refused before the route.
        headers = {"Authorization": f"Bearer {secret}"}
        first = [client.request(method, path, json={}, headers=headers).status_code for _ in range(2)]
        assert 429 not in first, (method, path, first)
        refused = client.request(method, path, json={}, headers=headers)
        assert refused.status_code == 429, (method, path, refused.text)
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.headers["content-type"] == "application/problem+json"
        assert "api.rate_limit" in refused.json()["detail"] and refused.json()["request_id"]

    # Reads are not writes; another token has its own bucket.
    viewer = {"Authorization": f"Bearer {tokens['viewer']}"}
    assert all(client.get("/api/v1/users", headers=viewer).status_code == 200 for _ in range(5))
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    assert client.post("/api/v1/groups", json={"name": "physics"}, headers=admin).status_code == 201


def _from_addresses(app: ASGIApp) -> ASGIApp:
    """The app, seeing each request come from the address in its X-Test-Address header (if any):
    TestClient's requests all come from one address."""

    async def with_address(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            address = dict(scope["headers"]).get(b"x-test-address")
            if address is not None:
                scope = {**scope, "client": (address.decode(), 40000)}
        await app(scope, receive, send)

    return with_address


def test_made_up_credentials_share_their_address_bucket_and_real_tokens_keep_their_own(
    limited: tuple[FastAPI, TestClient], tokens: dict[str, str]
) -> None:
    """A flood with a fresh made-up `sup_...` token per request (or none, or a JWT that is not one)
    is one client per address: two writes, then 429, however the tokens vary. A real token sent
    from the same address is its own client and is still served."""
    app, _ = limited
    client = TestClient(_from_addresses(app), raise_server_exceptions=False)  # the app runs already
    flood = [
        {"Authorization": "Bearer sup_made_up_1"},
        {"Authorization": "Bearer sup_made_up_2"},
        {},
        {"Authorization": "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln"},
        {"Authorization": "Bearer sup_" + "x" * 43},
    ]
    codes = [client.post("/api/v1/groups", json={}, headers=h).status_code for h in flood]
    assert codes == [401, 401, 429, 429, 429], codes
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    assert client.post("/api/v1/groups", json={"name": "physics"}, headers=admin).status_code == 201
    # another address is another client
    other = {"Authorization": "Bearer sup_made_up_3", "X-Test-Address": "10.0.0.2"}
    assert client.post("/api/v1/groups", json={}, headers=other).status_code == 401


def _rate_limiters(app: FastAPI) -> list[RateLimiter]:
    """Every bucket pool of the app's admin write limit (built with its middleware stack)."""
    layer = app.middleware_stack
    while layer is not None and not (
        isinstance(layer, WriteRateLimitMiddleware) and layer.prefix == "/api/v1"
    ):
        layer = getattr(layer, "app", None)
    assert isinstance(layer, WriteRateLimitMiddleware)
    limiter = layer.limiter
    pools: list[RateLimiter] = [limiter] if isinstance(limiter, RateLimiter) else []
    return pools + [pool for pool in vars(limiter).values() if isinstance(pool, RateLimiter)]


def test_a_flood_from_many_addresses_with_made_up_tokens_cannot_reset_a_real_clients_limit(
    limited: tuple[FastAPI, TestClient], tokens: dict[str, str]
) -> None:
    """The limiter forgets buckets to bound its memory; a flood brings as many new clients as it
    likes, yet a verified client's bucket (here: empty, the client throttled) is never the one
    forgotten, so the flood cannot hand it a fresh burst."""
    app, _ = limited
    client = TestClient(_from_addresses(app), raise_server_exceptions=False)  # the app runs already
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    codes = [client.post("/api/v1/groups", json={}, headers=admin).status_code for _ in range(3)]
    assert codes == [422, 422, 429]
    for pool in _rate_limiters(app):
        pool.max_keys = 10  # so that a test-sized flood is enough to make it forget
    for i in range(50):
        made_up = {"Authorization": f"Bearer sup_flood_{i}", "X-Test-Address": f"10.1.0.{i}"}
        assert client.post("/api/v1/groups", json={}, headers=made_up).status_code == 401
    assert all(len(pool._buckets) <= 10 for pool in _rate_limiters(app))  # memory stays bounded
    refused = client.post("/api/v1/groups", json={}, headers=admin)
    assert refused.status_code == 429, "the flood reset a real client's limit"


def test_scim_writes_are_rate_limited_in_scim_format(
    settings: Settings, engine: Engine, tokens: dict[str, str]
) -> None:
    scim = settings.scim.model_copy(
        update={
            "rate_limit": settings.scim.rate_limit.model_copy(
                update={"requests_per_second": 0.001, "burst": 1}
            )
        }
    )
    with TestClient(create_app(settings.model_copy(update={"scim": scim}), engine)) as client:
        headers = {"Authorization": f"Bearer {tokens['scim']}", "Content-Type": "application/scim+json"}
        body = {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "kim"}
        assert client.post("/scim/v2/Users", json=body, headers=headers).status_code == 201
        refused = client.post("/scim/v2/Users", json={**body, "userName": "saul"}, headers=headers)
        assert refused.status_code == 429 and SCIM_ERROR in refused.json()["schemas"]
        assert int(refused.headers["retry-after"]) >= 1


def test_the_limiter_forgets_clients_so_a_flood_of_made_up_tokens_cannot_fill_memory() -> None:
    now = [0.0]
    limiter = RateLimiter(RateLimit(requests_per_second=1, burst=1), clock=lambda: now[0], max_keys=100)
    for i in range(1000):
        limiter.acquire(f"made-up-{i}")
        assert len(limiter._buckets) <= 100
    # A client that is throttled right now stays throttled while others come and go.
    assert limiter.acquire("steady") == 0 and limiter.acquire("steady") > 0
    for i in range(50):
        limiter.acquire(f"other-{i}")
    assert limiter.acquire("steady") > 0
    now[0] += 2
    assert limiter.acquire("steady") == 0


def test_the_ssh_gateway_has_its_own_write_limit(settings: Settings, engine: Engine) -> None:
    """A login event per connection must not run into the admin API's limit, and the gateway's
    writes must not spend a client's admin budget (nor the other way round)."""
    tight = settings.api.rate_limit.model_copy(update={"requests_per_second": 0.001, "burst": 2})
    strict = settings.model_copy(
        update={
            "api": settings.api.model_copy(update={"rate_limit": tight}),
            "gateway": GatewaySettings(api_rate_limit={"requests_per_second": 0.001, "burst": 5}),
        }
    )
    with TestClient(create_app(strict, engine), raise_server_exceptions=False) as client:
        headers = {"Authorization": "Bearer sup_made_up_gateway_client"}
        events = [client.post("/api/v1/gateway/events", json={}, headers=headers) for _ in range(6)]
        assert [r.status_code == 429 for r in events] == [False] * 5 + [True]
        assert "gateway.api_rate_limit" in events[-1].json()["detail"]
        writes = [client.post("/api/v1/groups", json={}, headers=headers).status_code for _ in range(3)]
        assert [code == 429 for code in writes] == [False, False, True]
