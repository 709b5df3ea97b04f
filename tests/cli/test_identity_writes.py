"""`sup user create|update|suspend|reactivate` and `sup group create|add|remove` as a subprocess:
what the store holds afterwards, who the audit log names, the outbox mark the reconciler follows,
exit codes, and that bad input changes nothing. (The services behind them are the API's, tested on
both databases in tests/api; here SQLite.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from sup.store.models import AuditEntry, Group, Membership, OutboxMark, User
from tests.support import keys
from tests.support.cli import run_sup, sup_env


@pytest.fixture
def env(store_url: str) -> dict[str, str]:
    return sup_env(SUP_DATABASE_URL=store_url)


def _sup(env: dict[str, str], *args: str) -> dict[str, object]:
    result = run_sup(*args, "-o", "json", env=env)
    assert result.returncode == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def _counts(sessions: sessionmaker[Session]) -> tuple[int, ...]:
    with sessions() as session:
        return tuple(
            session.scalar(select(func.count()).select_from(model)) or 0
            for model in (User, Group, Membership, AuditEntry, OutboxMark)
        )


def test_a_person_created_changed_suspended_and_reactivated_from_the_shell(
    env: dict[str, str], store_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    _sup(env, "group", "create", "physics", "--description", "Physics")
    key_file = tmp_path / "kim.pub"
    key = keys.ed25519_key("kim")
    key_file.write_text(f"# kim's laptop\n{key}\n\n")
    kim = _sup(
        env, "user", "create", "kim", "--email", "kim@example.org", "--display-name", "Kim Wexler",
        "--group", "physics", "--key-file", str(key_file),
    )  # fmt: skip
    assert (kim["username"], kim["groups"], kim["active"]) == ("kim", ["physics"], True)
    assert kim["ssh_public_keys"] == [key]
    with store_sessions() as session:
        actors = set(session.scalars(select(AuditEntry.actor)))
        marked = {(kind, name) for kind, name in session.execute(select(OutboxMark.kind, OutboxMark.name))}
    assert len(actors) == 1 and actors.pop().startswith("cli:")  # the OS user, as the audit log shows
    assert ("user", "kim") in marked  # the reconciler provisions kim within seconds

    changed = _sup(env, "user", "update", "kim", "--display-name", "Kim W.", "--shell", "/bin/zsh")
    assert (changed["display_name"], changed["login_shell"], changed["uid_number"]) == (
        "Kim W.", "/bin/zsh", kim["uid_number"],
    )  # fmt: skip
    suspended = _sup(env, "user", "suspend", "kim")
    assert suspended["active"] is False and suspended["suspended_at"]
    back = _sup(env, "user", "reactivate", "kim")
    assert back["active"] is True and back["uid_number"] == kim["uid_number"]

    # -o yaml is the same object as -o json; the table is for people.
    as_yaml = run_sup("user", "show", "kim", "-o", "yaml", env=env)
    as_json = run_sup("user", "show", "kim", "-o", "json", env=env)
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)
    table = run_sup("user", "list", env=env)
    assert table.returncode == 0 and "kim@example.org" in table.stdout and "physics" in table.stdout


def test_bad_input_exits_with_its_code_and_changes_nothing(
    env: dict[str, str], store_sessions: sessionmaker[Session]
) -> None:
    _sup(env, "group", "create", "physics")
    _sup(env, "user", "create", "kim", "--group", "physics")
    before = _counts(store_sessions)
    refused = {
        ("user", "create", "Kim"): (5, "username"),  # not a POSIX name
        ("user", "create", "saul", "--key", "ssh-rsa AAAA nope"): (5, "ssh_public_keys.0"),
        ("user", "create", "saul", "--group", "nope"): (5, "there is no group 'nope'"),
        ("user", "create", "saul", "--key-file", "/nonexistent/keys"): (5, "cannot read --key-file"),
        ("user", "create", "kim"): (4, "already exists"),
        ("user", "update", "nobody", "--email", "a@example.org"): (3, "does not exist"),
        ("user", "update", "kim"): (2, "nothing to change"),
        ("group", "add", "physics", "saul"): (3, "'saul' does not exist"),
        ("group", "remove", "physics", "nobody"): (3, "does not exist"),
    }
    for args, (code, said) in refused.items():
        result = run_sup(*args, env=env)
        assert (result.returncode, said in result.stderr) == (code, True), (args, result.stderr)
    assert _counts(store_sessions) == before

    # Several users in one command: all or none.
    _sup(env, "user", "create", "saul")
    before = _counts(store_sessions)
    partial = run_sup("group", "add", "physics", "saul", "ghost", env=env)
    assert partial.returncode == 3 and "'ghost' does not exist" in partial.stderr
    assert _counts(store_sessions) == before
    added = run_sup("group", "add", "physics", "saul", "kim", env=env)
    assert added.returncode == 0 and "1 added, 1 already members; 2 members now" in added.stdout
    removed = run_sup("group", "remove", "physics", "saul", "kim", env=env)
    assert removed.returncode == 0 and "0 members now" in removed.stdout
    assert _sup(env, "group", "show", "physics")["members"] == []


def test_a_slurm_account_created_and_changed_from_the_shell(
    env: dict[str, str], store_sessions: sessionmaker[Session]
) -> None:
    _sup(env, "group", "create", "physics")
    phys = _sup(
        env, "account", "create", "phys", "--group", "physics", "--qos", "normal", "--qos", "high",
        "--default-qos", "high", "--limits", '{"grp_tres": {"gres/gpu": "16"}, "max_jobs": 50}',
    )  # fmt: skip
    assert (phys["group"], phys["qos"], phys["default_qos"]) == ("physics", ["normal", "high"], "high")
    assert phys["limits"] == {"grp_tres": {"gres/gpu": "16"}, "max_jobs": 50}
    with store_sessions() as session:
        marked = {(kind, name) for kind, name in session.execute(select(OutboxMark.kind, OutboxMark.name))}
    assert ("slurm_account", "phys") in marked

    changed = _sup(env, "account", "update", "phys", "--fairshare", "20", "--limits", '{"max_jobs": 10}')
    assert (changed["fairshare"], changed["limits"], changed["qos"]) == (
        20,
        {"max_jobs": 10},
        ["normal", "high"],
    )
    before = _counts(store_sessions)
    for args, code in {
        ("account", "create", "chem", "--limits", "{nope"): 5,
        ("account", "create", "chem", "--qos", "a", "--default-qos", "b"): 5,
        ("account", "create", "chem", "--limits", '{"max_jobz": 1}'): 5,
        ("account", "create", "phys"): 4,
        ("account", "update", "nope", "--fairshare", "1"): 3,
    }.items():
        assert run_sup(*args, env=env).returncode == code, args
    assert _counts(store_sessions) == before
    listed = json.loads(run_sup("account", "list", "-o", "json", env=env).stdout)
    assert [a["name"] for a in listed] == ["phys"]
