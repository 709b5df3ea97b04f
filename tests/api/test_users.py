"""/api/v1/users against a real database: create, read, list, update, delete."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete
from sqlalchemy.orm import Session, sessionmaker

from sup.app import create_app
from sup.config import Settings
from sup.store.models import OutboxMark
from sup.store.outbox import pending
from sup.users import service as users_service
from tests.api.helpers import fields, row_counts
from tests.support import keys

USERS = "/api/v1/users"


def test_create_returns_the_user_with_allocated_ids(client: TestClient, operator: dict[str, str]) -> None:
    key = keys.ed25519_key("kim@laptop")
    response = client.post(
        USERS,
        json={
            "username": "kim",
            "email": "kim@corp.example",
            "display_name": "Kim Wexler",
            "ssh_public_keys": [key],
        },
        headers=operator,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["username"] == "kim"
    assert body["uid_number"] == 10000 and body["primary_gid"] == 10000
    assert body["login_shell"] == "/bin/bash" and body["home_directory"] == "/home/kim"
    assert body["ssh_public_keys"] == [key]
    assert body["active"] is True and body["source"] == "api" and body["version"] == 1
    assert response.headers["etag"] == '"1"'
    assert response.headers["location"] == "/api/v1/users/kim"
    read = client.get(f"{USERS}/kim", headers=operator)
    assert read.status_code == 200 and read.json() == body


def test_create_marks_user_and_private_group_dirty(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    client.post("/api/v1/groups", json={"name": "physics"}, headers=operator)
    client.post(USERS, json={"username": "kim", "groups": ["physics"]}, headers=operator)
    with sessions() as session:
        marks = {(kind, name) for kind, name, _ in pending(session)}
    assert {("user", "kim"), ("group", "kim"), ("members", "physics")} <= marks


def test_duplicate_username_is_409(client: TestClient, operator: dict[str, str]) -> None:
    assert client.post(USERS, json={"username": "kim"}, headers=operator).status_code == 201
    response = client.post(USERS, json={"username": "kim"}, headers=operator)
    assert response.status_code == 409
    assert fields(response.json()) == {"username"}


def test_username_clashing_with_a_group_is_409(client: TestClient, operator: dict[str, str]) -> None:
    client.post("/api/v1/groups", json={"name": "physics"}, headers=operator)
    response = client.post(USERS, json={"username": "physics"}, headers=operator)
    assert response.status_code == 409
    assert "private group needs that name" in response.json()["detail"]


def test_list_paginates_and_filters(client: TestClient, operator: dict[str, str]) -> None:
    client.post("/api/v1/groups", json={"name": "physics"}, headers=operator)
    for i in range(7):
        client.post(
            USERS,
            json={
                "username": f"user{i}",
                "email": f"u{i}@lab.example",
                "active": i % 2 == 0,
                "groups": ["physics"] if i < 3 else [],
            },
            headers=operator,
        )
    page = client.get(USERS, params={"limit": 3, "offset": 3}, headers=operator).json()
    assert page["total"] == 7 and page["limit"] == 3 and page["offset"] == 3
    assert [u["username"] for u in page["items"]] == ["user3", "user4", "user5"]
    inactive = client.get(USERS, params={"active": "false"}, headers=operator).json()
    assert [u["username"] for u in inactive["items"]] == ["user1", "user3", "user5"]
    members = client.get(USERS, params={"group": "physics"}, headers=operator).json()
    assert [u["username"] for u in members["items"]] == ["user0", "user1", "user2"]
    search = client.get(USERS, params={"q": "U4@LAB"}, headers=operator).json()
    assert [u["username"] for u in search["items"]] == ["user4"]
    # LIKE wildcards in q are literal: "_" must not match every character.
    assert client.get(USERS, params={"q": "user_"}, headers=operator).json()["total"] == 0


def test_page_size_is_capped(client: TestClient, viewer: dict[str, str]) -> None:
    response = client.get(USERS, params={"limit": 100000}, headers=viewer)
    assert response.status_code == 422 and fields(response.json()) == {"limit"}


def test_patch_changes_fields_and_bumps_version(client: TestClient, operator: dict[str, str]) -> None:
    client.post(USERS, json={"username": "kim", "email": "kim@a.example"}, headers=operator)
    key = keys.ed25519_key("new")
    response = client.patch(
        f"{USERS}/kim",
        json={
            "email": None,
            "display_name": "Kim",
            "login_shell": "/bin/zsh",
            "ssh_public_keys": [key],
            "active": False,
        },
        headers={**operator, "If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["email"] is None and body["display_name"] == "Kim" and body["login_shell"] == "/bin/zsh"
    assert body["ssh_public_keys"] == [key] and body["active"] is False
    assert body["version"] == 2 and response.headers["etag"] == '"2"'


def test_patch_with_stale_etag_is_412_and_changes_nothing(
    client: TestClient, operator: dict[str, str]
) -> None:
    client.post(USERS, json={"username": "kim"}, headers=operator)
    client.patch(f"{USERS}/kim", json={"display_name": "first"}, headers=operator)
    response = client.patch(
        f"{USERS}/kim", json={"display_name": "second"}, headers={**operator, "If-Match": '"1"'}
    )
    assert response.status_code == 412
    assert client.get(f"{USERS}/kim", headers=operator).json()["display_name"] == "first"


def test_patch_that_changes_nothing_keeps_the_version(client: TestClient, operator: dict[str, str]) -> None:
    client.post(USERS, json={"username": "kim", "email": "k@x.example"}, headers=operator)
    response = client.patch(f"{USERS}/kim", json={"email": "k@x.example"}, headers=operator)
    assert response.json()["version"] == 1


def test_patch_ssh_keys_alone_bumps_the_version(client: TestClient, operator: dict[str, str]) -> None:
    client.post(USERS, json={"username": "kim"}, headers=operator)
    response = client.patch(f"{USERS}/kim", json={"ssh_public_keys": [keys.ed25519_key()]}, headers=operator)
    assert response.json()["version"] == 2


def test_a_tab_in_a_key_comment_is_stored_as_a_space(client: TestClient, operator: dict[str, str]) -> None:
    # LDAP refuses a value with a control character, and with it the user's whole entry.
    key = keys.ed25519_key()
    created = client.post(
        USERS, json={"username": "kim", "ssh_public_keys": [f"{key} Kim\tWexler"]}, headers=operator
    )
    assert created.status_code == 201, created.text
    assert created.json()["ssh_public_keys"] == [f"{key} Kim Wexler"]
    patched = client.patch(f"{USERS}/kim", json={"ssh_public_keys": [f"{key}\tlaptop\t"]}, headers=operator)
    assert patched.status_code == 200, patched.text
    assert client.get(f"{USERS}/kim", headers=operator).json()["ssh_public_keys"] == [f"{key} laptop"]


def test_rename_moves_private_group_home_and_ids(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    client.post("/api/v1/groups", json={"name": "physics"}, headers=operator)
    client.post(USERS, json={"username": "kim", "groups": ["physics"]}, headers=operator)
    response = client.patch(f"{USERS}/kim", json={"username": "kwexler"}, headers=operator)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["username"] == "kwexler" and body["uid_number"] == 10000
    assert body["home_directory"] == "/home/kwexler" and body["groups"] == ["physics"]
    assert client.get(f"{USERS}/kim", headers=operator).status_code == 404
    private = client.get("/api/v1/groups/kwexler", headers=operator).json()
    assert private["private"] is True and private["gid_number"] == 10000
    assert client.get("/api/v1/groups/physics", headers=operator).json()["members"] == ["kwexler"]
    with sessions() as session:
        marks = {(kind, name) for kind, name, _ in pending(session)}
    assert {("user", "kim"), ("user", "kwexler"), ("group", "kim"), ("group", "kwexler")} <= marks


def test_change_uid_releases_the_old_one(client: TestClient, operator: dict[str, str]) -> None:
    client.post(USERS, json={"username": "kim"}, headers=operator)
    assert (
        client.patch(f"{USERS}/kim", json={"uid_number": 12345}, headers=operator).json()["uid_number"]
        == 12345
    )
    response = client.post(USERS, json={"username": "bob", "uid_number": 10000}, headers=operator)
    assert response.status_code == 409 and "never reused" in response.json()["detail"]


def test_primary_gid_of_a_private_group_user_changes_through_the_group(
    client: TestClient, operator: dict[str, str]
) -> None:
    client.post(USERS, json={"username": "kim"}, headers=operator)
    response = client.patch(f"{USERS}/kim", json={"primary_gid": 50001}, headers=operator)
    assert response.status_code == 422 and fields(response.json()) == {"primary_gid"}
    assert client.patch("/api/v1/groups/kim", json={"gid_number": 10500}, headers=operator).status_code == 200
    assert client.get(f"{USERS}/kim", headers=operator).json()["primary_gid"] == 10500


def test_delete_removes_user_private_group_and_memberships(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    client.post("/api/v1/groups", json={"name": "physics"}, headers=operator)
    kim = {"username": "kim", "groups": ["physics"], "ssh_public_keys": [keys.ed25519_key()]}
    client.post(USERS, json=kim, headers=operator)
    before = row_counts(sessions)
    response = client.delete(f"{USERS}/kim", headers={**operator, "If-Match": '"1"'})
    assert response.status_code == 204
    assert client.get(f"{USERS}/kim", headers=operator).status_code == 404
    assert client.get("/api/v1/groups/kim", headers=operator).status_code == 404
    assert client.get("/api/v1/groups/physics", headers=operator).json()["members"] == []
    after = row_counts(sessions)
    assert after["users"] == before["users"] - 1 and after["ssh_keys"] == before["ssh_keys"] - 1
    assert after["id_allocations"] == before["id_allocations"]  # tombstones stay


def test_delete_with_stale_etag_is_412(client: TestClient, operator: dict[str, str]) -> None:
    client.post(USERS, json={"username": "kim"}, headers=operator)
    assert client.delete(f"{USERS}/kim", headers={**operator, "If-Match": '"7"'}).status_code == 412
    assert client.get(f"{USERS}/kim", headers=operator).status_code == 200


def test_unknown_user_is_404_problem(client: TestClient, viewer: dict[str, str]) -> None:
    response = client.get(f"{USERS}/ghost", headers=viewer)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == "user 'ghost' does not exist"


def test_status_reports_disabled_targets(client: TestClient, operator: dict[str, str]) -> None:
    client.post(USERS, json={"username": "kim"}, headers=operator)
    status = client.get(f"{USERS}/kim/status", headers=operator).json()
    assert status == {
        "username": "kim",
        "targets": [
            {"target": t, "state": "disabled", "last_error": None, "attempts": 0, "updated_at": None}
            for t in ("ldap", "slurm", "kube")
        ],
    }


def test_slurm_default_account_is_checked_audited_and_marked(
    client: TestClient, operator: dict[str, str], admin: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    before = row_counts(sessions)
    unknown = client.post(USERS, json={"username": "kim", "slurm_default_account": "phys"}, headers=operator)
    assert unknown.status_code == 422 and fields(unknown.json()) == {"slurm_default_account"}
    bad = client.post(USERS, json={"username": "kim", "slurm_default_account": "Phys!"}, headers=operator)
    assert bad.status_code == 422 and fields(bad.json()) == {"slurm_default_account"}
    assert row_counts(sessions) == before  # refused: nothing written

    client.post("/api/v1/slurm/accounts", json={"name": "phys"}, headers=admin)
    client.post("/api/v1/slurm/accounts", json={"name": "chem"}, headers=admin)
    created = client.post(USERS, json={"username": "kim", "slurm_default_account": "phys"}, headers=operator)
    assert created.status_code == 201 and created.json()["slurm_default_account"] == "phys"
    plain = client.post(USERS, json={"username": "saul"}, headers=operator).json()
    assert plain["slurm_default_account"] is None

    with sessions.begin() as session:
        session.execute(delete(OutboxMark))
    moved = client.patch(f"{USERS}/kim", json={"slurm_default_account": "chem"}, headers=operator)
    assert moved.status_code == 200 and moved.json()["slurm_default_account"] == "chem"
    assert moved.json()["version"] == 2
    with sessions() as session:
        assert ("user", "kim") in {(kind, name) for kind, name, _ in pending(session)}
    audit = client.get(
        "/api/v1/audit", params={"resource_name": "kim", "action": "update"}, headers=admin
    ).json()["items"][0]
    assert (audit["before"]["slurm_default_account"], audit["after"]["slurm_default_account"]) == (
        "phys",
        "chem",
    )
    wrong = client.patch(f"{USERS}/kim", json={"slurm_default_account": "bio"}, headers=operator)
    assert wrong.status_code == 422 and fields(wrong.json()) == {"slurm_default_account"}

    busy = client.delete("/api/v1/slurm/accounts/chem", headers=admin)
    assert busy.status_code == 409 and "default account of user 'kim'" in busy.json()["detail"]
    cleared = client.patch(f"{USERS}/kim", json={"slurm_default_account": None}, headers=operator)
    assert cleared.json()["slurm_default_account"] is None
    assert client.delete("/api/v1/slurm/accounts/chem", headers=admin).status_code == 204


def test_a_home_belongs_to_one_user(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    """Two users cannot share a home (a login pod mounts each member's volume at their home): a
    chosen home, a default one, or one a rename moves, is refused when another user has it, saying
    who (whoever may write a home may read every user's)."""
    assert client.post(USERS, json={"username": "kim"}, headers=operator).status_code == 201
    lee = client.post(USERS, json={"username": "lee", "home_directory": "/home/lee.w"}, headers=operator)
    assert lee.status_code == 201, lee.text
    before = row_counts(sessions)
    for method, url, body, holder in (
        ("POST", USERS, {"username": "amy", "home_directory": "/home/kim"}, "kim"),
        ("PATCH", f"{USERS}/lee", {"home_directory": "/home/kim"}, "kim"),
        ("POST", USERS, {"username": "leew", "home_directory": "/home/lee.w"}, "lee"),
    ):
        response = client.request(method, url, json=body, headers=operator)
        assert response.status_code == 409, response.text
        problem = response.json()
        assert fields(problem) == {"home_directory"}
        assert f"already used by another user ('{holder}')" in problem["detail"]
    assert row_counts(sessions) == before
    # A rename moves a default home: onto one another user has, it is refused.
    bo = client.post(USERS, json={"username": "bo", "home_directory": "/home/ann"}, headers=operator)
    assert bo.status_code == 201, bo.text
    renamed = client.patch(f"{USERS}/kim", json={"username": "ann"}, headers=operator)
    assert renamed.status_code == 409 and fields(renamed.json()) == {"home_directory"}
    assert client.get(f"{USERS}/kim", headers=operator).json()["home_directory"] == "/home/kim"


def test_a_home_inside_or_above_another_persons_is_refused(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    """A group's login pod mounts every member's home at their home directory: bob's home inside
    alice's would be mounted over her directory (issue 24). Refused on create, on PATCH and when a
    rename moves a default home, with a 409 naming the person; nothing is written."""
    for body in ({"username": "alice"}, {"username": "carol", "home_directory": "/home/team/carol"}):
        assert client.post(USERS, json=body, headers=operator).status_code == 201
    assert client.post(USERS, json={"username": "dan"}, headers=operator).status_code == 201
    before = row_counts(sessions)
    inside_alice = "lies inside the home '/home/alice' of user 'alice'"
    above_carol = "contains the home '/home/team/carol' of user 'carol'"
    for method, url, body, said in (
        ("POST", USERS, {"username": "bob", "home_directory": "/home/alice/.ssh"}, inside_alice),
        ("POST", USERS, {"username": "bob", "home_directory": "/home/team"}, above_carol),
        ("POST", USERS, {"username": "team"}, f"'/home/team' {above_carol}"),
        ("PATCH", f"{USERS}/dan", {"home_directory": "/home/alice/x/y"}, "of user 'alice'"),
        ("PATCH", f"{USERS}/dan", {"home_directory": "/home/team"}, "of user 'carol'"),
        ("PATCH", f"{USERS}/dan", {"username": "team"}, "of user 'carol'"),  # the rename moves /home/dan
    ):
        response = client.request(method, url, json=body, headers=operator)
        assert response.status_code == 409, (body, response.text)
        problem = response.json()
        assert fields(problem) == {"home_directory"} and said in problem["detail"], problem
        assert response.headers["content-type"].startswith("application/problem+json")
    assert row_counts(sessions) == before
    assert client.get(f"{USERS}/dan", headers=operator).json()["home_directory"] == "/home/dan"
    # Component by component: /home/al is not inside /home/alice, and one's own home may go deeper.
    assert client.post(USERS, json={"username": "al"}, headers=operator).status_code == 201
    deeper = client.patch(f"{USERS}/alice", json={"home_directory": "/home/alice/home"}, headers=operator)
    assert deeper.status_code == 200, deeper.text


def test_a_home_taken_past_the_check_is_a_409_from_the_unique_index(
    client: TestClient, operator: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store holds one person per home on its own (a unique index, migration 0009): a write that
    got past the service's check (a race the check lost) is a 409 on home_directory, not a 500 and
    not a second holder."""
    assert client.post(USERS, json={"username": "kim"}, headers=operator).status_code == 201
    monkeypatch.setattr(users_service, "check_home", lambda *args, **kwargs: None)
    response = client.post(USERS, json={"username": "amy", "home_directory": "/home/kim"}, headers=operator)
    assert response.status_code == 409, response.text
    assert fields(response.json()) == {"home_directory"}
    assert client.get(f"{USERS}/amy", headers=operator).status_code == 404


def test_homes_lie_below_the_home_root(settings: Settings, engine: Engine, operator: dict[str, str]) -> None:
    custom = settings.model_copy(
        update={"accounts": settings.accounts.model_copy(update={"home_template": "/srv/home/{username}"})}
    )
    with TestClient(create_app(custom, engine), raise_server_exceptions=False) as client:
        kim = client.post(USERS, json={"username": "kim"}, headers=operator)
        assert kim.status_code == 201 and kim.json()["home_directory"] == "/srv/home/kim"
        deeper = client.post(
            USERS, json={"username": "lee", "home_directory": "/srv/home/a/lee"}, headers=operator
        )
        assert deeper.status_code == 201, deeper.text
        outside = client.post(
            USERS, json={"username": "amy", "home_directory": "/home/amy"}, headers=operator
        )
        assert outside.status_code == 422 and "/srv/home" in outside.text
