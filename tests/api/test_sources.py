"""/api/v1/sources/keycloak without a reachable Keycloak: roles, settings, and a failed read that
changes nothing. (Against a real Keycloak: tests/keycloak.)"""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sup.app import create_app
from sup.config import Settings
from tests.api.helpers import row_counts
from tests.conftest import bearer
from tests.support.ports import free_port


def test_not_configured_is_404_and_readyz_says_disabled(client: TestClient, tokens: dict[str, str]) -> None:
    answer = client.post("/api/v1/sources/keycloak/sync", headers=bearer(tokens["operator"]))
    assert answer.status_code == 404 and "not configured" in answer.json()["detail"]
    assert client.get("/readyz").json()["sources"] == {"keycloak": "disabled"}
    assert client.post("/api/v1/sources/ldap/sync", headers=bearer(tokens["operator"])).status_code == 422


def test_an_unreachable_keycloak_is_reported_and_nothing_changes(
    settings: Settings, engine: Engine, sessions: sessionmaker[Session], tokens: dict[str, str]
) -> None:
    secret = "do-not-show-me"
    configured = settings.model_copy(
        update={
            "keycloak": Settings(
                keycloak={
                    "url": f"http://127.0.0.1:{free_port()}",
                    "realm": "hpc",
                    "client_id": "sup",
                    "client_secret": secret,
                    "timeout_seconds": 2,
                }
            ).keycloak
        }
    )
    with TestClient(create_app(configured, engine)) as client:
        assert client.get("/readyz").json()["sources"] == {"keycloak": "configured"}
        viewer = client.post("/api/v1/sources/keycloak/sync", headers=bearer(tokens["viewer"]))
        assert viewer.status_code == 403
        before = row_counts(sessions)
        answer = client.post("/api/v1/sources/keycloak/sync", headers=bearer(tokens["operator"]))
        assert answer.status_code == 200
        report = answer.json()
        assert report["ok"] is False and report["writes"] == 0
        assert "reading Keycloak failed" in report["errors"][0]
        assert row_counts(sessions) == before
        state = client.get("/api/v1/sources/keycloak", headers=bearer(tokens["viewer"])).json()
        assert "reading Keycloak failed" in state["last_error"] and state["last_full_at"] is None
        assert secret not in answer.text and secret not in str(state)
