"""The API the admin page reads at scale: a page of users' status in one request, one user's keys
(and removing one, audited), and the list's search and filters together."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.domain.sshkeys import parse_ssh_public_key
from sup.store.models import OutboxMark, TargetStatus, utcnow
from sup.users.status import status_of, statuses_of
from tests.support import keys

USERS = "/api/v1/users"


@pytest.fixture
def people(client: TestClient, operator: dict[str, str]) -> None:
    """kim (two keys, in physics, from the api), saul (suspended), lee (in chem)."""
    for group in ("physics", "chem"):
        assert client.post("/api/v1/groups", json={"name": group}, headers=operator).status_code == 201
    for body in (
        {
            "username": "kim",
            "display_name": "Kim Wexler",
            "ssh_public_keys": [keys.ed25519_key("kim@laptop"), keys.ed25519_key("kim@desk")],
            "groups": ["physics"],
        },
        {"username": "saul", "display_name": "Saul Goodman", "active": False, "groups": ["physics"]},
        {"username": "lee", "email": "lee@kim-lab.example", "groups": ["chem"]},
    ):
        response = client.post(USERS, json=body, headers=operator)
        assert response.status_code == 201, response.text


@pytest.mark.usefixtures("people")
def test_the_status_of_a_page_of_users_in_one_request(client: TestClient, viewer: dict[str, str]) -> None:
    response = client.get(
        "/api/v1/status/users", params=[("username", "saul"), ("username", "nobody"), ("username", "kim")],
        headers=viewer,
    )  # fmt: skip
    assert response.status_code == 200, response.text
    body = response.json()
    assert [s["username"] for s in body] == ["saul", "kim"]  # in the order asked; unknown left out
    for one in body:
        assert one == client.get(f"{USERS}/{one['username']}/status", headers=viewer).json()
    assert client.get("/api/v1/status/users", headers=viewer).status_code == 422  # no username
    too_many = [("username", f"u{n}") for n in range(1001)]  # api.max_page_size is 1000
    refused = client.get("/api/v1/status/users", params=too_many, headers=viewer)
    assert refused.status_code == 422 and "at most 1000" in refused.text
    assert client.get("/api/v1/status/users", params={"username": "kim"}).status_code == 401


def test_many_statuses_read_as_one_status_each(
    settings: Settings, sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Enabled targets: a row's state, pending for a newer outbox mark, pending without a row."""
    monkeypatch.setattr(Settings, "target_enabled", lambda self, target: target != "kube")
    now = utcnow()
    with sessions.begin() as session:
        session.add(TargetStatus(username="kim", target="ldap", state="in_sync", updated_at=now))
        session.add(
            TargetStatus(username="kim", target="slurm", state="error", last_error="x", updated_at=now)
        )
        session.add(TargetStatus(username="lee", target="ldap", state="in_sync", updated_at=now))
        session.add(OutboxMark(kind="user", name="lee", marked_at=now + timedelta(seconds=1), generation=1))
    with sessions() as session:
        many = statuses_of(session, settings, ["kim", "lee", "saul"])
        one = [status_of(session, settings, name) for name in ("kim", "lee", "saul")]
    assert many == one
    assert [t.state.value for t in many[0].targets] == ["in_sync", "error", "disabled"]
    assert [t.state.value for t in many[1].targets] == ["pending", "pending", "disabled"]


@pytest.mark.usefixtures("people")
def test_removing_one_key_of_a_user_is_audited_and_keeps_the_others(
    client: TestClient, operator: dict[str, str], viewer: dict[str, str]
) -> None:
    listed = client.get(f"{USERS}/kim/ssh-keys", headers=viewer)
    assert listed.status_code == 200
    laptop, desk = listed.json()
    assert laptop["origin"] == "admin" and laptop["key"].endswith("kim@laptop")
    assert laptop["fingerprint"] == parse_ssh_public_key(laptop["key"]).fingerprint
    path = f"{USERS}/kim/ssh-keys/{laptop['fingerprint']}"  # SHA256:... holds "/" and "+"

    assert client.delete(path, headers=viewer).status_code == 403
    assert client.delete(path, headers={**operator, "If-Match": '"99"'}).status_code == 412
    assert client.delete(path, headers=operator).status_code == 204
    assert client.get(f"{USERS}/kim/ssh-keys", headers=viewer).json() == [desk]
    gone = client.delete(path, headers=operator)
    assert gone.status_code == 404 and laptop["fingerprint"] in gone.json()["detail"]
    assert client.get(f"{USERS}/nobody/ssh-keys", headers=viewer).status_code == 404

    entry = client.get(
        "/api/v1/audit", params={"resource_name": "kim", "action": "update"}, headers=viewer
    ).json()["items"][0]
    assert entry["actor"] == "operator-token"
    assert len(entry["before"]["ssh_public_keys"]) == 2 and entry["after"]["ssh_public_keys"] == [desk["key"]]


@pytest.mark.usefixtures("people")
def test_search_filters_and_paging_together(client: TestClient, viewer: dict[str, str]) -> None:
    def names(**params: object) -> tuple[list[str], int]:
        response = client.get(USERS, params=params, headers=viewer)
        assert response.status_code == 200, response.text
        return [u["username"] for u in response.json()["items"]], response.json()["total"]

    assert names(q="kim") == (["kim", "lee"], 2)  # username, or lee's e-mail
    assert names(q="GOOD") == (["saul"], 1)  # display name, any case
    assert names(q="kim", group="physics") == (["kim"], 1)
    assert names(group="physics", active=False) == (["saul"], 1)
    assert names(source="api", limit=1, offset=1) == (["lee"], 3)
    assert names(source="scim:corp") == ([], 0)
    assert client.get(USERS, params={"q": "x" * 129}, headers=viewer).status_code == 422


@pytest.mark.usefixtures("people")
def test_a_short_page_tells_the_total_without_a_count(
    client: TestClient, viewer: dict[str, str], engine: Engine
) -> None:
    """The total is right on every page; a short page that is not past the end is not counted (a
    search for a substring scans the table: once, not twice)."""
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        for params, names, total, counted in (
            ({"limit": 2}, ["kim", "lee"], 3, True),  # a full page: counted
            ({"limit": 2, "offset": 2}, ["saul"], 3, False),  # the last, short page
            ({"limit": 2, "offset": 5}, [], 3, True),  # past the end: counted
            ({"limit": 5}, ["kim", "lee", "saul"], 3, False),
            ({"q": "nobody"}, [], 0, False),
        ):
            statements.clear()
            body = client.get(USERS, params=params, headers=viewer).json()
            assert ([u["username"] for u in body["items"]], body["total"]) == (names, total), params
            assert any("count(" in s.lower() and "users" in s for s in statements) is counted, params
    finally:
        event.remove(engine, "before_cursor_execute", seen)
