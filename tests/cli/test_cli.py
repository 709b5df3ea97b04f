"""The `sup` command as a subprocess: output, exit codes, and that tokens made here work in the API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from sup.api.token_cache import TOKEN_CACHE_SECONDS, TokenCache
from sup.groups.schemas import GroupCreate
from sup.groups.service import create_group
from sup.store import migrate
from sup.users.schemas import UserCreate
from sup.users.service import create_user
from tests.conftest import ACTOR, bearer
from tests.support.cli import run_sup, sup_env


@pytest.fixture
def env(database_url: str) -> dict[str, str]:
    return sup_env(SUP_DATABASE_URL=database_url)


def test_token_create_prints_only_the_token_and_it_works(env: dict[str, str], client: TestClient) -> None:
    now = [0.0]  # the API's token cache (sup/api/token_cache.py) on a clock this test moves
    client.app.state.token_cache = TokenCache(clock=lambda: now[0])  # type: ignore[attr-defined]
    result = run_sup("token", "create", "--name", "ops", "--role", "operator", env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sup_")
    token = lines[0]
    assert client.post("/api/v1/users", json={"username": "kim"}, headers=bearer(token)).status_code == 201
    assert client.get("/api/v1/tokens", headers=bearer(token)).status_code == 403

    listed = run_sup("token", "list", "--json", env=env)
    assert listed.returncode == 0
    assert [(t["name"], t["role"]) for t in json.loads(listed.stdout)] == [("ops", "operator")]
    assert token not in listed.stdout

    duplicate = run_sup("token", "create", "--name", "ops", "--role", "viewer", env=env)
    assert duplicate.returncode == 4 and "already exists" in duplicate.stderr

    revoked = run_sup("token", "revoke", "ops", env=env)
    assert revoked.returncode == 0
    now[0] += TOKEN_CACHE_SECONDS  # revoked by another process: refused once the cache's bound has passed
    assert client.get("/api/v1/users", headers=bearer(token)).status_code == 401
    assert run_sup("token", "revoke", "ops", env=env).returncode == 3


def test_a_gateway_token_made_here_calls_the_gateway_only(env: dict[str, str], client: TestClient) -> None:
    result = run_sup("token", "create", "--name", "gateway", "--role", "gateway", env=env)
    assert result.returncode == 0, result.stderr
    token = bearer(result.stdout.strip())
    refused = client.get("/api/v1/gateway/routes/kim", headers=token)  # no Kubernetes target: no pods
    assert refused.status_code == 404 and refused.json() == {"detail": "no route", "reason": "no_login_pod"}
    assert client.get("/api/v1/users", headers=token).status_code == 403


def test_usage_errors_exit_2(env: dict[str, str]) -> None:
    assert run_sup("token", "create", "--name", "x", "--role", "superuser", env=env).returncode == 2
    assert run_sup("frobnicate", env=env).returncode == 2


def test_invalid_token_name_exits_5(env: dict[str, str]) -> None:
    result = run_sup("token", "create", "--name", "Bad Name", "--role", "viewer", env=env)
    assert result.returncode == 5 and "token names" in result.stderr


def test_user_and_group_list_and_show(
    env: dict[str, str], sessions: sessionmaker[Session], settings: object
) -> None:
    with sessions.begin() as session:
        create_group(session, settings, ACTOR, GroupCreate(name="physics"))  # type: ignore[arg-type]
        create_user(session, settings, ACTOR, UserCreate(username="kim", groups=["physics"]))  # type: ignore[arg-type]
        create_user(session, settings, ACTOR, UserCreate(username="saul", active=False))  # type: ignore[arg-type]

    users = json.loads(run_sup("user", "list", "--json", env=env).stdout)
    assert [(u["username"], u["uid_number"], u["groups"]) for u in users] == [
        ("kim", 10000, ["physics"]),
        ("saul", 10001, []),
    ]
    inactive = json.loads(run_sup("user", "list", "--inactive", "--json", env=env).stdout)
    assert [u["username"] for u in inactive] == ["saul"]
    table = run_sup("user", "list", env=env)
    assert table.returncode == 0 and "kim" in table.stdout and "10000" in table.stdout

    shown = run_sup("user", "show", "kim", "--json", env=env)
    assert json.loads(shown.stdout)["home_directory"] == "/home/kim"
    missing = run_sup("user", "show", "ghost", env=env)
    assert missing.returncode == 3 and "does not exist" in missing.stderr

    group = json.loads(run_sup("group", "show", "physics", "--json", env=env).stdout)
    assert group["members"] == ["kim"] and group["gid_number"] == 50000
    groups = json.loads(run_sup("group", "list", "--ordinary", "--json", env=env).stdout)
    assert [g["name"] for g in groups] == ["physics"]
    assert run_sup("group", "show", "ghost", env=env).returncode == 3


def test_unmigrated_database_exits_6_and_upgrade_fixes_it(tmp_path: Path) -> None:
    env = sup_env(SUP_DATABASE_URL=f"sqlite:///{tmp_path / 'fresh.db'}")
    result = run_sup("user", "list", env=env)
    assert result.returncode == 6 and "sup db upgrade" in result.stderr
    serve = run_sup("serve", "--port", "1", env=env)
    assert serve.returncode == 6
    before = run_sup("db", "current", "-o", "json", env=env)  # for a script deciding to upgrade
    assert json.loads(before.stdout) == {"current": None, "head": migrate.head_revision()}
    upgraded = run_sup("db", "upgrade", env=env)
    head = migrate.head_revision()
    assert upgraded.returncode == 0 and f"database at revision {head}" in upgraded.stdout
    assert run_sup("user", "list", "--json", env=env).stdout.strip() == "[]"
    current = run_sup("db", "current", env=env)
    assert f"current: {head}" in current.stdout
    as_json = run_sup("db", "current", "-o", "json", env=env)
    as_yaml = run_sup("db", "current", "-o", "yaml", env=env)
    assert json.loads(as_json.stdout) == {"current": head, "head": head} == yaml.safe_load(as_yaml.stdout)


def test_default_database_is_a_sqlite_file_in_the_working_directory(tmp_path: Path) -> None:
    env = sup_env()
    assert run_sup("db", "upgrade", env=env, cwd=tmp_path).returncode == 0
    assert (tmp_path / "sup.db").is_file()


def test_invalid_settings_exit_6_without_echoing_secrets(tmp_path: Path) -> None:
    env = sup_env(
        SUP_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}",
        SUP_LDAP__URL="ldap://127.0.0.1:1",
        SUP_LDAP__BIND_PASSWORD="hunter2-very-secret",
    )
    result = run_sup("user", "list", env=env)
    assert result.returncode == 6
    assert "ldap.bind_dn" in result.stderr and "ldap.base_dn" in result.stderr
    assert "hunter2-very-secret" not in result.stderr + result.stdout


def test_unreachable_database_exits_6() -> None:
    env = sup_env(SUP_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none")
    result = run_sup("user", "list", env=env)
    assert result.returncode == 6 and "cannot reach the database" in result.stderr


def test_help_explains(env: dict[str, str]) -> None:
    result = run_sup("--help", env=env)
    assert result.returncode == 0
    for command in ("db", "serve", "token", "user", "group"):
        assert command in result.stdout
    assert "Exit codes" in result.stdout
