"""homeDirectory through SCIM obeys the rule every home does (issue 15): below the home root, plain,
one user's each."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from sup.users import service as users_service
from tests.api.helpers import row_counts
from tests.scim.conftest import SCIM, SUP, USER_SCHEMA, assert_scim_error, create_user, patch_body, user_body


def _with_home(home: str) -> dict[str, object]:
    return {"schemas": [USER_SCHEMA, SUP], SUP: {"homeDirectory": home}}


def test_a_home_outside_the_root_or_unsafe_is_invalid(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    before = row_counts(sessions)
    for home in ("/", "/etc", "/home/kim\u202e", "/home/../root"):
        response = client.post(f"{SCIM}/Users", json=user_body("kim", **_with_home(home)), headers=okta)
        error = assert_scim_error(response, 400, "invalidValue")
        assert f"{SUP}:homeDirectory" in error["detail"]
    assert row_counts(sessions) == before


def test_another_users_home_is_taken(
    client: TestClient, okta: dict[str, str], entra: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    create_user(client, entra, "lee")  # home /home/lee
    kim = create_user(client, okta, "kim")
    before = row_counts(sessions)
    response = client.post(f"{SCIM}/Users", json=user_body("amy", **_with_home("/home/lee")), headers=okta)
    error = assert_scim_error(response, 409, "uniqueness")
    assert "already used by another user ('lee')" in error["detail"] and "entra" not in error["detail"]
    change = patch_body({"op": "replace", "path": f"{SUP}:homeDirectory", "value": "/home/lee"})
    assert_scim_error(client.patch(f"{SCIM}/Users/{kim['id']}", json=change, headers=okta), 409, "uniqueness")
    assert row_counts(sessions) == before


def test_a_home_inside_or_above_another_persons_is_a_uniqueness_error(
    client: TestClient, okta: dict[str, str], entra: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    """Issue 24: a group's login pod mounts each member's home at their home directory, so a home
    inside another person's (or above it) would be mounted over theirs. An IdP gets a 409
    uniqueness on homeDirectory naming the person, on POST, PUT and PATCH; nothing is written."""
    create_user(client, entra, "lee")  # home /home/lee
    create_user(client, entra, "team", **_with_home("/home/team/ann"))
    kim = create_user(client, okta, "kim")
    before = row_counts(sessions)
    refusals = [
        client.post(f"{SCIM}/Users", json=user_body("amy", **_with_home("/home/lee/.ssh")), headers=okta),
        client.post(f"{SCIM}/Users", json=user_body("amy", **_with_home("/home/team")), headers=okta),
        client.put(
            f"{SCIM}/Users/{kim['id']}", json=user_body("kim", **_with_home("/home/lee/x/y")), headers=okta
        ),
        client.patch(
            f"{SCIM}/Users/{kim['id']}",
            json=patch_body({"op": "replace", "path": f"{SUP}:homeDirectory", "value": "/home/team"}),
            headers=okta,
        ),
    ]
    for response, holder in zip(refusals, ("lee", "team", "lee", "team"), strict=True):
        error = assert_scim_error(response, 409, "uniqueness")
        assert error["detail"].startswith(f"{SUP}:homeDirectory: home directory "), error
        assert f"of user '{holder}'" in error["detail"], error
    assert row_counts(sessions) == before
    # /home/le is not inside /home/lee: paths are compared component by component.
    create_user(client, okta, "le", **_with_home("/home/le"))


def test_a_home_taken_past_the_check_is_a_uniqueness_error_on_home_directory(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's unique index (migration 0009) is the backstop should a write get past the check: an
    IdP gets 409 uniqueness on homeDirectory, not a 500 and not a second holder."""
    create_user(client, okta, "lee")
    before = row_counts(sessions)
    monkeypatch.setattr(users_service, "check_home", lambda *args, **kwargs: None)
    response = client.post(f"{SCIM}/Users", json=user_body("amy", **_with_home("/home/lee")), headers=okta)
    error = assert_scim_error(response, 409, "uniqueness")
    assert error["detail"] == f"{SUP}:homeDirectory: taken by a concurrent request"
    assert row_counts(sessions) == before
