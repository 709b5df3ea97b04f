"""What a SCIM connection may put into its groups (issue 15): only its own users as members, and no
privileged group (a target's admin group, a Slurm account's coordinator group) unless the settings
let it. SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sup.app import create_app
from sup.config import Settings
from sup.targets.ldap.settings import LdapSettings
from sup.targets.slurm.settings import SlurmSettings
from tests.api.helpers import row_counts
from tests.scim.conftest import (
    GROUP_SCHEMA,
    SCIM,
    assert_scim_error,
    create_group,
    create_user,
    patch_body,
)


def _members(client: TestClient, headers: dict[str, str], group_id: str) -> set[str]:
    body = client.get(f"{SCIM}/Groups/{group_id}", headers=headers).json()
    return {m["value"] for m in body.get("members", [])}


def _add(user_id: str) -> dict[str, object]:
    return patch_body({"op": "add", "path": "members", "value": [{"value": user_id}]})


def test_members_resolve_only_to_the_connections_own_users(
    client: TestClient, okta: dict[str, str], entra: dict[str, str], operator: dict[str, str]
) -> None:
    mine = create_user(client, okta, "kim")
    theirs = create_user(client, entra, "lee")
    assert client.post("/api/v1/users", json={"username": "ops"}, headers=operator).status_code == 201
    ops = client.get(f"{SCIM}/Users", params={"filter": 'userName eq "ops"'}, headers=okta).json()
    ops_id = ops["Resources"][0]["id"]

    group = create_group(client, okta, "lab", members=[mine["id"], theirs["id"], ops_id])
    assert _members(client, okta, group["id"]) == {mine["id"]}
    for other in (theirs["id"], ops_id):
        patched = client.patch(f"{SCIM}/Groups/{group['id']}", json=_add(other), headers=okta)
        assert patched.status_code == 200, patched.text
    assert _members(client, okta, group["id"]) == {mine["id"]}
    api_group = client.get("/api/v1/groups/lab", headers=operator).json()
    assert api_group["members"] == ["kim"]


def test_members_put_there_by_an_operator_stay(
    client: TestClient, okta: dict[str, str], operator: dict[str, str]
) -> None:
    mine = create_user(client, okta, "kim")
    group = create_group(client, okta, "lab", members=[mine["id"]])
    client.post("/api/v1/users", json={"username": "ops"}, headers=operator)
    assert client.put("/api/v1/groups/lab/members/ops", headers=operator).status_code in (200, 201, 204)
    other = create_user(client, okta, "amy")
    assert (
        client.patch(f"{SCIM}/Groups/{group['id']}", json=_add(other["id"]), headers=okta).status_code == 200
    )
    assert client.get("/api/v1/groups/lab", headers=operator).json()["members"] == ["amy", "kim", "ops"]


def test_cross_connection_writes_let_members_of_other_sources_in(
    settings: Settings, engine: Engine, okta: dict[str, str], entra: dict[str, str]
) -> None:
    shared = settings.model_copy(
        update={"scim": settings.scim.model_copy(update={"cross_connection_writes": True})}
    )
    with TestClient(create_app(shared, engine), raise_server_exceptions=False) as client:
        theirs = create_user(client, entra, "lee")
        group = create_group(client, okta, "lab", members=[theirs["id"]])
        assert _members(client, okta, group["id"]) == {theirs["id"]}


ADMINS = "hpc-admins"  # the Slurm target's admin group
SUDOERS = "ops"  # the LDAP target's admin group


def _privileged(settings: Settings, **sources: object) -> Settings:
    ldap = LdapSettings(
        url="ldap://ldap.invalid", bind_dn="cn=sup", bind_password="x", base_dn="dc=x", admin_groups=[SUDOERS]
    )
    slurm = SlurmSettings(cluster="c1", admin_groups={ADMINS: "Administrator"})
    policy = settings.sources.model_copy(update=sources)
    return settings.model_copy(update={"ldap": ldap, "slurm": slurm, "sources": policy})


@pytest.fixture
def guarded(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app(_privileged(settings), engine), raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize("name", [ADMINS, SUDOERS])
def test_a_connection_cannot_create_an_admin_group(
    guarded: TestClient, okta: dict[str, str], sessions: sessionmaker[Session], name: str
) -> None:
    kim = create_user(guarded, okta, "kim")
    before = row_counts(sessions)
    body = {"schemas": [GROUP_SCHEMA], "displayName": name, "members": [{"value": kim["id"]}]}
    error = assert_scim_error(guarded.post(f"{SCIM}/Groups", json=body, headers=okta), 403)
    assert name in error["detail"] and "privileged_group_writers" in error["detail"]
    assert row_counts(sessions) == before


def test_a_connection_cannot_rename_its_group_to_an_admin_group(
    guarded: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    group = create_group(guarded, okta, "lab")
    before = row_counts(sessions)
    rename = patch_body({"op": "replace", "path": "displayName", "value": SUDOERS})
    assert_scim_error(guarded.patch(f"{SCIM}/Groups/{group['id']}", json=rename, headers=okta), 403)
    assert row_counts(sessions) == before


def test_a_connection_cannot_fill_an_admin_or_coordinator_group_it_holds(
    settings: Settings,
    engine: Engine,
    okta: dict[str, str],
    admin: dict[str, str],
    sessions: sessionmaker[Session],
) -> None:
    # Groups the connection created before they became privileged (the settings changed later, an
    # operator bound one to a Slurm account as coordinators).
    with TestClient(create_app(settings, engine), raise_server_exceptions=False) as plain:
        kim = create_user(plain, okta, "kim")
        amy = create_user(plain, okta, "amy")
        admins = create_group(plain, okta, ADMINS, members=[kim["id"]])
        coordinators = create_group(plain, okta, "physics-leads", members=[kim["id"]])
        account = {"name": "physics", "group": "physics-leads", "coordinators": "physics-leads"}
        assert plain.post("/api/v1/slurm/accounts", json=account, headers=admin).status_code == 201
    with TestClient(create_app(_privileged(settings), engine), raise_server_exceptions=False) as client:
        for group in (admins, coordinators):
            before = row_counts(sessions)
            added = client.patch(f"{SCIM}/Groups/{group['id']}", json=_add(amy["id"]), headers=okta)
            error = assert_scim_error(added, 403)
            assert group["displayName"] in error["detail"]
            assert row_counts(sessions) == before
            # Taking power away stays possible.
            removed = client.patch(
                f"{SCIM}/Groups/{group['id']}",
                json=patch_body({"op": "remove", "path": f'members[value eq "{kim["id"]}"]'}),
                headers=okta,
            )
            assert removed.status_code == 200, removed.text
            assert _members(client, okta, group["id"]) == set()


def test_privileged_group_writers_can_let_a_connection(
    settings: Settings, engine: Engine, okta: dict[str, str]
) -> None:
    allowed = _privileged(settings, privileged_group_writers=["api", "import", "scim:okta"])
    with TestClient(create_app(allowed, engine), raise_server_exceptions=False) as client:
        kim = create_user(client, okta, "kim")
        group = create_group(client, okta, SUDOERS, members=[kim["id"]])
        assert _members(client, okta, group["id"]) == {kim["id"]}


def test_an_operator_may_create_and_fill_admin_groups(guarded: TestClient, operator: dict[str, str]) -> None:
    assert guarded.post("/api/v1/users", json={"username": "kim"}, headers=operator).status_code == 201
    created = guarded.post("/api/v1/groups", json={"name": SUDOERS, "members": ["kim"]}, headers=operator)
    assert created.status_code == 201, created.text
