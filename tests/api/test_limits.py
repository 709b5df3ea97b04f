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

from sup.api.ratelimit import RateLimiter
from sup.app import create_app
from sup.config import GatewaySettings, RateLimit, Settings

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
    limited: tuple[FastAPI, TestClient], tokens: dict[str, str]
) -> None:
    app, client = limited
    for method, path in _write_routes(app):
        if not path.startswith("/api/v1"):
            continue
        # Each path with its own (made-up) token: its bucket holds 2, the third write is refused before
        # anyone looks at the token.
        headers = {"Authorization": f"Bearer sup_made_up_{method}_{path}"}
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
