"""homeDirectory through SCIM obeys the rule every home does (issue 15): below the home root, plain,
one user's each."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

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
    assert "already used by another user" in error["detail"] and "entra" not in error["detail"]
    change = patch_body({"op": "replace", "path": f"{SUP}:homeDirectory", "value": "/home/lee"})
    assert_scim_error(client.patch(f"{SCIM}/Users/{kim['id']}", json=change, headers=okta), 409, "uniqueness")
    assert row_counts(sessions) == before
