"""sshPublicKeys through SCIM obey the per-person caps and the printable rule every key does (issue
24): a SCIM error (400 invalidValue) naming the limit, and nothing changed."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from tests.api.helpers import row_counts
from tests.scim.conftest import SCIM, SUP, USER_SCHEMA, assert_scim_error, create_user, patch_body, user_body
from tests.support import keys


def _with_keys(lines: list[str]) -> dict[str, object]:
    return {"schemas": [USER_SCHEMA, SUP], SUP: {"sshPublicKeys": lines}}


def _wide(count: int) -> list[str]:
    return [keys.ed25519_key(f"{i:03d}" + "c" * 947) for i in range(count)]  # about 1 KB each


def test_keys_over_the_byte_cap_are_a_scim_error_and_change_nothing(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    before = row_counts(sessions)
    response = client.post(f"{SCIM}/Users", json=user_body("kim", **_with_keys(_wide(32))), headers=okta)
    error = assert_scim_error(response, 400, "invalidValue")
    assert "accounts.max_ssh_key_bytes" in error["detail"], error
    assert row_counts(sessions) == before

    kim = create_user(client, okta, "kim", **_with_keys(_wide(2)))
    before = row_counts(sessions)
    change = patch_body({"op": "replace", "path": f"{SUP}:sshPublicKeys", "value": _wide(33)})
    error = assert_scim_error(
        client.patch(f"{SCIM}/Users/{kim['id']}", json=change, headers=okta), 400, "invalidValue"
    )
    assert "at most 32 per person (accounts.max_ssh_keys)" in error["detail"], error
    assert row_counts(sessions) == before
    assert (
        client.get(f"{SCIM}/Users/{kim['id']}", headers=okta).json()[SUP]["sshPublicKeys"]
        == kim[SUP]["sshPublicKeys"]
    )


def test_a_key_with_a_bidi_character_is_a_scim_error(
    client: TestClient, okta: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    before = row_counts(sessions)
    hidden = keys.ed25519_key("kim@\u202elaptop")
    response = client.post(f"{SCIM}/Users", json=user_body("kim", **_with_keys([hidden])), headers=okta)
    error = assert_scim_error(response, 400, "invalidValue")
    assert f"{SUP}:sshPublicKeys" in error["detail"] and "U+202E" in error["detail"], error
    assert row_counts(sessions) == before
