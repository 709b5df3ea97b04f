"""/api/v1/groups and members."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sup.app import create_app
from sup.config import Settings
from sup.groups.schemas import GroupCreate
from sup.groups.service import create_group
from sup.targets.slurm.settings import SlurmSettings
from tests.api.helpers import fields, row_counts
from tests.conftest import ACTOR

GROUPS = "/api/v1/groups"


def _users(client: TestClient, headers: dict[str, str], *names: str) -> None:
    for name in names:
        assert client.post("/api/v1/users", json={"username": name}, headers=headers).status_code == 201


def test_create_with_members(client: TestClient, operator: dict[str, str]) -> None:
    _users(client, operator, "kim", "saul")
    response = client.post(
        GROUPS,
        json={"name": "physics", "description": "Physics lab", "members": ["saul", "kim"]},
        headers=operator,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["gid_number"] == 50000 and body["members"] == ["kim", "saul"] and body["private"] is False
    assert client.get("/api/v1/users/kim", headers=operator).json()["groups"] == ["physics"]


def test_unknown_and_repeated_members_are_named(client: TestClient, operator: dict[str, str]) -> None:
    _users(client, operator, "kim")
    response = client.post(
        GROUPS, json={"name": "physics", "members": ["kim", "ghost", "kim"]}, headers=operator
    )
    assert response.status_code == 422
    assert fields(response.json()) == {"members.1", "members.2"}
    assert client.get(f"{GROUPS}/physics", headers=operator).status_code == 404


def test_member_put_is_idempotent_and_delete_removes(client: TestClient, operator: dict[str, str]) -> None:
    _users(client, operator, "kim")
    client.post(GROUPS, json={"name": "physics"}, headers=operator)
    for _ in range(2):
        assert client.put(f"{GROUPS}/physics/members/kim", headers=operator).status_code == 204
    assert client.get(f"{GROUPS}/physics", headers=operator).json()["members"] == ["kim"]
    assert client.delete(f"{GROUPS}/physics/members/kim", headers=operator).status_code == 204
    assert client.get(f"{GROUPS}/physics", headers=operator).json()["members"] == []
    assert client.delete(f"{GROUPS}/physics/members/kim", headers=operator).status_code == 404
    assert client.put(f"{GROUPS}/physics/members/ghost", headers=operator).status_code == 404
    assert client.put(f"{GROUPS}/nope/members/kim", headers=operator).status_code == 404


def test_patch_members_replaces_the_list(client: TestClient, operator: dict[str, str]) -> None:
    _users(client, operator, "a1", "b1", "c1")
    client.post(GROUPS, json={"name": "physics", "members": ["a1", "b1"]}, headers=operator)
    response = client.patch(f"{GROUPS}/physics", json={"members": ["b1", "c1"]}, headers=operator)
    assert response.status_code == 200 and response.json()["members"] == ["b1", "c1"]
    assert response.json()["version"] == 2


def test_rename_and_gid_change(client: TestClient, operator: dict[str, str]) -> None:
    client.post(GROUPS, json={"name": "physics"}, headers=operator)
    response = client.patch(f"{GROUPS}/physics", json={"name": "phys", "gid_number": 50500}, headers=operator)
    assert response.status_code == 200
    assert response.json()["name"] == "phys" and response.json()["gid_number"] == 50500
    # 50000 is a tombstone now
    reuse = client.post(GROUPS, json={"name": "chem", "gid_number": 50000}, headers=operator)
    assert reuse.status_code == 409 and fields(reuse.json()) == {"gid_number"}


def test_private_groups_are_managed_with_their_user(client: TestClient, operator: dict[str, str]) -> None:
    _users(client, operator, "kim", "saul")
    assert client.get(f"{GROUPS}/kim", headers=operator).json()["private"] is True
    assert client.put(f"{GROUPS}/kim/members/saul", headers=operator).status_code == 409
    assert client.patch(f"{GROUPS}/kim", json={"name": "kimg"}, headers=operator).status_code == 409
    assert client.delete(f"{GROUPS}/kim", headers=operator).status_code == 409
    joined = client.post("/api/v1/users", json={"username": "howard", "groups": ["kim"]}, headers=operator)
    assert joined.status_code == 422 and fields(joined.json()) == {"groups.0"}
    ordinary = client.get(GROUPS, params={"private": "false"}, headers=operator).json()
    assert ordinary["total"] == 0


def test_delete_refused_while_bound_to_a_slurm_account(
    client: TestClient, operator: dict[str, str], admin: dict[str, str]
) -> None:
    client.post(GROUPS, json={"name": "physics"}, headers=operator)
    client.post("/api/v1/slurm/accounts", json={"name": "phys", "group": "physics"}, headers=admin)
    response = client.delete(f"{GROUPS}/physics", headers=operator)
    assert response.status_code == 409 and "bound to Slurm account 'phys'" in response.json()["detail"]
    client.delete("/api/v1/slurm/accounts/phys", headers=admin)
    assert client.delete(f"{GROUPS}/physics", headers=operator).status_code == 204


def test_list_filters(client: TestClient, operator: dict[str, str]) -> None:
    _users(client, operator, "kim")
    client.post(GROUPS, json={"name": "physics", "members": ["kim"]}, headers=operator)
    client.post(GROUPS, json={"name": "chemistry"}, headers=operator)
    names = lambda **p: [g["name"] for g in client.get(GROUPS, params=p, headers=operator).json()["items"]]  # noqa: E731
    assert names() == ["chemistry", "kim", "physics"]
    assert names(member="kim") == ["physics"]
    assert names(q="chem") == ["chemistry"]
    assert names(private="true") == ["kim"]


def test_privileged_groups_are_403_for_a_source_not_allowed(
    settings: Settings, engine: Engine, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    """With the admin API left out of sources.privileged_group_writers, it too gets 403 (problem+json)
    for an admin group: create, rename to, add a member; nothing is written."""
    slurm = SlurmSettings(cluster="c1", admin_groups={"hpc-admins": "Administrator", "hpc-ops": "Operator"})
    policy = settings.sources.model_copy(update={"privileged_group_writers": ["import"]})
    locked = settings.model_copy(update={"slurm": slurm, "sources": policy})
    with TestClient(create_app(locked, engine), raise_server_exceptions=False) as client:
        _users(client, operator, "kim")
        assert client.post(GROUPS, json={"name": "lab"}, headers=operator).status_code == 201
        with sessions.begin() as session:  # as an import made it
            create_group(session, locked, ACTOR, GroupCreate(name="hpc-admins"), "import")
        before = row_counts(sessions)
        for method, url, body in (
            ("POST", GROUPS, {"name": "hpc-ops"}),
            ("PATCH", f"{GROUPS}/lab", {"name": "hpc-ops"}),
            ("PUT", f"{GROUPS}/hpc-admins/members/kim", None),
            ("PATCH", f"{GROUPS}/hpc-admins", {"members": ["kim"]}),
            ("PATCH", "/api/v1/users/kim", {"groups": ["lab", "hpc-admins"]}),
        ):
            response = client.request(method, url, json=body, headers=operator)
            assert response.status_code == 403, (method, url, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            assert "is privileged" in response.json()["detail"]
            assert row_counts(sessions) == before
