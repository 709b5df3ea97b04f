"""The one write path from the sources into the store: the services' create-or-update and batched
create answer what changed, and write nothing when nothing changed."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.errors import Forbidden
from sup.groups.bulk import add_memberships, create_groups, remove_memberships
from sup.groups.schemas import GroupCreate
from sup.groups.upsert import GroupInput, save_group, take_over_group
from sup.store.lookup import require_group, require_user
from sup.store.models import AuditEntry, OutboxMark
from sup.store.source_columns import SourceColumns
from sup.targets.slurm.settings import SlurmSettings
from sup.users.bulk import create_users
from sup.users.schemas import UserCreate, UserPatch
from sup.users.service import snapshot, update_user
from sup.users.upsert import UserInput, save_user, take_over_user
from tests.conftest import ACTOR
from tests.support.keys import ed25519_key


def _audit_count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(AuditEntry)) or 0


def test_save_user_creates_updates_and_leaves_alone(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    data = UserInput("ada", "keycloak", {"email": "ada@example.org", "active": True, "external_id": "k1"})
    with sessions.begin() as session:
        user, change = save_user(session, settings, ACTOR, data, None)
        assert (change.action, user.source, user.external_id) == ("created", "keycloak", "k1")
    with sessions.begin() as session:
        entries = _audit_count(session)
        session.execute(delete(OutboxMark))
        _, change = save_user(session, settings, ACTOR, data, require_user(session, "ada"))
        assert change.action == "unchanged" and not change.changed
        assert _audit_count(session) == entries
        assert session.scalar(select(func.count()).select_from(OutboxMark)) == 0
    renamed = UserInput("ada2", "keycloak", {"email": "ada@example.net", "active": False})
    with sessions.begin() as session:
        user, change = save_user(session, settings, ACTOR, renamed, require_user(session, "ada"))
        assert change.action == "updated"
        assert change.changed == {"username", "email", "active"}
        assert (user.username, user.active, user.suspended_at is not None) == ("ada2", False, True)
        assert require_group(session, "ada2").private_user_id == user.id


def test_keys_of_one_origin_and_a_private_group_gid(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    own, idp = ed25519_key("own"), ed25519_key("idp")
    with sessions.begin() as session:
        save_user(session, settings, ACTOR, UserInput("bo", "api", {"ssh_public_keys": [own]}), None)
    data = UserInput(
        "bo",
        "api",
        {"ssh_public_keys": [idp], "primary_gid": 10500},
        key_origin="idp",
        keys_of_origin_only=True,
        private_group_gid="first",
    )
    with sessions.begin() as session:
        user, change = save_user(session, settings, ACTOR, data, require_user(session, "bo"))
        assert change.changed == {"ssh_public_keys", "primary_gid"}
        assert sorted(k.origin for k in user.ssh_keys) == ["admin", "idp"]
        assert (user.primary_gid, require_group(session, "bo").gid_number) == (10500, 10500)
    with sessions.begin() as session:
        _, change = save_user(session, settings, ACTOR, data, require_user(session, "bo"))
        assert change.action == "unchanged"


def test_source_columns_have_their_own_audit_entry(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    def data(user_name: str) -> UserInput:
        columns = SourceColumns({"scim_user_name": user_name}, {"scim_user_name": "userName"}, "update_scim")
        return UserInput("cy", "scim:okta", {}, columns=columns)

    with sessions.begin() as session:
        user, _ = save_user(session, settings, ACTOR, data("Cy@example.org"), None)
        assert user.scim_user_name == "Cy@example.org"
    with sessions.begin() as session:
        _, change = save_user(session, settings, ACTOR, data("cy@example.org"), require_user(session, "cy"))
        assert change.changed == {"scim_user_name"}
        last = session.scalars(select(AuditEntry).order_by(AuditEntry.id.desc())).first()
        assert last is not None and last.action == "update_scim"
        assert (last.before, last.after) == ({"userName": "Cy@example.org"}, {"userName": "cy@example.org"})


def test_save_group_and_take_over(settings: Settings, sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        save_user(session, settings, ACTOR, UserInput("di", "api"), None)
        group, change = save_group(
            session, settings, ACTOR, GroupInput("lab", "api", {"members": ["di"]}), None
        )
        assert change.action == "created"
        take_over_group(session, ACTOR, group, "keycloak", "g1")
        take_over_user(session, ACTOR, require_user(session, "di"), "keycloak", "u1")
    with sessions.begin() as session:
        group = require_group(session, "lab")
        assert (group.source, group.external_id) == ("keycloak", "g1")
        _, change = save_group(
            session, settings, ACTOR, GroupInput("lab", "keycloak", {"members": ["di"]}), group
        )
        assert change.action == "unchanged"
        _, change = save_group(
            session, settings, ACTOR, GroupInput("lab2", "keycloak", {"members": []}), group
        )
        assert change.changed == {"name", "members"}


def test_batched_create_writes_what_one_by_one_would(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    specs = [
        UserCreate(username=f"u{i}", email=f"u{i}@example.org", ssh_public_keys=[ed25519_key()])
        for i in range(3)
    ]
    with sessions.begin() as session:
        changes = create_users(session, settings, ACTOR, specs, "import")
        assert [c.action for c in changes] == ["created"] * 3
    with sessions.begin() as session:
        for spec in specs:
            entry = session.scalars(select(AuditEntry).where(AuditEntry.resource_name == spec.username)).one()
            shown = snapshot(require_user(session, spec.username))
            assert entry.after is not None
            assert entry.after == {k: v for k, v in shown.items() if k in entry.after}
            assert (
                entry.after["source"] == "import" and entry.after["ssh_public_keys"] == spec.ssh_public_keys
            )


def test_save_group_keeps_keycloak_out_of_admin_groups(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    """The privilege rule lives in the one write path: a Keycloak pull (or any source not in
    sources.privileged_group_writers) neither creates an admin group nor adds members to one."""
    guarded = settings.model_copy(
        update={"slurm": SlurmSettings(cluster="c1", admin_groups={"ops": "Operator"})}
    )
    with sessions.begin() as session:
        save_user(session, guarded, ACTOR, UserInput("ada", "keycloak"), None)
        save_user(session, guarded, ACTOR, UserInput("bo", "keycloak"), None)
        with pytest.raises(Forbidden, match="'ops' is privileged"):
            save_group(session, guarded, ACTOR, GroupInput("ops", "keycloak", {"members": ["ada"]}), None)
        # One created before it was privileged (here: by the unguarded settings) stays, and can shrink.
        save_group(session, settings, ACTOR, GroupInput("ops", "keycloak", {"members": ["ada"]}), None)
        ops = require_group(session, "ops")
        with pytest.raises(Forbidden, match="add members to"):
            save_group(
                session, guarded, ACTOR, GroupInput("ops", "keycloak", {"members": ["ada", "bo"]}), ops
            )
        _, change = save_group(session, guarded, ACTOR, GroupInput("ops", "keycloak", {"members": []}), ops)
        assert change.action == "updated" and require_group(session, "ops").memberships == []
        patch = UserPatch(groups=["ops"])
        with pytest.raises(Forbidden):
            update_user(session, guarded, ACTOR, "bo", patch, writer="keycloak")
        allowed = guarded.model_copy(
            update={"sources": guarded.sources.model_copy(update={"privileged_group_writers": ["keycloak"]})}
        )
        save_group(session, allowed, ACTOR, GroupInput("ops", "keycloak", {"members": ["ada", "bo"]}), ops)
        assert sorted(m.user.username for m in require_group(session, "ops").memberships) == ["ada", "bo"]


def test_batched_memberships_name_who_joined_and_who_left(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        create_users(
            session, settings, ACTOR, [UserCreate(username=n) for n in ("ann", "bob", "cy")], "import"
        )
        create_groups(session, settings, ACTOR, [GroupCreate(name="lab")], "import")
    with sessions.begin() as session:
        add_memberships(session, ACTOR, [("lab", "cy"), ("lab", "ann")], "import")
    with sessions.begin() as session:
        remove_memberships(session, ACTOR, [("lab", "cy")])
    with sessions() as session:
        entries = session.scalars(
            select(AuditEntry).where(AuditEntry.resource_name == "lab").order_by(AuditEntry.id)
        ).all()
        changes = [
            (e.action, e.after["members_added"], e.after["members_removed"]) for e in entries[1:] if e.after
        ]
    assert changes == [("add_member", ["ann", "cy"], []), ("remove_member", [], ["cy"])]
