"""Per-person caps on SSH keys (count and bytes) and keys a login pod would leave out, at the admin
API (issue 24): refused with a message naming the limit, and nothing changed."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from tests.api.helpers import fields, row_counts
from tests.support import keys

USERS = "/api/v1/users"


def _wide_keys(count: int, comment_length: int) -> list[str]:
    return [keys.ed25519_key(f"{i:03d}" + "c" * (comment_length - 3)) for i in range(count)]


def test_keys_over_the_byte_cap_are_refused_naming_it_and_nothing_changes(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session], settings: Settings
) -> None:
    # 32 keys (the count cap) with long comments: about 33 KB, over the default 32 KiB. In a group
    # pod's ConfigMap (1 MiB for every member) a few such people would freeze everyone's keys.
    wide = _wide_keys(32, 950)
    assert settings.accounts.max_ssh_keys == 32 and settings.accounts.max_ssh_key_bytes == 32768
    before = row_counts(sessions)
    created = client.post(USERS, json={"username": "kim", "ssh_public_keys": wide}, headers=operator)
    assert created.status_code == 422, created.text
    assert fields(created.json()) == {"ssh_public_keys"}
    message = created.json()["errors"][0]["message"]
    assert "at most 32768 per person (accounts.max_ssh_key_bytes)" in message, message
    assert row_counts(sessions) == before

    few = wide[:8]
    first = client.post(USERS, json={"username": "kim", "ssh_public_keys": few}, headers=operator)
    assert first.status_code == 201, first.text
    version = client.get(f"{USERS}/kim", headers=operator).json()["version"]
    patched = client.patch(f"{USERS}/kim", json={"ssh_public_keys": wide}, headers=operator)
    assert patched.status_code == 422, patched.text
    kim = client.get(f"{USERS}/kim", headers=operator).json()
    assert set(kim["ssh_public_keys"]) == set(few)
    assert kim["version"] == version


def test_more_keys_than_the_count_cap_are_refused(client: TestClient, operator: dict[str, str]) -> None:
    many = [keys.ed25519_key() for _ in range(33)]
    response = client.post(USERS, json={"username": "kim", "ssh_public_keys": many}, headers=operator)
    assert response.status_code == 422, response.text
    assert "33 keys; at most 32 per person (accounts.max_ssh_keys)" in response.text
    assert client.get(f"{USERS}/kim", headers=operator).status_code == 404


def test_a_key_with_a_bidi_or_invisible_character_is_refused(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    # A login pod leaves such a key out while the gateway would match it: SUP stores none.
    before = row_counts(sessions)
    for char in ("\u202e", "\u200b", "\u00a0"):
        key = keys.ed25519_key(f"kim{char}laptop")
        response = client.post(USERS, json={"username": "kim", "ssh_public_keys": [key]}, headers=operator)
        assert response.status_code == 422, response.text
        assert fields(response.json()) == {"ssh_public_keys.0"}
        assert f"U+{ord(char):04X}" in response.text and "login pods leave such a key out" in response.text
    assert row_counts(sessions) == before
