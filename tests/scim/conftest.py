"""SCIM fixtures: one token per IdP connection, and helpers that speak SCIM to the app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy.orm import Session, sessionmaker

from sup.domain.roles import Role
from sup.store.audit import Actor
from sup.tokens.service import create_token

SCIM = "/scim/v2"
USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"
ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
SUP = "urn:ietf:params:scim:schemas:extension:sup:2.0:User"
PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"
ADMIN = Actor(name="test", role="admin")


def scim_token(sessions: sessionmaker[Session], name: str) -> dict[str, str]:
    with sessions.begin() as session:
        _, secret = create_token(session, ADMIN, name, Role.scim)
    return {"Authorization": f"Bearer {secret}", "Content-Type": "application/scim+json"}


@pytest.fixture
def okta(sessions: sessionmaker[Session]) -> dict[str, str]:
    return scim_token(sessions, "okta")


@pytest.fixture
def entra(sessions: sessionmaker[Session]) -> dict[str, str]:
    return scim_token(sessions, "entra")


@pytest.fixture
def connection(sessions: sessionmaker[Session]) -> Callable[[str], dict[str, str]]:
    return lambda name: scim_token(sessions, name)


def user_body(user_name: str, **extra: Any) -> dict[str, Any]:
    return {"schemas": [USER_SCHEMA], "userName": user_name, **extra}


def patch_body(*operations: dict[str, Any]) -> dict[str, Any]:
    return {"schemas": [PATCH_OP], "Operations": list(operations)}


def create_user(client: TestClient, headers: dict[str, str], user_name: str, **extra: Any) -> dict[str, Any]:
    response = client.post(f"{SCIM}/Users", json=user_body(user_name, **extra), headers=headers)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def create_group(
    client: TestClient, headers: dict[str, str], display_name: str, members: list[str] | None = None
) -> dict[str, Any]:
    payload: dict[str, Any] = {"schemas": [GROUP_SCHEMA], "displayName": display_name}
    if members is not None:
        payload["members"] = [{"value": m} for m in members]
    response = client.post(f"{SCIM}/Groups", json=payload, headers=headers)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def assert_scim_error(response: Response, status: int, scim_type: str | None = None) -> dict[str, Any]:
    """The response is a SCIM Error body (RFC 7644 §3.12) with this status and scimType."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/scim+json"), response.headers
    body: dict[str, Any] = response.json()
    assert body["schemas"] == [ERROR]
    assert body["status"] == str(status)
    assert body.get("scimType") == scim_type, body
    assert body.get("detail")
    return body
