"""The gateway's audit events have a write budget of their own (issue 24): a key holder who loops
logins (each one an audit event the gateway posts) can exhaust it, and SUP then answers the events
429, but never the wakes, heartbeats and route lookups that the gateway needs for everyone else."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.store.models import AuditEntry, LoginWake, utcnow
from tests.conftest import bearer
from tests.gateway_api.conftest import NAMESPACE, FakeCluster
from tests.support import keys

BURST = 5


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        kube={"namespace": NAMESPACE, "kubeconfig": "/nonexistent"},
        gateway={"idle_seconds": 600, "api_rate_limit": {"requests_per_second": 0.001, "burst": BURST}},
    )


def _login(n: int) -> dict[str, object]:
    return {
        "event": "login",
        "username": "kim",
        "fingerprint": None,
        "source": f"10.0.0.7:{n}",
        "pod": "login",
    }


def test_a_flood_of_audit_events_never_makes_wakes_heartbeats_or_route_lookups_fail(
    client: TestClient,
    tokens: dict[str, str],
    admin: dict[str, str],
    sessions: sessionmaker[Session],
    cluster: FakeCluster,
) -> None:
    gateway = bearer(tokens["gateway"])
    body = {"username": "kim", "ssh_public_keys": [keys.ed25519_key("kim@laptop")]}
    assert client.post("/api/v1/users", json=body, headers=admin).status_code == 201
    long_ago = utcnow() - timedelta(hours=3)
    cluster.replicas["login-kim"] = 0  # kim's pod sleeps
    with sessions.begin() as session:
        session.add(
            LoginWake(kind="user", name="kim", awake=False, woken_at=long_ago, last_activity=long_ago)
        )

    # kim loops logins: an audit event each, until SUP refuses them
    answers = [
        client.post("/api/v1/gateway/events", json=_login(n), headers=gateway) for n in range(3 * BURST)
    ]
    codes = [a.status_code for a in answers]
    assert codes[:BURST] == [204] * BURST and set(codes[BURST:]) == {429}, codes

    # ... and the gateway still wakes pods, reports its sessions and looks routes up
    wake = client.post("/api/v1/gateway/wake", json={"kind": "user", "name": "kim"}, headers=gateway)
    assert wake.status_code == 200, wake.text
    assert cluster.writes == ["login-kim"]
    beat = {"gateway": "gw-a", "sessions": [], "busy": [{"kind": "user", "name": "kim", "busy": True}]}
    for _ in range(BURST - 1):
        response = client.post("/api/v1/gateway/heartbeat", json=beat, headers=gateway)
        assert response.status_code == 204, response.text
    route = client.get("/api/v1/gateway/routes/kim", headers=gateway)
    assert route.status_code == 200 and route.json()["pods"][0]["awake"] is True

    # the events' 429 says which budget ran out; still only the accepted events were written
    refused = answers[-1]
    assert "audit events" in refused.json()["detail"] and int(refused.headers["retry-after"]) >= 1
    assert client.post("/api/v1/gateway/events", json=_login(99), headers=gateway).status_code == 429
    with sessions() as session:
        logins = session.scalar(
            select(func.count()).select_from(AuditEntry).where(AuditEntry.action == "login")
        )
    assert logins == BURST
    # the control budget is a budget too: past it, wakes and heartbeats get their own 429
    assert client.post("/api/v1/gateway/heartbeat", json=beat, headers=gateway).status_code == 429
