"""The audit log: every write, with actor, before and after; readable and filterable via the API."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from sup.store.outbox import pending
from tests.support import keys


def test_every_write_is_audited_with_before_and_after(
    client: TestClient, operator: dict[str, str], admin: dict[str, str], viewer: dict[str, str]
) -> None:
    client.post("/api/v1/users", json={"username": "kim", "email": "k@a.example"}, headers=operator)
    client.patch("/api/v1/users/kim", json={"email": "k@b.example"}, headers=operator)
    client.post("/api/v1/groups", json={"name": "physics"}, headers=operator)
    client.put("/api/v1/groups/physics/members/kim", headers=operator)
    client.delete("/api/v1/groups/physics/members/kim", headers=operator)
    client.post("/api/v1/slurm/accounts", json={"name": "phys"}, headers=admin)
    client.delete("/api/v1/users/kim", headers=operator)
    # A refused write leaves no trace.
    client.post("/api/v1/users", json={"username": "Bad"}, headers=operator)

    log = client.get("/api/v1/audit", headers=viewer).json()
    entries = [
        (e["actor"], e["action"], e["resource_type"], e["resource_name"]) for e in reversed(log["items"])
    ]
    assert entries[-7:] == [
        ("operator-token", "create", "user", "kim"),
        ("operator-token", "update", "user", "kim"),
        ("operator-token", "create", "group", "physics"),
        ("operator-token", "add_member", "group", "physics"),
        ("operator-token", "remove_member", "group", "physics"),
        ("admin-token", "create", "slurm_account", "phys"),
        ("operator-token", "delete", "user", "kim"),
    ]
    update = client.get(
        "/api/v1/audit", params={"action": "update", "resource_name": "kim"}, headers=viewer
    ).json()["items"][0]
    assert update["before"]["email"] == "k@a.example" and update["after"]["email"] == "k@b.example"
    assert update["request_id"]
    deletion = client.get("/api/v1/audit", params={"action": "delete"}, headers=viewer).json()["items"][0]
    assert deletion["before"]["username"] == "kim" and deletion["after"] is None


def test_request_id_links_audit_and_response(client: TestClient, operator: dict[str, str]) -> None:
    response = client.post(
        "/api/v1/users", json={"username": "kim"}, headers={**operator, "X-Request-ID": "req-42"}
    )
    assert response.headers["x-request-id"] == "req-42"
    entry = client.get("/api/v1/audit", params={"resource_name": "kim"}, headers=operator).json()["items"][0]
    assert entry["request_id"] == "req-42"
    unsafe = client.get("/healthz", headers={"X-Request-ID": "bad id\nwith newline"})
    assert unsafe.headers["x-request-id"] != "bad id\nwith newline"


def test_audit_holds_public_key_lines_only(client: TestClient, operator: dict[str, str]) -> None:
    key = keys.ed25519_key("kim@laptop")
    client.post("/api/v1/users", json={"username": "kim", "ssh_public_keys": [key]}, headers=operator)
    entry = client.get("/api/v1/audit", params={"resource_name": "kim"}, headers=operator).json()["items"][0]
    assert entry["after"]["ssh_public_keys"] == [key]


def test_outbox_generations_count_changes(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    client.post("/api/v1/users", json={"username": "kim"}, headers=operator)
    with sessions() as session:
        first = {(k, n): g for k, n, g in pending(session)}
    client.patch("/api/v1/users/kim", json={"display_name": "Kim"}, headers=operator)
    client.patch("/api/v1/users/kim", json={"display_name": "Kim"}, headers=operator)  # no change: no mark
    with sessions() as session:
        second = {(k, n): g for k, n, g in pending(session)}
    assert second[("user", "kim")] == first[("user", "kim")] + 1
    assert second[("group", "kim")] == first[("group", "kim")]


def test_since_filter_accepts_times_with_and_without_zone(client: TestClient, viewer: dict[str, str]) -> None:
    client.post("/api/v1/users", json={"username": "kim"}, headers=viewer)  # refused: viewer, no entry
    for since in ("2000-01-01T00:00:00", "2000-01-01T00:00:00+02:00"):
        response = client.get("/api/v1/audit", params={"since": since}, headers=viewer)
        assert response.status_code == 200, response.text
    future = client.get("/api/v1/audit", params={"since": "2999-01-01T00:00:00Z"}, headers=viewer).json()
    assert future["total"] == 0


def _member_changes(client: TestClient, headers: dict[str, str], group: str) -> list[tuple[str, Any, Any]]:
    """The group's audit entries, oldest first: (action, members_added, members_removed) as `after` says."""
    items = client.get("/api/v1/audit", params={"resource_name": group}, headers=headers).json()["items"]
    return [
        (e["action"], (e["after"] or {}).get("members_added"), (e["after"] or {}).get("members_removed"))
        for e in reversed(items)
        if e["resource_type"] == "group"
    ]


def test_every_change_of_a_member_list_names_who_joined_and_who_left(
    client: TestClient, operator: dict[str, str], viewer: dict[str, str]
) -> None:
    for name in ("ann", "bob", "cy", "dee"):
        assert client.post("/api/v1/users", json={"username": name}, headers=operator).status_code == 201
    client.post("/api/v1/groups", json={"name": "lab", "members": ["bob", "ann"]}, headers=operator)
    client.put("/api/v1/groups/lab/members/cy", headers=operator)
    client.delete("/api/v1/groups/lab/members/ann", headers=operator)
    client.patch("/api/v1/groups/lab", json={"members": ["bob", "dee"]}, headers=operator)
    client.patch("/api/v1/groups/lab", json={"description": "no member change"}, headers=operator)
    client.patch("/api/v1/users/ann", json={"groups": ["lab"]}, headers=operator)  # the user's side
    client.patch("/api/v1/users/bob", json={"groups": []}, headers=operator)
    client.delete("/api/v1/users/dee", headers=operator)
    client.post("/api/v1/groups", json={"name": "gone", "members": ["ann"]}, headers=operator)
    client.delete("/api/v1/groups/gone", headers=operator)

    assert _member_changes(client, viewer, "lab") == [
        ("create", ["ann", "bob"], []),
        ("add_member", ["cy"], []),
        ("remove_member", [], ["ann"]),
        ("update", ["dee"], ["cy"]),
        ("update", None, None),  # the member list did not change: no such keys
        ("add_member", ["ann"], []),
        ("remove_member", [], ["bob"]),
        ("remove_member", [], ["dee"]),
    ]
    assert _member_changes(client, viewer, "gone") == [("create", ["ann"], []), ("delete", [], ["ann"])]
