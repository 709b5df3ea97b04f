"""Each identity provider's quirks, with that IdP's exact payload shape (docs/identity-providers.md,
"IdP quirks accepted").

Every test checks what the IdP gets back and what the store holds (users, memberships, outbox).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from sup.store.models import AuditEntry, Group, Membership, OutboxMark, User
from sup.store.outbox import pending
from tests.scim.conftest import (
    ENTERPRISE,
    GROUP_SCHEMA,
    PATCH_OP,
    SCIM,
    USER_SCHEMA,
    create_group,
    create_user,
    patch_body,
)


def _clear_outbox(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        session.execute(delete(OutboxMark))


def _marks(sessions: sessionmaker[Session]) -> set[tuple[str, str]]:
    with sessions() as session:
        return {(kind, name) for kind, name, _ in pending(session)}


def _user(sessions: sessionmaker[Session], username: str) -> User:
    with sessions() as session:
        user = session.scalars(select(User).where(User.username == username)).one()
        session.expunge(user)
        return user


def _members(sessions: sessionmaker[Session], group_name: str) -> set[str]:
    with sessions() as session:
        rows = session.execute(
            select(User.username)
            .join(Membership, Membership.user_id == User.id)
            .join(Group, Group.id == Membership.group_id)
            .where(Group.name == group_name)
        )
        return {name for (name,) in rows}


# --- Microsoft Entra ID -------------------------------------------------------------------------------

ENTRA_USER = {
    "schemas": [USER_SCHEMA, ENTERPRISE],
    "externalId": "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef",
    "userName": "Test_User_ab6490ee@contoso.com",
    "active": True,
    "emails": [{"primary": True, "type": "work", "value": "Test_User_fd0ea19b@testuser.com"}],
    "meta": {"resourceType": "User"},
    "name": {"formatted": "givenName familyName", "familyName": "familyName", "givenName": "givenName"},
    "roles": [],
    ENTERPRISE: {"department": "HPC", "manager": "f3b0a9c2-0001-4d2f-9c55-3e8e2b2c0a11"},
}


def test_entra_create_then_capitalised_ops_and_string_booleans(
    client: TestClient, entra: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    created = client.post(f"{SCIM}/Users", json=ENTRA_USER, headers=entra)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body[ENTERPRISE]["manager"] == {"value": "f3b0a9c2-0001-4d2f-9c55-3e8e2b2c0a11"}
    user = _user(sessions, "test_user_ab6490ee")
    assert user.source == "scim:entra" and user.email == "Test_User_fd0ea19b@testuser.com"
    _clear_outbox(sessions)

    # Entra's documented PATCH: capitalised ops, booleans as strings, a path-less Replace.
    patch = {
        "schemas": [PATCH_OP],
        "Operations": [
            {"op": "Replace", "path": "active", "value": "False"},
            {"op": "Add", "path": "displayName", "value": "Test User"},
        ],
    }
    response = client.patch(f"{SCIM}/Users/{body['id']}", json=patch, headers=entra)
    assert response.status_code == 200, response.text
    assert response.json()["active"] is False and response.json()["displayName"] == "Test User"
    assert _user(sessions, user.username).active is False  # deactivated (locked), not deleted
    assert ("user", user.username) in _marks(sessions)


def test_entra_path_less_replace_with_dotted_keys(
    client: TestClient, entra: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    created = create_user(client, entra, "kim@contoso.com", name={"givenName": "Kim"})
    patch = {
        "schemas": [PATCH_OP],
        "Operations": [
            {
                "op": "Replace",
                "value": {
                    "name.givenName": "Kimberly",
                    "name.familyName": "Wexler",
                    "active": "True",
                    "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department": "Legal",
                },
            }
        ],
    }
    response = client.patch(f"{SCIM}/Users/{created['id']}", json=patch, headers=entra)
    assert response.status_code == 200, response.text
    assert response.json()["name"] == {"givenName": "Kimberly", "familyName": "Wexler"}
    assert response.json()[ENTERPRISE]["department"] == "Legal"
    stored = _user(sessions, "kim")
    assert (stored.given_name, stored.family_name) == ("Kimberly", "Wexler")


def test_entra_adds_a_work_email_that_does_not_exist_yet(
    client: TestClient, entra: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    created = create_user(client, entra, "kim@contoso.com")
    operation: dict[str, Any] = {
        "op": "Add",
        "path": 'emails[type eq "work"].value',
        "value": "kim@contoso.com",
    }
    patch = {"schemas": [PATCH_OP], "Operations": [operation]}
    response = client.patch(f"{SCIM}/Users/{created['id']}", json=patch, headers=entra)
    assert response.status_code == 200, response.text
    assert response.json()["emails"] == [{"type": "work", "value": "kim@contoso.com"}]
    assert _user(sessions, "kim").email == "kim@contoso.com"
    # ... and replaces it the same way later.
    operation.update(op="Replace", value="kim.wexler@contoso.com")
    response = client.patch(f"{SCIM}/Users/{created['id']}", json=patch, headers=entra)
    assert response.json()["emails"] == [{"type": "work", "value": "kim.wexler@contoso.com"}]
    assert _user(sessions, "kim").email == "kim.wexler@contoso.com"


def test_entra_manager_as_a_plain_string(client: TestClient, entra: dict[str, str]) -> None:
    manager = create_user(client, entra, "boss@contoso.com")
    created = create_user(client, entra, "kim@contoso.com")
    patch = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "Add", "path": f"{ENTERPRISE}:manager", "value": manager["id"]}],
    }
    response = client.patch(f"{SCIM}/Users/{created['id']}", json=patch, headers=entra)
    assert response.status_code == 200, response.text
    assert response.json()[ENTERPRISE]["manager"]["value"] == manager["id"]


def test_entra_removes_members_with_a_value_list_and_a_filter(
    client: TestClient, entra: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    ids = [create_user(client, entra, f"user{i}@contoso.com")["id"] for i in range(3)]
    group = create_group(client, entra, "Physics", ids)
    assert _members(sessions, "physics") == {"user0", "user1", "user2"}
    _clear_outbox(sessions)
    patch = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "Remove", "path": "members", "value": [{"value": ids[0]}]}],
    }
    response = client.patch(f"{SCIM}/Groups/{group['id']}", json=patch, headers=entra)
    assert response.status_code == 200, response.text
    assert _members(sessions, "physics") == {"user1", "user2"}
    assert {("members", "physics"), ("user", "user0")} <= _marks(sessions)
    assert ("group", "physics") not in _marks(sessions)  # a member list's change alone
    patch = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "Remove", "path": f'members[value eq "{ids[1]}"]'}],
    }
    response = client.patch(f"{SCIM}/Groups/{group['id']}", json=patch, headers=entra)
    assert [m["value"] for m in response.json()["members"]] == [ids[2]]
    assert _members(sessions, "physics") == {"user2"}


def test_entra_test_connection_filter_that_matches_nothing(client: TestClient, entra: dict[str, str]) -> None:
    # "Test connection" queries a random userName and expects 200 with an empty list.
    response = client.get(
        f"{SCIM}/Users",
        params={"filter": 'userName eq "non-existent user 0c3a1f8e-3b8f-4b1b-9d6e-7c1e0d2b4a11"'},
        headers=entra,
    )
    assert response.status_code == 200, response.text
    assert response.json()["totalResults"] == 0 and response.json()["Resources"] == []


def test_entra_filters_by_external_id(client: TestClient, entra: dict[str, str]) -> None:
    created = client.post(f"{SCIM}/Users", json=ENTRA_USER, headers=entra).json()
    response = client.get(
        f"{SCIM}/Users",
        params={"filter": f'externalId eq "{ENTRA_USER["externalId"]}"'},
        headers=entra,
    )
    assert [r["id"] for r in response.json()["Resources"]] == [created["id"]]


# --- Okta ---------------------------------------------------------------------------------------------

OKTA_USER = {
    "schemas": [USER_SCHEMA],
    "userName": "kim.wexler@example.com",
    "name": {"givenName": "Kim", "familyName": "Wexler"},
    "emails": [{"primary": True, "value": "kim.wexler@example.com", "type": "work"}],
    "displayName": "Kim Wexler",
    "locale": "en-US",
    "externalId": "00ujl29u0le5T6Aj10h7",
    "groups": [],
    "password": "1mz050nq",
    "active": True,
}


def test_okta_upper_case_user_name_filter(client: TestClient, okta: dict[str, str]) -> None:
    created = client.post(f"{SCIM}/Users", json=OKTA_USER, headers=okta).json()
    response = client.get(
        f"{SCIM}/Users",
        params={"filter": 'userName eq "KIM.WEXLER@EXAMPLE.COM"', "startIndex": "1", "count": "100"},
        headers=okta,
    )
    assert response.status_code == 200
    assert [r["id"] for r in response.json()["Resources"]] == [created["id"]]
    assert response.json()["Resources"][0]["userName"] == "kim.wexler@example.com"  # as written
    assert "password" not in response.json()["Resources"][0]


def test_okta_put_deprovisioning_deactivates_and_keeps_the_user(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    created = client.post(f"{SCIM}/Users", json=OKTA_USER, headers=okta).json()
    _clear_outbox(sessions)
    put = {**OKTA_USER, "id": created["id"], "active": False}
    response = client.put(f"{SCIM}/Users/{created['id']}", json=put, headers=okta)
    assert response.status_code == 200, response.text
    assert response.json()["active"] is False
    stored = _user(sessions, "kim_wexler")
    assert stored.active is False and stored.email == "kim.wexler@example.com"
    assert ("user", "kim_wexler") in _marks(sessions)


def test_okta_gallery_patch_active_false_without_path(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    created = client.post(f"{SCIM}/Users", json=OKTA_USER, headers=okta).json()
    patch = {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "value": {"active": False}}]}
    response = client.patch(f"{SCIM}/Users/{created['id']}", json=patch, headers=okta)
    assert response.status_code == 200 and response.json()["active"] is False
    assert _user(sessions, "kim_wexler").active is False


def test_okta_group_push(client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]) -> None:
    ids = [create_user(client, okta, f"user{i}@example.com")["id"] for i in range(2)]
    # Okta's group push: create with members (no `type`), remove by filter, then empty the group.
    created = client.post(
        f"{SCIM}/Groups",
        json={"schemas": [GROUP_SCHEMA], "displayName": "Test SCIMv2", "members": [{"value": ids[0]}]},
        headers=okta,
    )
    assert created.status_code == 201, created.text
    group_id = created.json()["id"]
    assert _members(sessions, "test_scimv2") == {"user0"}
    add = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "add", "path": "members", "value": [{"value": ids[1], "display": "user1"}]}],
    }
    assert client.patch(f"{SCIM}/Groups/{group_id}", json=add, headers=okta).status_code == 200
    assert _members(sessions, "test_scimv2") == {"user0", "user1"}
    remove = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "remove", "path": f'members[value eq "{ids[0]}"]'}],
    }
    assert client.patch(f"{SCIM}/Groups/{group_id}", json=remove, headers=okta).status_code == 200
    assert _members(sessions, "test_scimv2") == {"user1"}
    empty = {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "path": "members", "value": []}]}
    response = client.patch(f"{SCIM}/Groups/{group_id}", json=empty, headers=okta)
    assert response.status_code == 200, response.text
    assert "members" not in response.json()
    assert _members(sessions, "test_scimv2") == set()
    # Okta renames pushed groups with a path-less replace of id and displayName.
    rename = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "replace", "value": {"id": group_id, "displayName": "Test SCIMv2 renamed"}}],
    }
    response = client.patch(f"{SCIM}/Groups/{group_id}", json=rename, headers=okta)
    assert response.status_code == 200, response.text
    assert response.json()["displayName"] == "Test SCIMv2 renamed"
    with sessions() as session:
        assert (
            session.scalars(select(Group.name).where(Group.scim_id == group_id)).one()
            == "test_scimv2_renamed"
        )


# --- authentik, JumpCloud, Keycloak plugins, OneLogin -------------------------------------------------


def test_authentik_removes_members_with_a_value_list(
    client: TestClient, connection: Any, sessions: sessionmaker[Session]
) -> None:
    authentik = connection("authentik")
    ids = [create_user(client, authentik, f"u{i}")["id"] for i in range(3)]
    group = create_group(client, authentik, "lab", ids)
    patch = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "remove", "path": "members", "value": [{"value": ids[0]}, {"value": ids[2]}]}],
    }
    response = client.patch(f"{SCIM}/Groups/{group['id']}", json=patch, headers=authentik)
    assert response.status_code == 200, response.text
    assert _members(sessions, "lab") == {"u1"}


def test_jumpcloud_repeated_member_adds_are_idempotent(
    client: TestClient, connection: Any, sessions: sessionmaker[Session]
) -> None:
    jumpcloud = connection("jumpcloud")
    member = create_user(client, jumpcloud, "kim")["id"]
    group = create_group(client, jumpcloud, "lab")
    add = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "add", "path": "members", "value": [{"value": member}]}],
    }
    for _ in range(3):
        response = client.patch(f"{SCIM}/Groups/{group['id']}", json=add, headers=jumpcloud)
        assert response.status_code == 200, response.text
        assert [m["value"] for m in response.json()["members"]] == [member]
    assert _members(sessions, "lab") == {"kim"}


def test_keycloak_plugin_full_put_with_relative_refs(
    client: TestClient, connection: Any, sessions: sessionmaker[Session]
) -> None:
    keycloak = connection("keycloak")
    ids = [create_user(client, keycloak, f"u{i}")["id"] for i in range(2)]
    group = create_group(client, keycloak, "lab", [ids[0]])
    put = {
        "schemas": [GROUP_SCHEMA],
        "id": group["id"],
        "displayName": "lab",
        "members": [{"value": i, "$ref": f"Users/{i}", "type": "User"} for i in ids],
    }
    response = client.put(f"{SCIM}/Groups/{group['id']}", json=put, headers=keycloak)
    assert response.status_code == 200, response.text
    refs = {m["$ref"] for m in response.json()["members"]}
    assert refs == {f"http://testserver{SCIM}/Users/{i}" for i in ids}  # absolute when read back
    assert _members(sessions, "lab") == {"u0", "u1"}


def test_onelogin_legacy_core_schema_urn(client: TestClient, connection: Any) -> None:
    onelogin = connection("onelogin")
    body = {"schemas": ["urn:scim:schemas:core:2.0"], "userName": "kim@onelogin.example"}
    response = client.post(f"{SCIM}/Users", json=body, headers=onelogin)
    assert response.status_code == 201, response.text
    assert response.json()["schemas"][0] == USER_SCHEMA


@pytest.mark.parametrize(
    "database_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
def test_member_patches_sent_side_by_side_all_land(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    """IdPs push a group's member changes in parallel and without If-Match: each PATCH applies to
    what the others committed (the group's row is locked for the request), so none is refused with
    409 and no member is lost. (SQLite takes one writer at a time: PostgreSQL only.)"""
    ids = [create_user(client, okta, f"user{i}@corp.example")["id"] for i in range(24)]
    group = create_group(client, okta, "Physics")

    def add(user_id: str) -> int:
        operation = {"op": "add", "path": "members", "value": [{"value": user_id}]}
        url = f"{SCIM}/Groups/{group['id']}"
        status: int = client.patch(url, json=patch_body(operation), headers=okta).status_code
        return status

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(add, ids))
    assert statuses == [200] * len(ids)
    assert _members(sessions, "physics") == {f"user{i}" for i in range(24)}
    # Each PATCH saw the members the ones before it committed: the audit trail is one chain.
    with sessions() as session:
        entries = session.scalars(
            select(AuditEntry)
            .where(AuditEntry.resource_name == "physics", AuditEntry.action == "update")
            .order_by(AuditEntry.id)
        ).all()
        chain = [(e.before or {}).get("members") for e in entries]
        assert len(entries) == len(ids)
        assert chain == [[], *[(e.after or {}).get("members") for e in entries[:-1]]]
