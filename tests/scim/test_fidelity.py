"""What independent SCIM checkers found, on SQLite and PostgreSQL: member display names, errors named
after the attribute the client sent, searches at the root, and filters too long to serve."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from sup.scim.filtering import MAX_FILTER_LENGTH, MAX_FILTER_VALUE_LENGTH
from tests.scim.conftest import (
    GROUP_SCHEMA,
    PATCH_OP,
    SCIM,
    SUP,
    assert_scim_error,
    create_group,
    create_user,
)

SEARCH_REQUEST = "urn:ietf:params:scim:api:messages:2.0:SearchRequest"
LIST_RESPONSE = "urn:ietf:params:scim:api:messages:2.0:ListResponse"


# --- Group members[].display (RFC 7643 §4.2) -------------------------------------------------------------


def test_group_members_carry_the_users_display_name(client: TestClient, okta: dict[str, str]) -> None:
    ann = create_user(client, okta, "ann@corp.example", displayName="Ann Smith")
    bob = create_user(client, okta, "bob@corp.example")  # no displayName: the userName stands in
    group = create_group(client, okta, "physics", [ann["id"], bob["id"]])
    expected = {ann["id"]: "Ann Smith", bob["id"]: "bob@corp.example"}
    assert {m["value"]: m["display"] for m in group["members"]} == expected
    read = client.get(f"{SCIM}/Groups/{group['id']}", headers=okta).json()
    assert {m["value"]: m["display"] for m in read["members"]} == expected
    listed = client.get(f"{SCIM}/Groups", headers=okta).json()["Resources"]
    assert {m["value"]: m["display"] for m in listed[0]["members"]} == expected
    # What a PATCH sends as display is not kept: the member's own name is shown.
    patched = client.patch(
        f"{SCIM}/Groups/{group['id']}",
        json={
            "schemas": [PATCH_OP],
            "Operations": [{"op": "add", "path": "members", "value": [{"value": ann["id"], "display": "x"}]}],
        },
        headers=okta,
    )
    assert patched.status_code == 200, patched.text
    assert {m["value"]: m["display"] for m in patched.json()["members"]} == expected
    # And it filters as shown, case-insensitively (RFC 7643 §4.2: caseExact false).
    found = client.get(
        f"{SCIM}/Groups", params={"filter": 'members.display eq "ann smith"'}, headers=okta
    ).json()
    assert [g["id"] for g in found["Resources"]] == [group["id"]]
    found = client.get(f"{SCIM}/Groups", params={"filter": 'members[display sw "bob@"]'}, headers=okta).json()
    assert [g["id"] for g in found["Resources"]] == [group["id"]]


# --- errors name the attribute the client sent ---------------------------------------------------------


def test_a_refused_gid_number_is_reported_under_gid_number(client: TestClient, okta: dict[str, str]) -> None:
    user = create_user(client, okta, "kim@corp.example")
    response = client.patch(
        f"{SCIM}/Users/{user['id']}",
        json={
            "schemas": [PATCH_OP],
            "Operations": [{"op": "replace", "path": f"{SUP}:gidNumber", "value": 7}],
        },
        headers=okta,
    )
    body = assert_scim_error(response, 400, "invalidValue")
    assert body["detail"].startswith(f"{SUP}:gidNumber: "), body
    assert "displayName" not in body["detail"]


# --- searches at the root (RFC 7644 §3.4.2.1, §3.4.3) ---------------------------------------------------


@pytest.fixture
def directory(client: TestClient, okta: dict[str, str]) -> dict[str, Any]:
    ann = create_user(client, okta, "ann@corp.example", displayName="Physics Ann")
    bob = create_user(client, okta, "bob@corp.example")
    physics = create_group(client, okta, "Physics", [ann["id"]])
    chemistry = create_group(client, okta, "Chemistry")
    return {"ann": ann, "bob": bob, "physics": physics, "chemistry": chemistry}


def test_post_search_at_the_root_finds_users_and_groups(
    client: TestClient, okta: dict[str, str], directory: dict[str, Any]
) -> None:
    response = client.post(
        f"{SCIM}/.search",
        json={"schemas": [SEARCH_REQUEST], "filter": 'displayName sw "physics"'},
        headers=okta,
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/scim+json")
    body = response.json()
    assert body["schemas"] == [LIST_RESPONSE]
    assert body["totalResults"] == 2
    # Users first, then Groups, each by creation.
    assert [(r["id"], r["meta"]["resourceType"]) for r in body["Resources"]] == [
        (directory["ann"]["id"], "User"),
        (directory["physics"]["id"], "Group"),
    ]
    assert body["Resources"][1]["schemas"] == [GROUP_SCHEMA]


def test_root_search_pages_across_types_and_filters_per_type(
    client: TestClient, okta: dict[str, str], directory: dict[str, Any]
) -> None:
    everything = client.post(f"{SCIM}/.search", json={"schemas": [SEARCH_REQUEST]}, headers=okta).json()
    assert everything["totalResults"] == 4
    page = client.post(
        f"{SCIM}/.search",
        json={"schemas": [SEARCH_REQUEST], "startIndex": 2, "count": 2, "attributes": ["id"]},
        headers=okta,
    ).json()
    assert page["totalResults"] == 4 and page["startIndex"] == 2 and page["itemsPerPage"] == 2
    assert [r["id"] for r in page["Resources"]] == [directory["bob"]["id"], directory["physics"]["id"]]
    # userName is an attribute of Users only: Groups do not match it, and it is no error.
    by_user_name = client.post(
        f"{SCIM}/.search",
        json={"schemas": [SEARCH_REQUEST], "filter": 'userName eq "BOB@corp.example"'},
        headers=okta,
    ).json()
    assert [r["id"] for r in by_user_name["Resources"]] == [directory["bob"]["id"]]
    # GET at the root is the same search (RFC 7644 §3.4.2.1).
    for root in (f"{SCIM}/", SCIM):
        got = client.get(
            root, params={"filter": 'displayName eq "chemistry"'}, headers=okta, follow_redirects=False
        )
        assert got.status_code == 200, got.text
        assert [r["id"] for r in got.json()["Resources"]] == [directory["chemistry"]["id"]]
    # Other methods at the root are SCIM 405s.
    response = client.put(f"{SCIM}/", json={}, headers=okta)
    assert_scim_error(response, 405)
    assert response.headers["allow"] == "GET"


def test_root_search_refuses_what_it_does_not_do(
    client: TestClient, okta: dict[str, str], tokens: dict[str, str], directory: dict[str, Any]
) -> None:
    sorted_search = client.post(
        f"{SCIM}/.search", json={"schemas": [SEARCH_REQUEST], "sortBy": "displayName"}, headers=okta
    )
    body = assert_scim_error(sorted_search, 501)
    assert "/Users or /Groups" in body["detail"]
    # Like every resource endpoint, it needs a SCIM connection's token.
    assert_scim_error(client.post(f"{SCIM}/.search", json={"schemas": [SEARCH_REQUEST]}), 401)
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    assert_scim_error(client.post(f"{SCIM}/.search", json={"schemas": [SEARCH_REQUEST]}, headers=admin), 403)


# --- filter length (RFC 7644 §3.4.2.2 sets none; SUP does) ---------------------------------------------


@pytest.mark.parametrize("path", ["/Users", "/Groups", "/"])
def test_an_overlong_filter_value_is_400_invalid_filter(
    client: TestClient, okta: dict[str, str], path: str
) -> None:
    """A 60 KB `co` value answered 503 with Retry-After before, so an IdP retried it forever."""
    long_value = "x" * 60_000
    response = client.get(f"{SCIM}{path}", params={"filter": f'displayName co "{long_value}"'}, headers=okta)
    body = assert_scim_error(response, 400, "invalidFilter")
    assert "retry-after" not in response.headers
    assert str(MAX_FILTER_LENGTH) in body["detail"]
    searched = client.post(
        f"{SCIM}{path.rstrip('/')}/.search",
        json={"schemas": [SEARCH_REQUEST], "filter": f'displayName co "{long_value}"'},
        headers=okta,
    )
    assert_scim_error(searched, 400, "invalidFilter")


def test_each_filter_value_has_its_own_cap(client: TestClient, okta: dict[str, str]) -> None:
    at_cap = "x" * MAX_FILTER_VALUE_LENGTH
    ok = client.get(f"{SCIM}/Users", params={"filter": f'userName eq "{at_cap}"'}, headers=okta)
    assert ok.status_code == 200, ok.text
    assert ok.json()["totalResults"] == 0
    over = at_cap + "x"
    for expression in (
        f'userName eq "{over}"',
        f'emails[value co "{over}"]',
        f'userName eq "a" or (displayName sw "{over}")',
        f'not (title ew "{over}")',
    ):
        response = client.get(f"{SCIM}/Users", params={"filter": expression}, headers=okta)
        body = assert_scim_error(response, 400, "invalidFilter")
        assert str(MAX_FILTER_VALUE_LENGTH) in body["detail"], expression


def test_filters_up_to_the_caps_are_served(client: TestClient, okta: dict[str, str]) -> None:
    user = create_user(client, okta, "kim@corp.example")
    # Many short values (an IdP that reconciles by OR-ing ids) stay well within the length cap.
    ids = [user["id"], *(f"{i:08d}-0000-0000-0000-000000000000" for i in range(40))]
    expression = " or ".join(f'id eq "{i}"' for i in ids)
    assert len(expression) <= MAX_FILTER_LENGTH
    response = client.get(f"{SCIM}/Users", params={"filter": expression}, headers=okta)
    assert response.status_code == 200, response.text
    assert [r["id"] for r in response.json()["Resources"]] == [user["id"]]
