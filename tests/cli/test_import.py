"""`sup import` and `sup export` as an operator runs them: files in, store contents and reports out."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.groups.schemas import GroupCreate
from sup.groups.service import create_group
from sup.store.models import AuditEntry, Group, IdAllocation, Membership, OutboxMark, User
from sup.users.schemas import UserCreate
from sup.users.service import create_user
from tests.conftest import ACTOR
from tests.support.cli import run_sup, sup_env, sup_executable
from tests.support.keys import ed25519_key

HEADER = "username,email,display_name,groups,uid_number,login_shell,ssh_public_keys\n"
GROUPS = "groups:\n  - name: lab1\n  - name: lab2\n    description: second lab\n"


@pytest.fixture
def env(database_url: str) -> dict[str, str]:
    return sup_env(SUP_DATABASE_URL=database_url)


def _count(sessions: sessionmaker[Session], model: type) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(model)) or 0


def _users(sessions: sessionmaker[Session]) -> dict[str, tuple[int, bool, str]]:
    with sessions() as session:
        return {u.username: (u.uid_number, u.active, u.source) for u in session.scalars(select(User))}


def _member_changes(sessions: sessionmaker[Session], group: str) -> list[tuple[str, list[str], list[str]]]:
    """The group's audit entries that change its member list, oldest first, as their `after` names it."""
    with sessions() as session:
        entries = session.scalars(
            select(AuditEntry)
            .where(AuditEntry.resource_type == "group", AuditEntry.resource_name == group)
            .order_by(AuditEntry.id)
        ).all()
    return [
        (e.action, e.after["members_added"], e.after["members_removed"])
        for e in entries
        if e.after and "members_added" in e.after
    ]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_import_creates_then_changes_nothing(
    env: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    assert run_sup("import", str(_write(tmp_path, "g.yaml", GROUPS)), env=env).returncode == 0
    key = ed25519_key("kim@laptop")
    csv = _write(
        tmp_path,
        "people.csv",
        HEADER + f"kim,kim@example.org,Kim W,lab1;lab2,12345,/bin/zsh,{key}\nlee,,Lee,lab1,,,\n",
    )
    first = run_sup("import", str(csv), "--json", env=env)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["summary"]["user"]["created"] == 2
    users = _users(sessions)
    assert users["kim"] == (12345, True, "import")
    assert users["lee"][2] == "import"
    with sessions() as session:
        kim = session.scalars(select(User).where(User.username == "kim")).one()
        assert [k.line for k in kim.ssh_keys] == [key]
        assert kim.login_shell == "/bin/zsh" and kim.primary_gid == 12345
        assert sorted(m.group.name for m in kim.memberships) == ["lab1", "lab2"]
        assert session.get(Group, kim.private_group.id).gid_number == 12345  # type: ignore[union-attr]
    # New people joining the groups: the groups' own entries name them (the bulk path's).
    assert _member_changes(sessions, "lab1") == [("add_member", ["kim", "lee"], [])]
    audit, marks = _count(sessions, AuditEntry), _count(sessions, OutboxMark)

    again = run_sup("import", str(csv), "--json", env=env)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)["summary"]["user"]
    assert (summary["created"], summary["updated"], summary["unchanged"]) == (0, 0, 2)
    assert (_count(sessions, AuditEntry), _count(sessions, OutboxMark)) == (audit, marks)

    changed = _write(
        tmp_path, "changed.csv", HEADER + f"kim,kim@example.org,Kim Wexler,lab2,12345,/bin/zsh,{key}\n"
    )
    result = run_sup("import", str(changed), "--json", env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["summary"]["user"]["updated"] == 1
    assert report["membership_changes"]["remove"] == [{"group": "lab1", "user": "kim"}]
    with sessions() as session:
        kim = session.scalars(select(User).where(User.username == "kim")).one()
        assert kim.display_name == "Kim Wexler"
        assert [m.group.name for m in kim.memberships] == ["lab2"]
    assert _member_changes(sessions, "lab1")[-1] == ("remove_member", [], ["kim"])


def test_invalid_file_reports_every_problem_and_writes_nothing(
    env: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    assert (
        run_sup(
            "import", str(_write(tmp_path, "people.csv", HEADER + "taken,,,,20000,,\n")), env=env
        ).returncode
        == 0
    )
    bad = _write(
        tmp_path,
        "bad.csv",
        HEADER
        + "ok,ok@example.org,Ok,,,,\n"
        + "Bad Name,,,,,,\n"
        + "dup,,,,,,\n"
        + "dup,,,,,,\n"
        + "ghost,,,nosuchgroup,,,\n"
        + "clash,,,,20000,,\n"
        + "keyless,,,,,,ssh-ed25519 AAAAnotakey\n"
        + "shell,,,,,/bin/fish,\n"
        + "root,,,,,,\n",
    )
    result = run_sup("import", str(bad), env=env)
    assert result.returncode == 5
    for expected in (
        "line 3: username",
        "line 5: username: duplicate username 'dup' (also at line 4)",
        "line 6: groups.0: unknown group 'nosuchgroup'",
        "line 7: uid_number: 20000 is in use by user 'taken'",
        "line 8: ssh_public_keys.0",
        "line 9: login_shell: /bin/fish is not an allowed shell",
        "line 10: username",
        "nothing was written",
    ):
        assert expected in result.stderr, (expected, result.stderr)
    assert set(_users(sessions)) == {"taken"}
    # for scripts: the same exit code, every problem with where it is; -o yaml = -o json
    as_json = run_sup("import", str(bad), "-o", "json", env=env)
    as_yaml = run_sup("import", str(bad), "-o", "yaml", env=env)
    assert as_json.returncode == as_yaml.returncode == 5
    report = json.loads(as_json.stdout)
    assert yaml.safe_load(as_yaml.stdout) == report and report["ok"] is False
    assert {p["where"] for p in report["problems"]} == {f"line {n}" for n in (3, 5, 6, 7, 8, 9, 10)}
    assert set(_users(sessions)) == {"taken"}

    skipped = run_sup("import", str(bad), "--skip-invalid", "--json", env=env)
    assert skipped.returncode == 0, skipped.stderr
    report = json.loads(skipped.stdout)
    assert {p["where"] for p in report["skipped"]} == {f"line {n}" for n in (3, 5, 6, 7, 8, 9, 10)}
    assert set(_users(sessions)) == {"taken", "ok", "dup"}


def test_yaml_problems_name_their_path_and_unreadable_files_exit_5(
    env: dict[str, str], tmp_path: Path
) -> None:
    doc = _write(
        tmp_path,
        "bad.yaml",
        "users:\n  - username: ann\n    colour: blue\n  - username: bo\n    groups: [nope]\n"
        "groups:\n  - name: g1\n    gid_number: 12\nslurm_accounts:\n  - name: a1\n    parent: missing\n",
    )
    result = run_sup("import", str(doc), env=env)
    assert result.returncode == 5
    assert "users[0]: colour: unknown field" in result.stderr
    assert "users[1]: groups.0: unknown group 'nope'" in result.stderr
    assert "groups[0]: gid_number: 12 is outside the allowed ranges" in result.stderr
    assert "slurm_accounts[0]: parent: unknown parent account 'missing'" in result.stderr
    assert run_sup("import", str(_write(tmp_path, "x.txt", "")), env=env).returncode == 5
    assert run_sup("import", str(_write(tmp_path, "h.csv", "user,mail\n")), env=env).returncode == 5
    assert run_sup("import", str(tmp_path / "missing.csv"), env=env).returncode == 5
    assert run_sup("import", env=env).returncode == 2


def test_dry_run_writes_nothing(env: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path) -> None:
    groups = _write(tmp_path, "g.yaml", GROUPS)
    result = run_sup("import", str(groups), "--dry-run", env=env)
    assert result.returncode == 0, result.stderr
    assert "create group lab1" in result.stdout and "dry run: nothing written" in result.stdout
    assert _count(sessions, Group) == 0 and _count(sessions, IdAllocation) == 0
    planned = run_sup("import", str(groups), "--dry-run", "--plan", "--json", env=env)
    assert planned.returncode == 0, planned.stderr
    data = json.loads(planned.stdout)
    assert [c["name"] for c in data["changes"]] == ["lab1", "lab2"]
    assert data["plan"] == []  # every target is disabled here
    as_yaml = run_sup("import", str(groups), "--dry-run", "--plan", "-o", "yaml", env=env)
    assert as_yaml.returncode == 0 and yaml.safe_load(as_yaml.stdout) == data
    assert _count(sessions, Group) == 0


def test_export_then_import_round_trips(
    env: dict[str, str], database_url: str, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    key = ed25519_key("bo")
    doc = _write(
        tmp_path,
        "all.yaml",
        GROUPS
        + "users:\n"
        + "  - {username: ann, groups: [lab1], uid_number: 20001, email: ann@example.org}\n"
        + f"  - {{username: bo, groups: [lab1, lab2], active: false, ssh_public_keys: ['{key}']}}\n"
        + "slurm_accounts:\n  - {name: lab1, group: lab1, fairshare: 10, qos: [normal]}\n"
        + "  - {name: sub, parent: lab1, group: lab2, limits: {max_jobs: 5}}\n",
    )
    assert run_sup("import", str(doc), env=env).returncode == 0
    exported = run_sup("export", "--format", "json", env=env)
    assert exported.returncode == 0
    first = json.loads(exported.stdout)
    assert [u["username"] for u in first["users"]] == ["ann", "bo"]
    assert first["users"][0]["uid_number"] == 20001 and first["users"][1]["active"] is False
    path = _write(tmp_path, "export.json", exported.stdout)

    same = run_sup("import", str(path), "--json", env=env)
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["changes"] == []

    fresh_url = f"sqlite:///{tmp_path / 'fresh.db'}"
    fresh = sup_env(SUP_DATABASE_URL=fresh_url)
    assert run_sup("db", "upgrade", env=fresh).returncode == 0
    loaded = run_sup("import", str(path), env=fresh)
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(run_sup("export", "--format", "json", env=fresh).stdout) == first


def test_prune_suspends_through_the_lifecycle_and_is_guarded(
    env: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    everyone = HEADER + "".join(f"u{n},,,,,,\n" for n in range(10))
    assert run_sup("import", str(_write(tmp_path, "all.csv", everyone)), env=env).returncode == 0
    assert run_sup("user", "list", env=env).returncode == 0
    fewer = _write(tmp_path, "fewer.csv", HEADER + "".join(f"u{n},,,,,,\n" for n in range(8)))
    result = run_sup("import", str(fewer), "--prune", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["user"]["pruned"] == 2
    users = _users(sessions)
    assert len(users) == 10  # suspended, not deleted: the lifecycle deletes after the grace period
    assert [n for n, (_, active, _) in sorted(users.items()) if not active] == ["u8", "u9"]

    nobody = _write(tmp_path, "nobody.csv", HEADER)
    refused = run_sup("import", str(nobody), "--prune", env=env)
    assert refused.returncode == 7 and "max_suspension" in refused.stderr
    assert sum(1 for _, active, _ in _users(sessions).values() if active) == 8
    forced = run_sup("import", str(nobody), "--prune", "--force", env=env)
    assert forced.returncode == 0
    assert not any(active for _, active, _ in _users(sessions).values())


TOTAL = 6_000  # six chunks of sup/sources/files/apply.py's CHUNK


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_interrupted_import_reruns_to_completion_without_duplicates(
    tmp_path: Path, how: signal.Signals
) -> None:
    url = f"sqlite:///{tmp_path / 'sup.db'}"
    env = sup_env(SUP_DATABASE_URL=url)
    assert run_sup("db", "upgrade", env=env).returncode == 0
    groups = "".join(f"  - name: g{n}\n" for n in range(20))
    users = "".join(f"  - {{username: p{n:05d}, groups: [g{n % 20}]}}\n" for n in range(TOTAL))
    doc = _write(tmp_path, "big.yaml", f"groups:\n{groups}users:\n{users}")

    from sqlalchemy import create_engine

    engine = create_engine(url)
    process = subprocess.Popen(
        [sup_executable(), "import", str(doc)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it: a test run started in the background (`cmd &` in a
        # script) ignores SIGINT, the import would inherit that and run to its end.
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 120
    created = 0
    while time.monotonic() < deadline and process.poll() is None:
        with engine.connect() as connection:
            created = connection.scalar(select(func.count()).select_from(User)) or 0
        if created >= 1000:
            break
        time.sleep(0.05)
    process.send_signal(how)
    _, stderr = process.communicate(timeout=60)
    if how == signal.SIGINT:
        assert process.returncode == 130 and "run the same import again" in stderr, stderr
    assert 1000 <= created < TOTAL, f"the import was not caught midway ({created} users)"
    with engine.connect() as connection:
        partial = connection.scalar(select(func.count()).select_from(User)) or 0
    assert partial < TOTAL

    rerun = run_sup("import", str(doc), "--json", env=env, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout)["summary"]["user"]
    assert summary["created"] == TOTAL - partial and summary["unchanged"] == partial
    with engine.connect() as connection:
        assert connection.scalar(select(func.count()).select_from(User)) == TOTAL
        assert connection.scalar(select(func.count(func.distinct(User.uid_number)))) == TOTAL
        assert connection.scalar(select(func.count()).select_from(Membership)) == TOTAL
        creates = connection.scalar(
            select(func.count()).where(AuditEntry.action == "create", AuditEntry.resource_type == "user")
        )
        assert creates == TOTAL
    engine.dispose()
    final = run_sup("import", str(doc), "--json", env=env, timeout=300)
    assert json.loads(final.stdout)["changes"] == []


def test_progress_bar_only_on_a_terminal(env: dict[str, str], tmp_path: Path) -> None:
    """A long import shows a progress bar on a terminal (`script` gives it one); piped, it does not."""
    people = _write(tmp_path, "people.csv", HEADER + "".join(f"p{n},,,,,,\n" for n in range(400)))
    piped = run_sup("import", str(people), env=env)
    assert piped.returncode == 0 and "importing" not in piped.stderr + piped.stdout
    more = _write(tmp_path, "more.csv", HEADER + "".join(f"q{n},,,,,,\n" for n in range(400)))
    command = f"{sup_executable()} import {more}"
    on_tty = subprocess.run(
        ["script", "-qec", command, "/dev/null"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert on_tty.returncode == 0, on_tty.stdout
    assert "importing" in on_tty.stdout and "created" in on_tty.stdout


def test_an_import_changes_only_what_it_owns(
    env: dict[str, str], sessions: sessionmaker[Session], settings: Settings, tmp_path: Path
) -> None:
    with sessions.begin() as session:
        create_user(session, settings, ACTOR, UserCreate(username="api_made", display_name="Made By API"))
        create_group(session, settings, ACTOR, GroupCreate(name="handmade"))
    same = _write(tmp_path, "same.csv", "username,email,display_name,groups\napi_made,,Made By API,\n")
    result = run_sup("import", str(same), "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["user"]["unchanged"] == 1

    other = _write(tmp_path, "other.csv", "username,email,display_name,groups\napi_made,,Renamed,handmade\n")
    refused = run_sup("import", str(other), env=env)
    assert refused.returncode == 5
    assert "user 'api_made' belongs to source 'api'" in refused.stderr
    assert _users(sessions)["api_made"][2] == "api"

    imported = _write(tmp_path, "g.yaml", "groups:\n  - name: lab1\n  - name: lab2\n")
    assert run_sup("import", str(imported), env=env).returncode == 0
    fewer = _write(tmp_path, "fewer.yaml", "groups:\n  - name: lab1\n")
    pruned = run_sup("import", str(fewer), "--prune", "--json", env=env)
    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout)["summary"]["group"]["pruned"] == 1
    with sessions() as session:
        names = set(session.scalars(select(Group.name).where(Group.private_user_id.is_(None))))
    assert names == {"handmade", "lab1"}  # another source's group is never pruned


def test_several_files_are_checked_and_imported_as_one(
    env: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    groups = _write(tmp_path, "labs.yaml", GROUPS)
    bad = _write(tmp_path, "people.csv", HEADER + "ann,,,lab1,,,\nann,,,lab2,,,\n")
    refused = run_sup("import", str(groups), str(bad), env=env)
    assert refused.returncode == 5
    assert (
        "people.csv: line 3: username: duplicate username 'ann' (also at people.csv: line 2)"
        in refused.stderr
    )
    assert _count(sessions, Group) == 0  # the valid groups file was not written either

    good = _write(tmp_path, "good.csv", HEADER + "ann,,,lab1;lab2,,,\n")
    result = run_sup("import", str(groups), str(good), "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["summary"]
    assert (summary["group"]["created"], summary["user"]["created"]) == (2, 1)


def test_homes_are_checked_before_anything_is_written(
    env: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    assert run_sup("import", str(_write(tmp_path, "a.csv", HEADER + "kim,,,,,,\n")), env=env).returncode == 0
    doc = _write(
        tmp_path,
        "homes.yaml",
        "users:\n"
        "  - {username: amy, home_directory: /etc}\n"
        "  - {username: bob, home_directory: /home/kim}\n"
        "  - {username: cy, home_directory: /home/shared}\n"
        "  - {username: di, home_directory: /home/shared}\n"
        "  - {username: kim, home_directory: /}\n",
    )
    result = run_sup("import", str(doc), env=env)
    assert result.returncode == 5, result.stderr
    for expected in (
        "users[0]: home_directory: '/etc' must lie below the home root /home",
        "users[1]: home_directory: '/home/kim' is already used by another user",
        "users[3]: home_directory: '/home/shared' is already used by another user",
        "users[4]: home_directory: '/' must lie below the home root /home",
    ):
        assert expected in result.stderr, (expected, result.stderr)
    assert set(_users(sessions)) == {"kim"}


def test_homes_inside_or_above_anothers_are_plan_problems(
    env: dict[str, str], settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    """Issue 24: a home inside another person's (or above it), in the store or earlier in the file,
    is a problem of the plan naming the person; --dry-run and the import both write nothing."""
    with sessions.begin() as session:
        create_user(session, settings, ACTOR, UserCreate(username="kim"))
        create_user(session, settings, ACTOR, UserCreate(username="cy", home_directory="/home/team/cy"))
    doc = _write(
        tmp_path,
        "nested.yaml",
        "users:\n"
        "  - {username: bob, home_directory: /home/kim/.ssh}\n"
        "  - {username: team}\n"
        "  - {username: amy, home_directory: /home/nest}\n"
        "  - {username: al, home_directory: /home/nest/al}\n"
        "  - {username: ki, home_directory: /home/ki}\n"
        "  - {username: kim, home_directory: /home/kim/deeper}\n",
    )
    expected = (
        "users[0]: home_directory: '/home/kim/.ssh' lies inside the home '/home/kim' of user 'kim'",
        "users[1]: home_directory: '/home/team' contains the home '/home/team/cy' of user 'cy'",
        "users[3]: home_directory: '/home/nest/al' lies inside the home '/home/nest' of user 'amy'",
    )
    for args in (("--dry-run",), ()):
        result = run_sup("import", str(doc), *args, env=env)
        assert result.returncode == 5, result.stderr
        for line in expected:
            assert line in result.stderr, (line, result.stderr)
        for fine in ("users[2]", "users[4]", "users[5]"):  # /home/ki is not inside /home/kim
            assert fine not in result.stderr, result.stderr
        with sessions() as session:
            rows = session.execute(select(User.username, User.home_directory)).all()
            homes = {row.username: row.home_directory for row in rows}
        assert homes == {"kim": "/home/kim", "cy": "/home/team/cy"}


def test_an_import_fills_privileged_groups_only_if_allowed(
    database_url: str, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    guarded = sup_env(
        SUP_DATABASE_URL=database_url,
        SUP_SLURM__CLUSTER="c1",
        SUP_SLURM__ADMIN_GROUPS='{"hpc-admins": "Administrator"}',
        SUP_SOURCES__PRIVILEGED_GROUP_WRITERS='["api"]',
    )
    doc = _write(
        tmp_path,
        "admins.yaml",
        "groups:\n  - {name: hpc-admins}\n  - {name: lab}\n"
        "users:\n  - {username: kim, groups: [hpc-admins, lab]}\n",
    )
    result = run_sup("import", str(doc), env=guarded)
    assert result.returncode == 5, result.stderr
    assert "group 'hpc-admins' is privileged" in result.stderr
    assert "sources.privileged_group_writers" in result.stderr
    assert _users(sessions) == {}
    # By default an import (an operator's) may.
    allowed = sup_env(
        SUP_DATABASE_URL=database_url,
        SUP_SLURM__CLUSTER="c1",
        SUP_SLURM__ADMIN_GROUPS='{"hpc-admins": "Administrator"}',
    )
    assert run_sup("import", str(doc), env=allowed).returncode == 0
    with sessions() as session:
        kim = session.scalars(select(User).where(User.username == "kim")).one()
        assert sorted(m.group.name for m in kim.memberships) == ["hpc-admins", "lab"]


def test_keys_over_a_persons_caps_are_reported_in_the_check_phase(
    env: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    wide = ed25519_key("c" * 1000)  # one key of about 1.1 KB, over a cap of 1 KiB
    doc = _write(
        tmp_path,
        "people.yaml",
        f"users:\n  - {{username: ann, ssh_public_keys: ['{ed25519_key('ann')}']}}\n"
        f"  - {{username: bo, ssh_public_keys: ['{wide}']}}\n",
    )
    result = run_sup("import", str(doc), env={**env, "SUP_ACCOUNTS__MAX_SSH_KEY_BYTES": "1024"})
    assert result.returncode == 5, (result.stdout, result.stderr)
    assert "users[1]: ssh_public_keys: the keys take" in result.stderr, result.stderr
    assert "at most 1024 per person (accounts.max_ssh_key_bytes)" in result.stderr
    assert _count(sessions, User) == 0  # the check phase refused the file: nothing written
