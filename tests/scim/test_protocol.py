"""SCIM protocol behaviour on SQLite and PostgreSQL: discovery, errors, filters, sorting, paging,
ETags, PUT/PATCH of the SUP extension, ownership between connections, rate limits, bulk."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from sup.app import create_app
from sup.config import Settings
from sup.store.models import AuditEntry, SshKey, User
from tests.api.helpers import row_counts
from tests.scim.conftest import (
    ENTERPRISE,
    GROUP_SCHEMA,
    PATCH_OP,
    SCIM,
    SUP,
    USER_SCHEMA,
    assert_scim_error,
    create_group,
    create_user,
    patch_body,
    user_body,
)
from tests.support import keys

# --- discovery -----------------------------------------------------------------------------------------


def test_discovery_is_open_and_announces_what_works(client: TestClient) -> None:
    config = client.get(f"{SCIM}/ServiceProviderConfig")
    assert config.status_code == 200
    assert config.headers["content-type"].startswith("application/scim+json")
    body = config.json()
    assert body["patch"]["supported"] and body["filter"] == {"supported": True, "maxResults": 1000}
    assert body["sort"]["supported"] and body["etag"]["supported"]
    assert body["bulk"] == {"supported": True, "maxOperations": 100, "maxPayloadSize": 1048576}
    assert body["changePassword"]["supported"] is False
    types = client.get(f"{SCIM}/ResourceTypes").json()
    assert {r["name"] for r in types["Resources"]} == {"User", "Group"}
    user_type = client.get(f"{SCIM}/ResourceTypes/User").json()
    assert {e["schema"] for e in user_type["schemaExtensions"]} == {ENTERPRISE, SUP}
    schema = client.get(f"{SCIM}/Schemas/{SUP}").json()
    names = {a["name"] for a in schema["attributes"]}
    assert names == {"username", "uidNumber", "gidNumber", "loginShell", "homeDirectory", "sshPublicKeys"}
    # Only RFC 7643 §5's attributes: a strict client refuses a document with one it does not know
    # (RFC 9865's `pagination`; test_conformance.py runs such a client).
    rfc7643 = {"schemas", "meta", "patch", "bulk", "filter", "changePassword", "sort", "etag"}
    assert set(body) == rfc7643 | {"authenticationSchemes"}
    # The enterprise extension under RFC 7643 §8.7.1's name, which clients look it up by.
    enterprise = client.get(f"{SCIM}/Schemas/{ENTERPRISE}").json()
    assert (enterprise["name"], enterprise["description"]) == ("EnterpriseUser", "Enterprise User")


def test_a_search_without_count_gets_the_default_page_size(
    settings: Settings, engine: Engine, okta: dict[str, str]
) -> None:
    """Not announced (no `pagination` in /ServiceProviderConfig), still applied."""
    small = settings.model_copy(update={"scim": settings.scim.model_copy(update={"default_page_size": 2})})
    with TestClient(create_app(small, engine), raise_server_exceptions=False) as client:
        for name in ("ana", "ben", "cho"):
            create_user(client, okta, name)
        page = client.get(f"{SCIM}/Users", headers=okta).json()
    assert (page["totalResults"], page["itemsPerPage"], len(page["Resources"])) == (3, 2, 2)


# --- errors: always SCIM Error bodies --------------------------------------------------------------


def test_errors_are_scim_error_bodies(
    client: TestClient, okta: dict[str, str], tokens: dict[str, str]
) -> None:
    response = client.get(f"{SCIM}/Users")
    assert_scim_error(response, 401)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert_scim_error(client.get(f"{SCIM}/Users", headers={"Authorization": "Bearer sup_nope"}), 401)
    # An admin token is not a SCIM connection.
    assert_scim_error(
        client.get(f"{SCIM}/Users", headers={"Authorization": f"Bearer {tokens['admin']}"}), 403
    )
    assert_scim_error(client.get(f"{SCIM}/Users/00000000-0000-0000-0000-000000000000", headers=okta), 404)
    assert_scim_error(client.get(f"{SCIM}/Pets", headers=okta), 404)
    response = client.delete(f"{SCIM}/Users", headers=okta)
    assert_scim_error(response, 405)
    assert "GET" in response.headers["allow"]
    assert_scim_error(
        client.get(f"{SCIM}/Users", params={"filter": "userName eq"}, headers=okta), 400, "invalidFilter"
    )
    assert_scim_error(
        client.get(f"{SCIM}/Users", params={"filter": 'nope eq "x"'}, headers=okta), 400, "invalidFilter"
    )
    bad_json = client.post(f"{SCIM}/Users", content=b"{", headers=okta)
    assert_scim_error(bad_json, 400, "invalidSyntax")
    assert_scim_error(
        client.post(f"{SCIM}/Users", json={"schemas": [USER_SCHEMA]}, headers=okta), 400, "invalidValue"
    )
    assert_scim_error(client.get(f"{SCIM}/Me", headers=okta), 501)


def test_duplicate_user_name_is_409_uniqueness_and_writes_nothing(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    create_user(client, okta, "kim@corp.example")
    before = row_counts(sessions)
    body = assert_scim_error(
        client.post(f"{SCIM}/Users", json=user_body("KIM@other.example"), headers=okta), 409, "uniqueness"
    )
    assert "'kim'" in body["detail"]  # the POSIX name the two userNames share
    assert row_counts(sessions) == before


def test_invalid_values_are_400_naming_the_scim_attribute(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    before = row_counts(sessions)
    for attribute, value in (("loginShell", "/bin/evil"), ("sshPublicKeys", ["ssh-rsa AAAA"])):
        body = user_body("kim", **{SUP: {attribute: value}})
        error = assert_scim_error(client.post(f"{SCIM}/Users", json=body, headers=okta), 400, "invalidValue")
        assert f"{SUP}:{attribute}" in error["detail"]
    assert_scim_error(client.post(f"{SCIM}/Users", json=user_body("root"), headers=okta), 400, "invalidValue")
    assert row_counts(sessions) == before


def test_read_only_and_removal_rules(client: TestClient, okta: dict[str, str]) -> None:
    user = create_user(client, okta, "kim")
    error = client.patch(
        f"{SCIM}/Users/{user['id']}",
        json=patch_body({"op": "replace", "path": "id", "value": "x"}),
        headers=okta,
    )
    assert_scim_error(error, 400, "mutability")
    removal = patch_body({"op": "remove", "path": f"{SUP}:uidNumber"})
    assert_scim_error(
        client.patch(f"{SCIM}/Users/{user['id']}", json=removal, headers=okta), 400, "mutability"
    )
    no_target = patch_body({"op": "replace", "path": 'emails[type eq "home"].display', "value": "x"})
    response = client.patch(f"{SCIM}/Users/{user['id']}", json=no_target, headers=okta)
    assert response.status_code in (200, 400)  # Entra's tolerance creates it; never a 500


def test_request_size_limit_is_a_scim_413(settings: Settings, engine: Engine, okta: dict[str, str]) -> None:
    limited = settings.model_copy(update={"api": settings.api.model_copy(update={"max_body_bytes": 2048})})
    with TestClient(create_app(limited, engine), raise_server_exceptions=False) as client:
        big = user_body("kim", displayName="x" * 5000)
        assert_scim_error(client.post(f"{SCIM}/Users", json=big, headers=okta), 413)


def test_rate_limit_is_429_with_retry_after(
    settings: Settings, engine: Engine, okta: dict[str, str], entra: dict[str, str]
) -> None:
    slow = settings.model_copy(
        update={
            "scim": settings.scim.model_copy(
                update={
                    "rate_limit": settings.scim.rate_limit.model_copy(
                        update={"requests_per_second": 0.5, "burst": 3}
                    )
                }
            )
        }
    )
    with TestClient(create_app(slow, engine), raise_server_exceptions=False) as client:
        statuses = [client.get(f"{SCIM}/Users", headers=okta).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        limited = client.get(f"{SCIM}/Users", headers=okta)
        assert_scim_error(limited, 429)
        assert int(limited.headers["retry-after"]) >= 1
        assert client.get(f"{SCIM}/Users", headers=entra).status_code == 200  # per connection


# --- filters, sorting, paging, attributes ---------------------------------------------------------


@pytest.fixture
def people(client: TestClient, okta: dict[str, str]) -> dict[str, dict[str, Any]]:
    made = {}
    for login, given, title, active, email_type in (
        ("ann@corp.example", "Ann", "Engineer", True, "work"),
        ("bob@corp.example", "Bob", None, False, "home"),
        ("cy@lab.example", "Cy", "Manager", True, "work"),
    ):
        extra: dict[str, Any] = {
            "name": {"givenName": given, "familyName": "Doe"},
            "active": active,
            "emails": [
                {"value": login, "type": email_type, "primary": True},
                {"value": f"alt.{login}", "type": "other"},
            ],
            "phoneNumbers": [{"value": f"+1-555-{given}", "type": "mobile"}],
            ENTERPRISE: {"department": "HPC" if given != "Bob" else "Legal"},
        }
        if title:
            extra["title"] = title
        made[given] = create_user(client, okta, login, **extra)
    return made


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('userName eq "ANN@corp.example"', {"Ann"}),
        ('userName sw "b"', {"Bob"}),
        ('userName ew "lab.example"', {"Cy"}),
        ('name.givenName co "n"', {"Ann"}),
        ("active eq false", {"Bob"}),
        ("not (active eq false)", {"Ann", "Cy"}),
        ("title pr", {"Ann", "Cy"}),
        ("not (title pr)", {"Bob"}),
        ('title ne "Engineer"', {"Bob", "Cy"}),
        ('emails[type eq "work" and value co "lab"]', {"Cy"}),
        ('emails.value eq "alt.bob@corp.example"', {"Bob"}),
        ('emails co "ALT.ANN"', {"Ann"}),
        ('phoneNumbers[type eq "mobile" and value ew "Cy"]', {"Cy"}),
        (f'{ENTERPRISE}:department eq "legal"', {"Bob"}),
        (f"{SUP}:uidNumber ge 10001", {"Bob", "Cy"}),
        (f'{SUP}:username eq "cy"', {"Cy"}),
        ('(active eq true and title eq "manager") or name.givenName eq "Bob"', {"Bob", "Cy"}),
        ('meta.lastModified gt "2000-01-01T00:00:00Z"', {"Ann", "Bob", "Cy"}),
        ('meta.resourceType eq "User"', {"Ann", "Bob", "Cy"}),
    ],
)
def test_filters_run_in_sql(
    client: TestClient,
    okta: dict[str, str],
    people: dict[str, dict[str, Any]],
    expression: str,
    expected: set[str],
) -> None:
    response = client.get(f"{SCIM}/Users", params={"filter": expression}, headers=okta)
    assert response.status_code == 200, response.text
    found = {r["name"]["givenName"] for r in response.json()["Resources"]}
    assert found == expected
    assert response.json()["totalResults"] == len(expected)


def test_sort_page_and_attributes(
    client: TestClient, okta: dict[str, str], people: dict[str, dict[str, Any]]
) -> None:
    page = client.get(
        f"{SCIM}/Users",
        params={
            "sortBy": "name.givenName",
            "sortOrder": "descending",
            "startIndex": "2",
            "count": "1",
            "attributes": "userName",
        },
        headers=okta,
    ).json()
    assert page["totalResults"] == 3 and page["startIndex"] == 2 and page["itemsPerPage"] == 1
    assert page["Resources"] == [
        {"schemas": [USER_SCHEMA], "id": people["Bob"]["id"], "userName": "bob@corp.example"}
    ]
    count_only = client.get(f"{SCIM}/Users", params={"count": "0"}, headers=okta).json()
    assert count_only["totalResults"] == 3 and count_only["Resources"] == []
    searched = client.post(
        f"{SCIM}/Users/.search",
        json={
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"],
            "filter": "title pr",
            "sortBy": "title",
            "excludedAttributes": ["emails"],
        },
        headers=okta,
    ).json()
    assert [r["title"] for r in searched["Resources"]] == ["Engineer", "Manager"]
    assert all("emails" not in r for r in searched["Resources"])


def test_groups_filter_by_display_name_and_member(
    client: TestClient, okta: dict[str, str], people: dict[str, dict[str, Any]]
) -> None:
    group = create_group(client, okta, "HPC Users", [people["Ann"]["id"]])
    create_group(client, okta, "Other")
    by_name = client.get(
        f"{SCIM}/Groups", params={"filter": 'displayName eq "hpc users"'}, headers=okta
    ).json()
    assert [g["id"] for g in by_name["Resources"]] == [group["id"]]
    by_member = client.get(
        f"{SCIM}/Groups", params={"filter": f'members[value eq "{people["Ann"]["id"]}"]'}, headers=okta
    ).json()
    assert [g["id"] for g in by_member["Resources"]] == [group["id"]]
    user = client.get(f"{SCIM}/Users/{people['Ann']['id']}", headers=okta).json()
    assert [(g["value"], g["display"]) for g in user["groups"]] == [(group["id"], "HPC Users")]
    # Private groups are no SCIM resources.
    all_groups = client.get(f"{SCIM}/Groups", headers=okta).json()
    assert all_groups["totalResults"] == 2


# --- ETags, ids, PUT and the SUP extension ---------------------------------------------------------


def test_etags_and_if_match(client: TestClient, okta: dict[str, str]) -> None:
    user = create_user(client, okta, "kim")
    read = client.get(f"{SCIM}/Users/{user['id']}", headers=okta)
    assert read.headers["etag"] == 'W/"1"' == read.json()["meta"]["version"]
    stale = {**okta, "If-Match": 'W/"7"'}
    assert_scim_error(
        client.patch(
            f"{SCIM}/Users/{user['id']}",
            json=patch_body({"op": "replace", "path": "displayName", "value": "K"}),
            headers=stale,
        ),
        412,
    )
    fresh = {**okta, "If-Match": read.headers["etag"]}
    changed = client.patch(
        f"{SCIM}/Users/{user['id']}",
        json=patch_body({"op": "replace", "path": "displayName", "value": "K"}),
        headers=fresh,
    )
    assert changed.status_code == 200 and changed.headers["etag"] == 'W/"2"'
    assert_scim_error(client.delete(f"{SCIM}/Users/{user['id']}", headers=fresh), 412)


def test_rename_keeps_the_id_and_renames_the_posix_account(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    user = create_user(client, okta, "kim@corp.example")
    rename = patch_body({"op": "replace", "path": "userName", "value": "kim.wexler@corp.example"})
    response = client.patch(f"{SCIM}/Users/{user['id']}", json=rename, headers=okta)
    assert response.status_code == 200, response.text
    assert response.json()["id"] == user["id"]
    assert response.json()[SUP]["username"] == "kim_wexler"
    assert response.json()[SUP]["uidNumber"] == user[SUP]["uidNumber"]
    assert response.json()[SUP]["homeDirectory"] == "/home/kim_wexler"


def test_sup_extension_round_trip_and_put_keeps_what_it_leaves_out(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    key = keys.ed25519_key("kim@laptop")
    posix = {
        "uidNumber": 20001,
        "gidNumber": 20001,
        "loginShell": "/bin/zsh",
        "homeDirectory": "/home/kim.w",  # not the default, and below the home root
        "sshPublicKeys": [key],
    }
    user = create_user(client, okta, "kim", **{"schemas": [USER_SCHEMA, SUP], SUP: posix})
    assert user[SUP] == {**posix, "username": "kim"}
    with sessions() as session:
        assert session.scalars(select(SshKey.origin)).one() == "idp"
    put = client.put(f"{SCIM}/Users/{user['id']}", json=user_body("kim", displayName="Kim"), headers=okta)
    assert put.status_code == 200, put.text
    assert put.json()[SUP] == user[SUP]  # omitted by the PUT: kept
    cleared = client.patch(
        f"{SCIM}/Users/{user['id']}",
        json=patch_body({"op": "remove", "path": f"{SUP}:sshPublicKeys"}),
        headers=okta,
    )
    assert "sshPublicKeys" not in cleared.json()[SUP]
    gid = client.patch(
        f"{SCIM}/Users/{user['id']}",
        json=patch_body({"op": "replace", "path": f"{SUP}:gidNumber", "value": 20002}),
        headers=okta,
    )
    assert gid.status_code == 200, gid.text
    assert gid.json()[SUP]["gidNumber"] == 20002  # the private group moved with it


def test_scim_only_attributes_change_the_version_and_are_audited(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    user = create_user(client, okta, "kim")
    response = client.patch(
        f"{SCIM}/Users/{user['id']}",
        json=patch_body({"op": "add", "path": "title", "value": "Chemist"}),
        headers=okta,
    )
    assert response.json()["title"] == "Chemist" and response.json()["meta"]["version"] == 'W/"2"'
    with sessions() as session:
        actions = list(session.scalars(select(AuditEntry.action).where(AuditEntry.actor == "okta")))
    assert actions == ["create", "update_scim"]


def test_group_writes_name_the_members_added_and_removed_in_the_audit_log(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    ids = {name: create_user(client, okta, name)["id"] for name in ("ann", "bob", "cy")}
    group = create_group(client, okta, "lab", [ids["ann"]])
    url = f"{SCIM}/Groups/{group['id']}"
    add = patch_body({"op": "add", "path": "members", "value": [{"value": ids["bob"]}, {"value": ids["cy"]}]})
    assert client.patch(url, json=add, headers=okta).status_code in (200, 204)
    remove = patch_body({"op": "remove", "path": f'members[value eq "{ids["ann"]}"]'})
    assert client.patch(url, json=remove, headers=okta).status_code in (200, 204)
    put = {"schemas": [GROUP_SCHEMA], "displayName": "lab", "members": [{"value": ids["ann"]}]}
    assert client.put(url, json=put, headers=okta).status_code == 200
    with sessions() as session:
        entries = session.scalars(
            select(AuditEntry).where(AuditEntry.resource_type == "group").order_by(AuditEntry.id)
        ).all()
    assert [(e.action, e.after["members_added"], e.after["members_removed"]) for e in entries if e.after] == [
        ("create", ["ann"], []),
        ("update", ["bob", "cy"], []),
        ("update", [], ["ann"]),
        ("update", ["ann"], ["bob", "cy"]),
    ]


def test_delete_removes_the_user_through_the_service(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    user = create_user(client, okta, "kim")
    assert client.delete(f"{SCIM}/Users/{user['id']}", headers=okta).status_code == 204
    assert_scim_error(client.get(f"{SCIM}/Users/{user['id']}", headers=okta), 404)
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(User)) == 0


# --- ownership between connections -------------------------------------------------------------------


def test_a_connection_cannot_change_another_connections_users(
    client: TestClient,
    okta: dict[str, str],
    entra: dict[str, str],
    operator: dict[str, str],
    sessions: sessionmaker[Session],
) -> None:
    user = create_user(client, okta, "kim")
    group = create_group(client, okta, "lab")
    assert client.get(f"{SCIM}/Users/{user['id']}", headers=entra).status_code == 200  # visible
    before = row_counts(sessions)
    change = patch_body({"op": "replace", "path": "active", "value": False})
    error = assert_scim_error(client.patch(f"{SCIM}/Users/{user['id']}", json=change, headers=entra), 403)
    assert "scim:okta" in error["detail"] and "cross_connection_writes" in error["detail"]
    assert_scim_error(client.delete(f"{SCIM}/Users/{user['id']}", headers=entra), 403)
    assert_scim_error(client.delete(f"{SCIM}/Groups/{group['id']}", headers=entra), 403)
    # Users made through the admin API belong to source "api".
    client.post("/api/v1/users", json={"username": "ops"}, headers=operator)
    ops = client.get(f"{SCIM}/Users", params={"filter": 'userName eq "ops"'}, headers=okta).json()[
        "Resources"
    ][0]
    assert_scim_error(client.patch(f"{SCIM}/Users/{ops['id']}", json=change, headers=okta), 403)
    assert row_counts(sessions)["users"] == before["users"] + 1


def test_cross_connection_writes_when_configured(
    settings: Settings, engine: Engine, okta: dict[str, str], entra: dict[str, str]
) -> None:
    shared = settings.model_copy(
        update={"scim": settings.scim.model_copy(update={"cross_connection_writes": True})}
    )
    with TestClient(create_app(shared, engine), raise_server_exceptions=False) as client:
        user = create_user(client, okta, "kim")
        change = patch_body({"op": "replace", "path": "active", "value": False})
        assert client.patch(f"{SCIM}/Users/{user['id']}", json=change, headers=entra).status_code == 200


# --- bulk ------------------------------------------------------------------------------------------------


def test_bulk_with_bulk_ids_and_a_failing_operation(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    request = {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:BulkRequest"],
        "Operations": [
            {"method": "POST", "path": "/Users", "bulkId": "u1", "data": user_body("ann")},
            {"method": "POST", "path": "/Users", "bulkId": "u2", "data": user_body("root")},
            {
                "method": "POST",
                "path": "/Groups",
                "bulkId": "g1",
                "data": {
                    "schemas": [GROUP_SCHEMA],
                    "displayName": "lab",
                    "members": [{"value": "bulkId:u1"}],
                },
            },
        ],
    }
    response = client.post(f"{SCIM}/Bulk", json=request, headers=okta)
    assert response.status_code == 200, response.text
    statuses = [str(op["status"]) for op in response.json()["Operations"]]
    assert statuses == ["201", "400", "201"]
    lab = client.get(f"{SCIM}/Groups", params={"filter": 'displayName eq "lab"'}, headers=okta).json()[
        "Resources"
    ][0]
    assert len(lab["members"]) == 1
    with sessions() as session:
        assert set(session.scalars(select(User.username))) == {"ann"}
    operations: list[Any] = list(request["Operations"])  # type: ignore[call-overload]
    too_many = {**request, "Operations": operations * 40}
    assert_scim_error(client.post(f"{SCIM}/Bulk", json=too_many, headers=okta), 413)


def test_patch_op_schema(client: TestClient, okta: dict[str, str]) -> None:
    user = create_user(client, okta, "kim")
    response = client.patch(
        f"{SCIM}/Users/{user['id']}", json={"schemas": [PATCH_OP], "Operations": []}, headers=okta
    )
    assert response.status_code in (200, 400)


def test_an_overly_complex_filter_is_too_many(client: TestClient, okta: dict[str, str]) -> None:
    expression = " or ".join(f'userName eq "u{i}"' for i in range(65))
    assert_scim_error(
        client.get(f"{SCIM}/Users", params={"filter": expression}, headers=okta), 400, "tooMany"
    )


def test_replace_through_a_filter_matching_no_member_is_no_target(
    client: TestClient, okta: dict[str, str]
) -> None:
    group = create_group(client, okta, "lab")
    patch = patch_body({"op": "replace", "path": 'members[value co "x"].value', "value": "y"})
    assert_scim_error(client.patch(f"{SCIM}/Groups/{group['id']}", json=patch, headers=okta), 400, "noTarget")
