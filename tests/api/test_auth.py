"""Tokens and roles: 401 without a valid token, 403 without the role, open health endpoints."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.domain.roles import Role
from sup.domain.tokens import hash_token
from sup.store.models import ApiToken, utcnow
from sup.tokens.service import create_token
from tests.conftest import ACTOR, bearer

# (method, path, json, minimum role). Paths refer to objects created by the `world` fixture.
ENDPOINTS = [
    ("GET", "/api/v1/users", None, "viewer"),
    ("GET", "/api/v1/users/kim", None, "viewer"),
    ("GET", "/api/v1/users/kim/status", None, "viewer"),
    ("POST", "/api/v1/users", {"username": "newbie"}, "operator"),
    ("PATCH", "/api/v1/users/kim", {"display_name": "K"}, "operator"),
    ("DELETE", "/api/v1/users/kim", None, "operator"),
    ("GET", "/api/v1/groups", None, "viewer"),
    ("GET", "/api/v1/groups/physics", None, "viewer"),
    ("POST", "/api/v1/groups", {"name": "newgroup"}, "operator"),
    ("PATCH", "/api/v1/groups/physics", {"description": "d"}, "operator"),
    ("PUT", "/api/v1/groups/physics/members/kim", None, "operator"),
    ("DELETE", "/api/v1/groups/physics/members/saul", None, "operator"),
    ("DELETE", "/api/v1/groups/chemistry", None, "operator"),
    ("GET", "/api/v1/slurm/accounts", None, "viewer"),
    ("GET", "/api/v1/slurm/accounts/phys", None, "viewer"),
    ("POST", "/api/v1/slurm/accounts", {"name": "newacct"}, "admin"),
    ("PATCH", "/api/v1/slurm/accounts/phys", {"fairshare": 5}, "admin"),
    ("DELETE", "/api/v1/slurm/accounts/phys", None, "admin"),
    ("GET", "/api/v1/audit", None, "viewer"),
    ("GET", "/api/v1/tokens", None, "admin"),
    ("POST", "/api/v1/tokens", {"name": "another", "role": "viewer"}, "admin"),
    ("DELETE", "/api/v1/tokens/scim-token", None, "admin"),
    ("GET", "/api/v1/whoami", None, "viewer"),
    ("GET", "/api/v1/status/users?username=kim&username=saul", None, "viewer"),
    ("GET", "/api/v1/users/kim/ssh-keys", None, "viewer"),
    ("GET", "/api/v1/gateway/people/kim", None, "viewer"),
]
RANK = {"viewer": 1, "operator": 2, "admin": 3, "scim": 0, "gateway": 0}


@pytest.fixture
def world(client: TestClient, admin: dict[str, str]) -> None:
    for user in ("kim", "saul"):
        client.post("/api/v1/users", json={"username": user}, headers=admin)
    client.post("/api/v1/groups", json={"name": "physics", "members": ["saul"]}, headers=admin)
    client.post("/api/v1/groups", json={"name": "chemistry"}, headers=admin)
    client.post("/api/v1/slurm/accounts", json={"name": "phys"}, headers=admin)


@pytest.mark.parametrize(("method", "path", "body", "needed"), ENDPOINTS)
@pytest.mark.usefixtures("world")
def test_role_matrix(
    client: TestClient, tokens: dict[str, str], method: str, path: str, body: object, needed: str
) -> None:
    for role in ("scim", "gateway", "viewer", "operator"):
        if RANK[role] >= RANK[needed]:
            continue
        response = client.request(method, path, json=body, headers=bearer(tokens[role]))
        assert response.status_code == 403, (role, response.text)
        assert f"this needs {needed}" in response.json()["detail"]
    unauthenticated = client.request(method, path, json=body)
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["www-authenticate"].startswith("Bearer")
    allowed_role = {"viewer": "viewer", "operator": "operator", "admin": "admin"}[needed]
    response = client.request(method, path, json=body, headers=bearer(tokens[allowed_role]))
    assert response.status_code in (200, 201, 204), response.text


def test_bad_tokens_are_401(client: TestClient, tokens: dict[str, str]) -> None:
    for header in (
        {"Authorization": "Bearer sup_notatoken"},
        {"Authorization": "Bearer " + tokens["admin"][:-1] + "x"},
        {"Authorization": "Basic YWRtaW46YWRtaW4="},
        {"Authorization": tokens["admin"]},
    ):
        response = client.get("/api/v1/users", headers=header)
        assert response.status_code == 401, header


def test_revoked_token_stops_working(
    client: TestClient, tokens: dict[str, str], admin: dict[str, str]
) -> None:
    viewer = bearer(tokens["viewer"])
    assert client.get("/api/v1/users", headers=viewer).status_code == 200
    assert client.delete("/api/v1/tokens/viewer-token", headers=admin).status_code == 204
    assert client.get("/api/v1/users", headers=viewer).status_code == 401


def test_expired_token_is_401(client: TestClient, sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        _, secret = create_token(
            session, ACTOR, "short", Role.admin, expires_at=utcnow() - timedelta(seconds=1)
        )
    assert client.get("/api/v1/users", headers=bearer(secret)).status_code == 401


def test_tokens_are_stored_hashed_and_never_shown(
    client: TestClient, admin: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    created = client.post("/api/v1/tokens", json={"name": "robot", "role": "operator"}, headers=admin)
    assert created.status_code == 201
    secret = created.json()["token"]
    assert secret.startswith("sup_") and len(secret) >= 40
    with sessions() as session:
        row = session.scalars(select(ApiToken).where(ApiToken.name == "robot")).one()
        assert row.token_hash == hash_token(secret) and secret not in (row.token_hash, row.prefix)
    listing = client.get("/api/v1/tokens", headers=admin)
    assert secret not in listing.text and hash_token(secret) not in listing.text
    audit = client.get("/api/v1/audit", params={"resource_type": "token"}, headers=admin)
    assert secret not in audit.text and hash_token(secret) not in audit.text
    assert client.get("/api/v1/users", headers=bearer(secret)).status_code == 200
    dup = client.post("/api/v1/tokens", json={"name": "robot", "role": "viewer"}, headers=admin)
    assert dup.status_code == 409


def test_last_used_is_recorded(
    client: TestClient, tokens: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    client.get("/api/v1/users", headers=bearer(tokens["viewer"]))
    with sessions() as session:
        row = session.scalars(select(ApiToken).where(ApiToken.name == "viewer-token")).one()
        assert row.last_used_at is not None


def test_health_endpoints_are_open(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["database"]["state"] == "ok"
    assert ready.json()["targets"] == {"ldap": "disabled", "slurm": "disabled", "kube": "disabled"}
    client.get("/api/v1/users")
    metrics = client.get("/metrics")
    assert metrics.status_code == 200
    assert 'sup_http_requests_total{method="GET",route="/api/v1/users",status="401"}' in metrics.text
    assert client.get("/docs").status_code == 200
    assert "/api/v1/users/{username}" in client.get("/openapi.json").json()["paths"]


def test_token_expiry_must_be_a_future_time_with_zone(client: TestClient, admin: dict[str, str]) -> None:
    for expires_at in ("2999-01-01T00:00:00", "2000-01-01T00:00:00Z"):
        response = client.post(
            "/api/v1/tokens", json={"name": "t", "role": "viewer", "expires_at": expires_at}, headers=admin
        )
        assert response.status_code == 422 and response.json()["errors"][0]["field"] == "expires_at"
    ok = client.post(
        "/api/v1/tokens",
        json={"name": "t", "role": "viewer", "expires_at": "2999-01-01T00:00:00Z"},
        headers=admin,
    )
    assert ok.status_code == 201 and ok.json()["expires_at"].startswith("2999-01-01")


def test_whoami_names_the_token_and_its_role(client: TestClient, tokens: dict[str, str]) -> None:
    for role in ("viewer", "operator", "admin"):
        response = client.get("/api/v1/whoami", headers=bearer(tokens[role]))
        assert response.status_code == 200
        assert response.json() == {"name": f"{role}-token", "role": role}
