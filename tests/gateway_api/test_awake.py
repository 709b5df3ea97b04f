"""GET /api/v1/gateway/awake on SQLite and PostgreSQL: the awake login pods that could sleep within
three heartbeats, which the gateway asks the idle reporter of; nothing when pods never sleep."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.logins import service
from sup.store.models import LoginWake, utcnow
from tests.conftest import bearer
from tests.gateway_api.conftest import NAMESPACE


def _rows(sessions: sessionmaker[Session]) -> None:
    """idle_seconds 600, heartbeats every 15 s: a pod idle for more than 555 s may sleep soon."""
    now = utcnow()
    with sessions.begin() as session:
        for kind, name, awake, idle_for in (
            ("user", "kim", True, 560),  # may sleep within three heartbeats
            ("user", "lee", True, 500),  # not yet
            ("user", "saul", False, 9000),  # asleep already: nothing to ask
            ("group", "physics", True, None),  # never seen in use
        ):
            last = None if idle_for is None else now - timedelta(seconds=idle_for)
            session.add(LoginWake(kind=kind, name=name, awake=awake, woken_at=None, last_activity=last))


def test_the_awake_pods_that_may_sleep_soon_with_the_reporters_port(
    client: TestClient, tokens: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    _rows(sessions)
    response = client.get("/api/v1/gateway/awake", headers=bearer(tokens["gateway"]))
    assert response.status_code == 200, response.text
    common = {"namespace": NAMESPACE, "port": 9101}
    assert response.json() == [
        {"kind": "group", "name": "physics", "owner": "physics", "service": "group-physics", **common},
        {"kind": "user", "name": "login", "owner": "kim", "service": "login-kim", **common},
    ]
    assert client.get("/api/v1/gateway/awake", headers=bearer(tokens["admin"])).json() == response.json()
    for role in ("viewer", "operator", "scim"):
        assert client.get("/api/v1/gateway/awake", headers=bearer(tokens[role])).status_code == 403
    assert client.get("/api/v1/gateway/awake").status_code == 401


def test_nothing_to_ask_when_pods_never_sleep(settings: Settings, sessions: sessionmaker[Session]) -> None:
    _rows(sessions)
    assert settings.gateway is not None
    awake_forever = settings.gateway.model_copy(update={"idle_seconds": None})
    with sessions() as session:
        assert [p.owner for p in service.awake_pods(session, settings, utcnow())] == ["physics", "kim"]
        for plain in (
            settings.model_copy(update={"gateway": None}),
            settings.model_copy(update={"gateway": awake_forever}),
            settings.model_copy(update={"kube": None}),
        ):
            assert service.awake_pods(session, plain, utcnow()) == []
