"""Nested groups over SCIM (`scim.nested_groups`): a Group member of a Group is refused with a clear
400 (the default), or flattened into its users."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from sup.app import create_app
from sup.config import Settings
from tests.scim.conftest import (
    GROUP_SCHEMA,
    SCIM,
    assert_scim_error,
    create_group,
    create_user,
    patch_body,
)


def _group(display_name: str, *members: dict[str, Any]) -> dict[str, Any]:
    return {"schemas": [GROUP_SCHEMA], "displayName": display_name, "members": list(members)}


def _members(client: TestClient, headers: dict[str, str], group_id: str) -> list[str]:
    response = client.get(f"{SCIM}/Groups/{group_id}", headers=headers)
    assert response.status_code == 200, response.text
    return sorted(m["display"] for m in response.json().get("members", []))


@pytest.fixture
def flattening(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    nested = settings.model_copy(
        update={"scim": settings.scim.model_copy(update={"nested_groups": "flatten"})}
    )
    with TestClient(create_app(nested, engine), raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize(
    "member",
    [
        {"type": "Group"},
        {"$ref": "https://idp.example/scim/v2/Groups/{id}"},
        {},  # neither type nor $ref: the id names a group (it used to be dropped without a word)
    ],
    ids=["type", "ref", "id"],
)
def test_a_group_member_is_refused_by_default(
    client: TestClient, okta: dict[str, str], member: dict[str, Any]
) -> None:
    ann = create_user(client, okta, "ann")
    inner = create_group(client, okta, "inner", [ann["id"]])
    nested = {k: v.format(id=inner["id"]) for k, v in member.items()} | {"value": inner["id"]}
    response = client.post(f"{SCIM}/Groups", json=_group("outer", nested), headers=okta)
    error = assert_scim_error(response, 400, "invalidValue")
    assert inner["id"] in error["detail"] and "scim.nested_groups" in error["detail"], error
    # Nothing was created, and a PATCH that adds the group is refused the same way.
    outer = create_group(client, okta, "outer", [])
    add = patch_body({"op": "add", "path": "members", "value": [nested]})
    assert_scim_error(
        client.patch(f"{SCIM}/Groups/{outer['id']}", json=add, headers=okta), 400, "invalidValue"
    )
    assert _members(client, okta, outer["id"]) == []


def test_flattened_a_group_members_users_become_members(
    flattening: TestClient, okta: dict[str, str], entra: dict[str, str]
) -> None:
    client = flattening
    ann, bob, cid = (create_user(client, okta, name) for name in ("ann", "bob", "cid"))
    leaf = create_group(client, okta, "leaf", [cid["id"]])
    mid = client.post(
        f"{SCIM}/Groups",
        json=_group("mid", {"value": bob["id"]}, {"value": leaf["id"], "type": "Group"}),
        headers=okta,
    )
    assert mid.status_code == 201, mid.text
    assert _members(client, okta, mid.json()["id"]) == ["bob", "cid"]
    top = client.post(
        f"{SCIM}/Groups",
        json=_group(
            "top",
            {"value": ann["id"]},
            {"value": mid.json()["id"], "$ref": f"../Groups/{mid.json()['id']}"},
        ),
        headers=okta,
    )
    assert top.status_code == 201, top.text
    top_id = top.json()["id"]
    assert _members(client, okta, top_id) == ["ann", "bob", "cid"]  # at any depth

    # A group listing itself is a cycle: it ends, with its own users.
    itself = patch_body({"op": "add", "path": "members", "value": [{"value": top_id, "type": "Group"}]})
    response = client.patch(f"{SCIM}/Groups/{top_id}", json=itself, headers=okta)
    assert response.status_code == 200, response.text
    assert _members(client, okta, top_id) == ["ann", "bob", "cid"]

    # Another connection's group is not this connection's to hand out.
    other = create_group(client, entra, "other", [])
    response = client.post(
        f"{SCIM}/Groups", json=_group("taker", {"value": other["id"], "type": "Group"}), headers=okta
    )
    assert_scim_error(response, 403)


def test_a_member_of_another_type_is_refused(client: TestClient, okta: dict[str, str]) -> None:
    response = client.post(
        f"{SCIM}/Groups", json=_group("odd", {"value": "x", "type": "Device"}), headers=okta
    )
    error = assert_scim_error(response, 400, "invalidValue")
    assert "Device" in error["detail"]
