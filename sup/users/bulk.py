"""The users service's batched create, for imports: many users in a few statements.

With private groups (the default), users, their private groups, SSH keys and memberships go in as
multi-row inserts, uids and gids from the store's batch allocator, one outbox upsert per kind and one
audit row per user: never a query per row (an import of 10,000 users takes seconds). The caller has
checked the specs against the rules and the store first (the import plan does). Without private
groups each user goes through `create_user` (rare: it keeps the service's rules for primary groups).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.gids import private_gid_ranges, uid_ranges
from sup.domain.sshkeys import key_set_problem, parse_ssh_public_key
from sup.errors import FieldError, InvalidInput
from sup.store import ids
from sup.store.audit import Actor
from sup.store.bulk_audit import record_many, record_member_changes
from sup.store.models import Group, Membership, SshKey, User, new_scim_id, utcnow
from sup.store.outbox import mark_dirty_many
from sup.users.homes import check_new_homes
from sup.users.schemas import UserCreate
from sup.users.service import check_no_live_certificates, create_user, default_home
from sup.users.upsert import UserChange


def create_users(
    session: Session,
    settings: Settings,
    actor: Actor,
    specs: Sequence[UserCreate],
    source: str,
    *,
    key_origin: str = "admin",
) -> list[UserChange]:
    """Create the users of `specs` (with their `groups`, which exist); SSH keys have origin
    `key_origin` (`idp` for an identity provider's users, as `create_user` takes it)."""
    changes = [UserChange("created", s.username, frozenset(s.model_fields_set)) for s in specs]
    # The plan checked the homes too: this is the write path's own guard (a few IN queries).
    check_new_homes(
        session, settings, {s.username: s.home_directory or default_home(settings, s.username) for s in specs}
    )
    _check_key_sets(settings, specs)
    check_no_live_certificates(session, [s.username for s in specs])  # one read of a day's signings
    if not settings.ids.private_groups:  # rare: keep the service's rules for primary groups
        for spec in specs:
            create_user(session, settings, actor, spec, source, key_origin=key_origin)
        return changes
    uid_of = _uids(session, settings, specs)
    gid_of = _private_gids(session, settings, specs, uid_of)
    now = utcnow()
    rows: list[dict[str, Any]] = []
    for spec in specs:
        rows.append(
            {
                "username": spec.username,
                "display_name": spec.display_name,
                "given_name": spec.given_name,
                "family_name": spec.family_name,
                "email": spec.email,
                "uid_number": uid_of[spec.username],
                "primary_gid": gid_of[spec.username],
                "login_shell": spec.login_shell or settings.accounts.default_shell,
                "home_directory": spec.home_directory or default_home(settings, spec.username),
                "active": spec.active,
                "suspended_at": None if spec.active else now,
                "external_id": spec.external_id,
                "slurm_default_account": spec.slurm_default_account,
                "source": source,
                "scim_id": new_scim_id(),
                "version": 1,
                "created_at": now,
                "updated_at": now,
            }
        )
    user_id = {
        name: uid for uid, name in session.execute(insert(User).returning(User.id, User.username), rows).all()
    }
    session.execute(
        insert(Group),
        [
            {
                "name": name,
                "gid_number": gid_of[name],
                "private_user_id": user_id[name],
                "source": source,
                "scim_id": new_scim_id(),
                "version": 1,
                "created_at": now,
                "updated_at": now,
            }
            for name in user_id
        ],
    )
    keys = [
        {
            "user_id": user_id[spec.username],
            "key_type": key.key_type,
            "key_data": key.blob,
            "comment": key.comment,
            "fingerprint": key.fingerprint,
            "origin": key_origin,
            "created_at": now,
        }
        for spec in specs
        for key in (parse_ssh_public_key(line) for line in spec.ssh_public_keys)
    ]
    if keys:
        session.execute(insert(SshKey), keys)
    joined = {spec.username: sorted(spec.groups) for spec in specs}
    wanted_groups = sorted({g for groups in joined.values() for g in groups})
    group_id = dict(session.execute(select(Group.name, Group.id).where(Group.name.in_(wanted_groups))).all())
    links = [
        {"group_id": group_id[g], "user_id": user_id[name], "source": source, "created_at": now}
        for name, groups in joined.items()
        for g in groups
    ]
    if links:
        session.execute(insert(Membership), links)
    mark_dirty_many(session, "user", user_id)
    mark_dirty_many(session, "group", user_id)  # their private groups are new
    mark_dirty_many(session, "members", wanted_groups)
    lines = {s.username: [parse_ssh_public_key(k).line for k in s.ssh_public_keys] for s in specs}
    entries = [
        (
            row["username"],
            None,
            {
                **{k: row[k] for k in _AUDITED},
                "ssh_public_keys": lines[row["username"]],
                "groups": joined[row["username"]],
                "version": 1,
            },
        )
        for row in rows
    ]
    record_many(session, actor, "create", "user", entries)
    joins: dict[str, list[str]] = {}
    for name, groups in joined.items():
        for g in groups:
            joins.setdefault(g, []).append(name)
    record_member_changes(session, actor, joins, {})
    return changes


def _check_key_sets(settings: Settings, specs: Sequence[UserCreate]) -> None:
    """The per-person key caps, as the users service holds every write to them (the callers checked
    already: the import plan reports, the Keycloak batch leaves such users to the per-user path)."""
    accounts = settings.accounts
    for spec in specs:
        problem = key_set_problem(spec.ssh_public_keys, accounts.max_ssh_keys, accounts.max_ssh_key_bytes)
        if problem is not None:
            raise InvalidInput(FieldError("ssh_public_keys", f"user {spec.username}: {problem}"))


# The columns of a new user's audit entry (as users.service.snapshot shows them).
_AUDITED = (
    "username",
    "uid_number",
    "primary_gid",
    "display_name",
    "given_name",
    "family_name",
    "email",
    "login_shell",
    "home_directory",
    "active",
    "external_id",
    "slurm_default_account",
    "source",
)


def _uids(session: Session, settings: Settings, specs: Sequence[UserCreate]) -> dict[str, int]:
    supplied = [(s.uid_number, "user", s.username) for s in specs if s.uid_number is not None]
    ids.claim_many(session, "uid", supplied, accepted=uid_ranges(settings.ids), field="uid_number")
    auto = [s.username for s in specs if s.uid_number is None]
    numbers = ids.allocate_many(
        session, "uid", settings.ids.uid_range, [("user", n) for n in auto], field="uid_number"
    )
    uid_of = {owner: number for number, _, owner in supplied}
    uid_of.update(zip(auto, numbers, strict=True))
    return uid_of


def _private_gids(
    session: Session, settings: Settings, specs: Sequence[UserCreate], uid_of: dict[str, int]
) -> dict[str, int]:
    """As create_user does: a supplied primary_gid, else gid = uid when that gid is free (with
    private_gid=same_as_uid), else the next free gid."""
    claims = [(s.primary_gid, "group", s.username) for s in specs if s.primary_gid is not None]
    rest = [s.username for s in specs if s.primary_gid is None]
    auto: list[str] = rest
    if settings.ids.private_gid == "same_as_uid":
        busy = ids.taken(session, "gid", (uid_of[n] for n in rest))
        claims += [(uid_of[n], "group", n) for n in rest if uid_of[n] not in busy]
        auto = [n for n in rest if uid_of[n] in busy]
    ids.claim_many(session, "gid", claims, accepted=private_gid_ranges(settings.ids), field="primary_gid")
    numbers = ids.allocate_many(
        session, "gid", settings.ids.gid_range, [("group", n) for n in auto], field="primary_gid"
    )
    gid_of = {owner: number for number, _, owner in claims}
    gid_of.update(zip(auto, numbers, strict=True))
    return gid_of
