"""Bad input gets a clear 4xx naming the field, and writes nothing (no row, no audit, no dirty mark)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from tests.api.helpers import fields, row_counts
from tests.support import keys

GOOD_KEY = keys.ed25519_key("kim@laptop")


@pytest.fixture
def seeded(client: TestClient, admin: dict[str, str]) -> None:
    kim = {"username": "kim", "uid_number": 10010, "ssh_public_keys": [GOOD_KEY]}
    assert client.post("/api/v1/users", json=kim, headers=admin).status_code == 201
    assert (
        client.post(
            "/api/v1/groups", json={"name": "physics", "gid_number": 50010}, headers=admin
        ).status_code
        == 201
    )


USER_CASES: list[tuple[str, dict[str, Any], int, set[str]]] = [
    ("uppercase name", {"username": "Kim2"}, 422, {"username"}),
    ("name too long", {"username": "k" * 33}, 422, {"username"}),
    ("reserved name", {"username": "root"}, 422, {"username"}),
    ("ldap injection", {"username": "kim*)(uid=*"}, 422, {"username"}),
    ("dn injection", {"username": "a,ou=people"}, 422, {"username"}),
    ("nul byte", {"username": "kim\x00"}, 422, {"username"}),
    ("reserved name and a newline", {"username": "root\n"}, 422, {"username"}),
    ("trailing newline", {"username": "saul\n"}, 422, {"username"}),
    ("trailing crlf", {"username": "saul\r\n"}, 422, {"username"}),
    ("leading newline", {"username": "\nsaul"}, 422, {"username"}),
    ("group and a newline", {"username": "saul", "groups": ["physics\n"]}, 422, {"groups.0"}),
    (
        "account and a newline",
        {"username": "saul", "slurm_default_account": "phys\n"},
        422,
        {"slurm_default_account"},
    ),
    ("duplicate name", {"username": "kim"}, 409, {"username"}),
    ("duplicate uid", {"username": "saul", "uid_number": 10010}, 409, {"uid_number"}),
    ("uid out of range", {"username": "saul", "uid_number": 999}, 422, {"uid_number"}),
    ("uid zero", {"username": "saul", "uid_number": 0}, 422, {"uid_number"}),
    ("uid huge", {"username": "saul", "uid_number": 2**40}, 422, {"uid_number"}),
    ("uid as text", {"username": "saul", "uid_number": "ten"}, 422, {"uid_number"}),
    ("malformed key", {"username": "saul", "ssh_public_keys": ["ssh-rsa AAAA"]}, 422, {"ssh_public_keys.0"}),
    (
        "control character in a key comment",
        {"username": "saul", "ssh_public_keys": [keys.ed25519_key("saul\x85laptop")]},
        422,
        {"ssh_public_keys.0"},
    ),
    (
        "line separator in a key comment",
        {"username": "saul", "ssh_public_keys": [keys.ed25519_key("saul\u2028laptop")]},
        422,
        {"ssh_public_keys.0"},
    ),
    ("weak rsa", {"username": "saul", "ssh_public_keys": [keys.rsa_key(1024)]}, 422, {"ssh_public_keys.0"}),
    ("key of another user", {"username": "saul", "ssh_public_keys": [GOOD_KEY]}, 409, {"ssh_public_keys.0"}),
    (
        "same key twice",
        {"username": "saul", "ssh_public_keys": [keys.ed25519_key()] * 2},
        422,
        {"ssh_public_keys.1"},
    ),
    ("unknown field", {"username": "saul", "is_admin": True}, 422, {"is_admin"}),
    ("bad email", {"username": "saul", "email": "not-an-email"}, 422, {"email"}),
    ("relative home", {"username": "saul", "home_directory": "home/saul"}, 422, {"home_directory"}),
    ("home traversal", {"username": "saul", "home_directory": "/home/../etc"}, 422, {"home_directory"}),
    ("colon in home", {"username": "saul", "home_directory": "/home/a:b"}, 422, {"home_directory"}),
    ("home at the root", {"username": "saul", "home_directory": "/"}, 422, {"home_directory"}),
    ("home in /etc", {"username": "saul", "home_directory": "/etc"}, 422, {"home_directory"}),
    ("home is the home root", {"username": "saul", "home_directory": "/home"}, 422, {"home_directory"}),
    ("home beside the root", {"username": "saul", "home_directory": "/homes/saul"}, 422, {"home_directory"}),
    ("home trailing slash", {"username": "saul", "home_directory": "/home/saul/"}, 422, {"home_directory"}),
    ("home double slash", {"username": "saul", "home_directory": "/home//saul"}, 422, {"home_directory"}),
    ("bidi in home", {"username": "saul", "home_directory": "/home/saul\u202egpj"}, 422, {"home_directory"}),
    ("control in home", {"username": "saul", "home_directory": "/home/sa\x1bul"}, 422, {"home_directory"}),
    ("space in home", {"username": "saul", "home_directory": "/home/saul g"}, 422, {"home_directory"}),
    ("another user's home", {"username": "saul", "home_directory": "/home/kim"}, 409, {"home_directory"}),
    ("shell not allowed", {"username": "saul", "login_shell": "/tmp/evil"}, 422, {"login_shell"}),
    ("newline in name", {"username": "saul", "display_name": "Saul\nGoodman"}, 422, {"display_name"}),
    ("unknown group", {"username": "saul", "groups": ["physics", "nope"]}, 422, {"groups.1"}),
    ("missing username", {"email": "a@b.example"}, 422, {"username"}),
    ("null username", {"username": None}, 422, {"username"}),
    ("wrong body type", [], 422, {"body"}),  # type: ignore[list-item]
]


@pytest.mark.usefixtures("seeded")
@pytest.mark.parametrize(("case", "payload", "status", "blamed"), USER_CASES, ids=[c[0] for c in USER_CASES])
def test_bad_user_input_writes_nothing(
    client: TestClient,
    operator: dict[str, str],
    sessions: sessionmaker[Session],
    case: str,
    payload: dict[str, Any],
    status: int,
    blamed: set[str],
) -> None:
    before = row_counts(sessions)
    response = client.post("/api/v1/users", json=payload, headers=operator)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert blamed <= fields(response.json()), response.json()
    assert row_counts(sessions) == before


@pytest.mark.usefixtures("seeded")
@pytest.mark.parametrize(
    ("payload", "status", "blamed"),
    [
        ({"username": None}, 422, {"username"}),
        ({"uid_number": 10010.5}, 422, {"uid_number"}),
        ({"ssh_public_keys": [GOOD_KEY, "garbage"]}, 422, {"ssh_public_keys.1"}),
        ({"groups": ["physics", "physics"]}, 422, {"groups.1"}),
        ({"login_shell": None}, 422, {"login_shell"}),
        ({"username": "physics"}, 409, {"username"}),
        ({"username": "root\n"}, 422, {"username"}),
        ({"username": "saul\n"}, 422, {"username"}),
        ({"primary_gid": 50010}, 422, {"primary_gid"}),
        ({"home_directory": "/etc"}, 422, {"home_directory"}),
        ({"home_directory": "/"}, 422, {"home_directory"}),
        ({"home_directory": "/home/kim/\u200f"}, 422, {"home_directory"}),
    ],
)
def test_bad_patches_change_nothing(
    client: TestClient,
    operator: dict[str, str],
    sessions: sessionmaker[Session],
    payload: dict[str, Any],
    status: int,
    blamed: set[str],
) -> None:
    before_rows = row_counts(sessions)
    before = client.get("/api/v1/users/kim", headers=operator).json()
    response = client.patch("/api/v1/users/kim", json=payload, headers=operator)
    assert response.status_code == status, response.text
    assert blamed <= fields(response.json())
    assert client.get("/api/v1/users/kim", headers=operator).json() == before
    assert row_counts(sessions) == before_rows


@pytest.mark.usefixtures("seeded")
@pytest.mark.parametrize(
    ("payload", "status", "blamed"),
    [
        ({"name": "Physics2"}, 422, {"name"}),
        ({"name": "physics"}, 409, {"name"}),
        ({"name": "kim"}, 409, {"name"}),  # kim's private group
        ({"name": "wheel"}, 422, {"name"}),
        ({"name": "sudo\n"}, 422, {"name"}),
        ({"name": "chem\n"}, 422, {"name"}),
        ({"name": "chem", "members": ["kim\n"]}, 422, {"members.0"}),
        ({"name": "chem", "gid_number": 50010}, 409, {"gid_number"}),
        ({"name": "chem", "gid_number": 10}, 422, {"gid_number"}),
        ({"name": "chem", "description": "x" * 2000}, 422, {"description"}),
        ({"name": "chem", "members": ["kim", "Bad"]}, 422, {"members.1"}),
    ],
)
def test_bad_group_input_writes_nothing(
    client: TestClient,
    operator: dict[str, str],
    sessions: sessionmaker[Session],
    payload: dict[str, Any],
    status: int,
    blamed: set[str],
) -> None:
    before = row_counts(sessions)
    response = client.post("/api/v1/groups", json=payload, headers=operator)
    assert response.status_code == status, response.text
    assert blamed <= fields(response.json())
    assert row_counts(sessions) == before


def test_malformed_json_is_400(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    before = row_counts(sessions)
    response = client.post(
        "/api/v1/users",
        content=b'{"username": "kim"',
        headers={**operator, "Content-Type": "application/json"},
    )
    assert response.status_code == 400 and "not valid JSON" in response.json()["detail"]
    assert row_counts(sessions) == before


def test_oversized_bodies_are_413(
    client: TestClient, operator: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    before = row_counts(sessions)
    big = {"username": "kim", "display_name": "x" * (2 * 1024 * 1024)}
    response = client.post("/api/v1/users", json=big, headers=operator)
    assert response.status_code == 413 and response.json()["status"] == 413

    def chunks() -> Any:  # no Content-Length: the limit is enforced while streaming
        yield b'{"username": "kim", "display_name": "'
        for _ in range(300):
            yield b"y" * 8192
        yield b'"}'

    streamed = client.post(
        "/api/v1/users", content=chunks(), headers={**operator, "Content-Type": "application/json"}
    )
    assert streamed.status_code == 413
    assert row_counts(sessions) == before


def test_bad_if_match_is_named(client: TestClient, operator: dict[str, str]) -> None:
    client.post("/api/v1/users", json={"username": "kim"}, headers=operator)
    response = client.patch(
        "/api/v1/users/kim", json={"display_name": "k"}, headers={**operator, "If-Match": "abc"}
    )
    assert response.status_code == 422 and fields(response.json()) == {"If-Match"}


@pytest.mark.parametrize("name", ["robot\n", "robot\r\n", "\nrobot", "ro bot"])
def test_token_names_with_a_line_break_are_refused(
    client: TestClient, admin: dict[str, str], name: str
) -> None:
    before = client.get("/api/v1/tokens", headers=admin).json()
    response = client.post("/api/v1/tokens", json={"name": name, "role": "viewer"}, headers=admin)
    assert response.status_code == 422, response.text
    assert fields(response.json()) == {"name"}
    assert client.get("/api/v1/tokens", headers=admin).json() == before
