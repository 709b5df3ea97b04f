"""A Keycloak full pull on a store: new users go in batches, a pull without change skips per-user work,
and neither changes what people see (uids, gids, private groups, keys and their origin, groups and
members, conflicts and errors reported, audit entries and outbox marks)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from sqlalchemy import Engine, event, select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.sources.keycloak.create_batch import NewUserBatches
from sup.sources.keycloak.reader import KcGroup, KcUser, RealmReader, RealmSnapshot
from sup.sources.keycloak.report import SyncReport
from sup.sources.keycloak.runner import full_sync
from sup.store.audit import Actor
from sup.store.models import AuditEntry, Group, Membership, OutboxMark, SshKey, User
from sup.store.session import make_engine, make_sessionmaker
from sup.users.schemas import UserCreate
from sup.users.service import create_user
from tests.support.keys import ed25519_key

KC = {"url": "https://sso.example.org", "realm": "hpc", "client_id": "sup", "client_secret": "s3cret"}
SHARED_KEY = ed25519_key("shared")


class FakeReader(RealmReader):
    """Answers with a snapshot made here (the HTTP side is tests/keycloak's)."""

    def __init__(self, snapshot: RealmSnapshot) -> None:
        self.snap = snapshot

    def snapshot(self) -> RealmSnapshot:
        return self.snap


def _user(n: int, **attributes: list[str]) -> KcUser:
    keys = {"sshPublicKey": [ed25519_key(f"user{n}")]}
    return KcUser(
        id=f"kc-{n:03d}",
        username=f"User{n:03d}",
        email=f"user{n}@example.org",
        first_name="User",
        last_name=f"N{n}",
        enabled=True,
        attributes={**keys, **attributes},
    )


def _realm() -> RealmSnapshot:
    users = [_user(n) for n in range(40)]
    users[3] = KcUser(**{**users[3].__dict__, "enabled": False})  # disabled: never created
    users[5] = _user(5, uidNumber=["45000"], loginShell=["/bin/sh"])  # ids from Keycloak: one by one
    users[7] = _user(7, sshPublicKey=["ssh-ed25519 not-a-key", ed25519_key("ok")])  # reported
    users[9] = _user(9, sshPublicKey=[SHARED_KEY])  # another account has that key: a conflict
    users[11] = _user(11, uidNumber=["twelve"])  # reported, the rest syncs
    users.append(KcUser(**{**users[12].__dict__, "id": "kc-twin"}))  # the same username twice
    users.append(KcUser(**{**users[13].__dict__, "id": "kc-held", "username": "taken"}))  # an api user's
    groups = {
        f"g{i}": KcGroup(id=f"g{i}", name=f"team{i}", path=f"/dept/team{i}", parent_id="g0" if i else None)
        for i in range(4)
    }
    groups["g0"] = KcGroup(id="g0", name="dept", path="/dept")
    members = {f"g{i}": {u.id for u in users[i::3]} for i in range(4)}
    return RealmSnapshot(users={u.id: u for u in users}, groups=groups, members=members, requests=1)


def _store(store_url: str) -> tuple[Settings, Engine, sessionmaker[Session]]:
    settings = Settings(database_url=store_url, keycloak=KC)
    engine = make_engine(store_url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:  # an api user holding a name and a key Keycloak users want
        spec = UserCreate(username="taken", ssh_public_keys=[SHARED_KEY])
        create_user(session, settings, Actor(name="test", role="admin"), spec, "api")
    return settings, engine, sessions


def _seen(sessions: sessionmaker[Session], report: SyncReport) -> dict[str, Any]:
    """What people see of the store (ids, keys, groups, members, audit, outbox) and of the report."""
    with sessions() as s:
        by_id = {u.id: u.username for u in s.scalars(select(User))}
        audit = Counter((a.action, a.resource_type, a.resource_name) for a in s.scalars(select(AuditEntry)))
        created_after = {
            a.resource_name: {
                k: a.after[k] for k in ("uid_number", "primary_gid", "ssh_public_keys", "source")
            }
            for a in s.scalars(select(AuditEntry).where(AuditEntry.action == "create"))
            if a.resource_type == "user" and a.after is not None
        }
        return {
            "users": sorted(
                (
                    u.username,
                    u.uid_number,
                    u.primary_gid,
                    u.email,
                    u.display_name,
                    u.login_shell,
                    u.home_directory,
                    u.active,
                    u.source,
                    u.external_id,
                    u.version,
                )
                for u in s.scalars(select(User))
            ),
            "keys": sorted(
                (by_id[k.user_id], k.fingerprint, k.comment, k.origin) for k in s.scalars(select(SshKey))
            ),
            "groups": sorted(
                (g.name, g.gid_number, by_id.get(g.private_user_id or 0), g.source, g.external_id)
                for g in s.scalars(select(Group))
            ),
            "members": sorted(
                (m.group.name, by_id[m.user_id], m.source) for m in s.scalars(select(Membership))
            ),
            "outbox": sorted((m.kind, m.name) for m in s.scalars(select(OutboxMark))),
            "audit": audit,
            "audit_created": created_after,
            "report": (
                sorted(report.created),
                sorted(report.conflicts),
                sorted(report.errors),
                report.members_added,
                sorted(report.groups_created),
            ),
        }


def _writes(engine: Engine) -> list[str]:
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(statement.lstrip().split(" ", 1)[0].upper())

    event.listen(engine, "before_cursor_execute", seen)
    return statements


def test_the_batched_first_pull_gives_what_the_per_user_path_gives(
    tmp_path: Any, sqlite_template: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    outcomes = []
    realm = _realm()  # the same keys both times
    for batched in (True, False):
        path = tmp_path / f"{batched}.db"
        shutil.copy(sqlite_template, path)
        settings, engine, sessions = _store(f"sqlite:///{path}")
        with monkeypatch.context() as patched:
            if not batched:
                patched.setattr(NewUserBatches, "take", lambda self, kc: False)
            statements = _writes(engine)
            report = full_sync(settings, engine, sessions, reader=FakeReader(realm))
        outcomes.append((_seen(sessions, report), statements))
        engine.dispose()
    (batched_seen, batched_sql), (one_by_one_seen, one_by_one_sql) = outcomes
    assert batched_seen["report"][0] and batched_seen["report"][1] and batched_seen["report"][2]
    assert ("user", "user039") in batched_seen["outbox"] and batched_seen["members"]
    for part in one_by_one_seen:
        assert batched_seen[part] == one_by_one_seen[part], part
    # The batch is what makes the difference: a few statements per batch, not a dozen per user.
    assert len(batched_sql) < len(one_by_one_sql) / 2


def test_a_pull_without_change_does_no_per_user_work(store_url: str) -> None:
    settings, engine, sessions = _store(store_url)
    realm = _realm()
    del realm.users["kc-009"]  # its create is tried (and refused) on every pull: writes rolled back
    first = full_sync(settings, engine, sessions, reader=FakeReader(realm))
    assert len(first.created) > 30
    statements = _writes(engine)
    again = full_sync(settings, engine, sessions, reader=FakeReader(realm))
    assert again.writes == 0 and not again.created and not again.updated
    # The users that plainly did not change cost no statement of their own: no savepoint, no
    # lazy load; only the reported ones (a bad attribute, a conflict) go the full way again.
    assert statements.count("SAVEPOINT") < 10, Counter(statements)
    assert len(statements) < 40, Counter(statements)
    assert [s for s in statements if s in {"INSERT", "UPDATE", "DELETE"}] == ["UPDATE"]  # source_state
    assert sorted(again.errors) == sorted(first.errors) and sorted(again.conflicts) == sorted(first.conflicts)
    engine.dispose()


def test_keys_over_a_persons_caps_are_reported_and_the_others_sync(store_url: str) -> None:
    # The IdP is one more way keys arrive: the caps hold there too (batched or one by one).
    settings = Settings(database_url=store_url, keycloak=KC, accounts={"max_ssh_key_bytes": 1024})
    engine = make_engine(store_url)
    sessions = make_sessionmaker(engine)
    wide = _user(1, sshPublicKey=[ed25519_key("c" * 1000)])  # about 1.1 KB of keys
    hidden = _user(2, sshPublicKey=[ed25519_key("user2@\u202elaptop")])  # a pod would leave it out
    users = [wide, hidden, *(_user(n) for n in range(3, 8))]
    realm = RealmSnapshot(users={u.id: u for u in users}, groups={}, members={}, requests=1)
    report = full_sync(settings, engine, sessions, reader=FakeReader(realm))
    assert sorted(report.created) == [f"user{n:03d}" for n in range(2, 8)]  # not user001
    assert any("accounts.max_ssh_key_bytes" in error for error in report.errors), report.errors
    assert any("U+202E" in error for error in report.errors), report.errors  # that key left out
    with sessions() as session:
        assert session.scalar(select(User).where(User.username == "user001")) is None
        owners = set(session.scalars(select(User.username).join(SshKey, SshKey.user_id == User.id)))
        assert owners == {f"user{n:03d}" for n in range(3, 8)}
    engine.dispose()


def test_a_pull_reports_a_home_inside_another_persons(store_url: str) -> None:
    """Issue 24: a Keycloak user whose (default) home would contain another person's, or lie inside
    it, is a reported error naming that person; the pull goes on with everyone else, batched."""
    settings, engine, sessions = _store(store_url)
    with sessions.begin() as session:
        for name, home in (("bo", "/home/user001/x"), ("cy", "/home/cy")):
            spec = UserCreate(username=name, home_directory=home)
            create_user(session, settings, Actor(name="test", role="admin"), spec, "api")
    realm = RealmSnapshot(
        users={u.id: u for u in (_user(n) for n in range(6))}, groups={}, members={}, requests=1
    )
    report = full_sync(settings, engine, sessions, reader=FakeReader(realm))
    assert [e for e in report.errors if "home" in e] == [
        "user 'User001': home directory '/home/user001' contains the home '/home/user001/x' of user 'bo' "
        "(a group's login pod would mount one over the other)"
    ], report.errors
    assert sorted(report.created) == ["user000", "user002", "user003", "user004", "user005"]
    with sessions() as s:
        assert s.scalar(select(User.home_directory).where(User.username == "bo")) == "/home/user001/x"
    engine.dispose()


def test_a_member_list_change_from_keycloak_names_who_joined_and_who_left(store_url: str) -> None:
    settings, engine, sessions = _store(store_url)
    users = [_user(n) for n in range(4)]
    groups = {"g1": KcGroup(id="g1", name="lab", path="/lab")}
    realm = RealmSnapshot(
        users={u.id: u for u in users}, groups=groups, members={"g1": {"kc-000", "kc-001"}}, requests=1
    )
    full_sync(settings, engine, sessions, reader=FakeReader(realm))
    realm.members["g1"] = {"kc-001", "kc-002", "kc-003"}
    full_sync(settings, engine, sessions, reader=FakeReader(realm))
    with sessions() as s:
        entries = s.scalars(
            select(AuditEntry).where(AuditEntry.resource_name == "lab").order_by(AuditEntry.id)
        ).all()
        changes = [
            (e.action, e.after["members_added"], e.after["members_removed"])
            for e in entries
            if e.after and "members_added" in e.after  # a new group without members has none
        ]
    # Whether the first members come with the new group or as a change after it, both are named.
    added_first = sorted(name for _, added, _ in changes[:-1] for name in added)
    assert added_first == ["user000", "user001"]
    assert changes[-1] == ("update", ["user002", "user003"], ["user000"])
    engine.dispose()
