"""When a login pod was last used, as the gateway tells it (docs/ssh-gateway.md, "Scale to zero"), on
SQLite and PostgreSQL: the heartbeat's `used` (the last tunnel open or close, or a tunnel held) moves
the pod's idle clock, and a tunnel opening to an awake pod stamps it at once (`POST used`), so that
the pass does not put a pod to sleep while, or just after, someone uses it."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.login_pods import Route
from sup.logins import sleep as idle
from sup.store.models import LoginWake, utcnow
from tests.conftest import ACTOR, bearer
from tests.gateway_api.test_idle import DESIRED


@pytest.fixture
def gateway(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["gateway"])


def _z(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _state(sessions: sessionmaker[Session]) -> dict[tuple[str, str], tuple[bool, datetime | None]]:
    with sessions() as session:
        return {(r.kind, r.name): (r.awake, r.last_activity) for r in session.scalars(select(LoginWake))}


def _rows(sessions: sessionmaker[Session], now: datetime, **rows: tuple[bool, float]) -> None:
    """kind_name=(awake, idle hours) per pod."""
    with sessions.begin() as session:
        for key, (awake, hours) in rows.items():
            kind, name = key.split("_", 1)
            session.add(
                LoginWake(kind=kind, name=name, awake=awake, last_activity=now - timedelta(hours=hours))
            )


def test_a_heartbeat_moves_the_idle_clock_of_the_pods_its_tunnels_used(
    client: TestClient, gateway: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    now = utcnow()
    _rows(
        sessions, now, user_kim=(True, 2), group_physics=(True, 2), user_saul=(False, 2), user_lee=(True, 0)
    )
    before = _state(sessions)
    used = [
        {"kind": "user", "name": "kim", "at": _z(now - timedelta(seconds=3))},  # a short command
        {"kind": "group", "name": "physics", "at": _z(now + timedelta(hours=5))},  # a clock ahead
        {"kind": "user", "name": "saul", "at": _z(now)},  # asleep: only a wake wakes
        {"kind": "user", "name": "lee", "at": _z(now - timedelta(hours=1))},  # older than SUP knows
        {"kind": "user", "name": "nobody", "at": _z(now)},  # no such pod: nothing made
    ]
    beat = {"gateway": "gw-a", "sessions": [], "busy": [], "used": used}
    assert client.post("/api/v1/gateway/heartbeat", json=beat, headers=gateway).status_code == 204
    after = _state(sessions)
    answered = utcnow()

    assert after[("user", "kim")] == (True, now - timedelta(seconds=3))
    awake, physics = after[("group", "physics")]
    assert awake and physics is not None and now <= physics <= answered  # SUP's clock, not the gateway's
    assert after[("user", "saul")] == before[("user", "saul")]
    assert after[("user", "lee")] == before[("user", "lee")]  # never moved back
    assert set(after) == set(before)

    # an older gateway sends no `used`: still accepted, nothing stamped
    old = {"gateway": "gw-old", "sessions": [], "busy": []}
    assert client.post("/api/v1/gateway/heartbeat", json=old, headers=gateway).status_code == 204
    assert _state(sessions) == after
    bad = dict(beat, used=[{"kind": "user", "name": "kim", "at": "2026-11-24T12:00:00"}])  # no zone
    assert client.post("/api/v1/gateway/heartbeat", json=bad, headers=gateway).status_code == 422
    assert _state(sessions) == after


def test_a_tunnel_opening_to_an_awake_pod_stamps_it_and_an_asleep_one_says_so(
    client: TestClient,
    gateway: dict[str, str],
    tokens: dict[str, str],
    sessions: sessionmaker[Session],
) -> None:
    now = utcnow()
    _rows(sessions, now, user_kim=(True, 2), user_saul=(False, 2))
    before = _state(sessions)

    answer = client.post("/api/v1/gateway/used", json={"kind": "user", "name": "kim"}, headers=gateway)
    assert answer.status_code == 200 and answer.json() == {"awake": True}
    awake, stamped = _state(sessions)[("user", "kim")]
    assert awake and stamped is not None and stamped >= now

    # put to sleep since the gateway read its route: nothing changes, the gateway wakes it
    answer = client.post("/api/v1/gateway/used", json={"kind": "user", "name": "saul"}, headers=gateway)
    assert answer.status_code == 200 and answer.json() == {"awake": False}
    assert _state(sessions)[("user", "saul")] == before[("user", "saul")]
    # a pod without a row is awake; none is made for it (the pass makes rows for pods SUP keeps)
    answer = client.post("/api/v1/gateway/used", json={"kind": "group", "name": "nope"}, headers=gateway)
    assert answer.status_code == 200 and answer.json() == {"awake": True}
    assert set(_state(sessions)) == {("user", "kim"), ("user", "saul")}

    for token, status in ((tokens["viewer"], 403), (tokens["operator"], 403), ("sup_nonsense", 401)):
        refused = client.post(
            "/api/v1/gateway/used", json={"kind": "user", "name": "saul"}, headers=bearer(token)
        )
        assert refused.status_code == status
    malformed = client.post("/api/v1/gateway/used", json={"kind": "pod", "name": "kim"}, headers=gateway)
    assert malformed.status_code == 422


def test_pods_used_just_before_the_pass_do_not_sleep(
    client: TestClient, gateway: dict[str, str], settings: Settings, sessions: sessionmaker[Session]
) -> None:
    """The pass right after short sessions that began (and ended) between two heartbeats: kim's open,
    told at once, and the close of a tunnel to physics, in the heartbeat, keep those pods awake for
    idle_seconds (600) from then; saul's pod, unused for two hours, sleeps."""
    with sessions.begin() as session:
        idle.sleep_idle(session, settings, DESIRED, utcnow(), ACTOR)  # first sight
    with sessions.begin() as session:
        for row in session.scalars(select(LoginWake)):
            row.last_activity = utcnow() - timedelta(hours=2)
    closed = utcnow() - timedelta(seconds=1)
    beat = {
        "gateway": "gw-a",
        "sessions": [],
        "busy": [],
        "used": [{"kind": "group", "name": "physics", "at": _z(closed)}],
    }
    assert client.post("/api/v1/gateway/heartbeat", json=beat, headers=gateway).status_code == 204
    opened = client.post("/api/v1/gateway/used", json={"kind": "user", "name": "kim"}, headers=gateway)
    assert opened.json() == {"awake": True}
    with sessions.begin() as session:
        decision = idle.sleep_idle(session, settings, DESIRED, utcnow(), ACTOR)
    assert decision is not None and decision.sleep == {Route("user", "saul")}
    assert {pod: awake for pod, (awake, _) in _state(sessions).items()} == {
        ("user", "kim"): True, ("user", "saul"): False, ("group", "physics"): True,
    }  # fmt: skip
