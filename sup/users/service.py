"""Creating, changing and deleting users: every rule that is not about the shape of a field.

Each function runs inside the caller's transaction and, in that same transaction, records the audit
entry and marks what it touched dirty (the outbox), so a committed change is never lost to the targets.
The admin API calls them directly; the sources (Keycloak, SCIM, import) go through the create-or-update
in upsert.py and the batched create in bulk.py, which call these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session, selectinload

from sup.common.concurrency import check_version
from sup.config import Settings
from sup.domain.gids import private_gid_ranges, uid_ranges
from sup.domain.posix import InvalidName, check_groupname, check_username
from sup.domain.sshkeys import key_set_problem, parse_ssh_public_key
from sup.domain.usernames import derive_username
from sup.errors import Conflict, FieldError, InvalidInput, NotFound
from sup.groups.membership import set_user_groups
from sup.groups.privilege import check_fill
from sup.ssh_ca.service import name_still_certified, names_on_live_certificates
from sup.store import ids
from sup.store.audit import Actor, record
from sup.store.bulk_audit import record_member_changes
from sup.store.lookup import (
    account_by_name,
    contains,
    group_by_name,
    groups_by_names,
    require_user,
    user_by_name,
)
from sup.store.models import Group, Membership, SlurmAccount, SshKey, User, utcnow
from sup.store.outbox import mark_dirty
from sup.store.paging import fetch_page
from sup.users.homes import check_home
from sup.users.schemas import UserCreate, UserOut, UserPatch


def to_out(user: User) -> UserOut:
    return UserOut(
        username=user.username,
        uid_number=user.uid_number,
        primary_gid=user.primary_gid,
        display_name=user.display_name,
        given_name=user.given_name,
        family_name=user.family_name,
        email=user.email,
        login_shell=user.login_shell,
        home_directory=user.home_directory,
        ssh_public_keys=[key.line for key in user.ssh_keys],
        active=user.active,
        suspended_at=user.suspended_at,
        groups=sorted(m.group.name for m in user.memberships),
        external_id=user.external_id,
        slurm_default_account=user.slurm_default_account,
        source=user.source,
        version=user.version,
        created_at=user.created_at,
        updated_at=user.updated_at,
    )


def snapshot(user: User) -> dict[str, Any]:
    """The user as the audit log keeps it (the API representation, JSON-ready)."""
    return to_out(user).model_dump(mode="json")


# --- rules that need the settings ---------------------------------------------------------------


def check_username_policy(settings: Settings, username: str, field: str = "username") -> None:
    try:
        check_username(username, settings.reserved_names())
        if settings.ids.private_groups:
            check_groupname(username, settings.reserved_names())
    except InvalidName as exc:
        raise InvalidInput(FieldError(field, str(exc))) from exc


def _check_shell(settings: Settings, shell: str, field: str = "login_shell") -> None:
    if shell not in settings.accounts.allowed_shells:
        allowed = ", ".join(settings.accounts.allowed_shells)
        raise InvalidInput(FieldError(field, f"{shell} is not an allowed shell ({allowed})"))


def _check_default_account(session: Session, name: str | None) -> None:
    if name is not None and account_by_name(session, name) is None:
        raise InvalidInput(
            FieldError("slurm_default_account", f"there is no SUP-managed Slurm account {name!r}")
        )


def default_home(settings: Settings, username: str) -> str:
    return settings.accounts.home_template.replace("{username}", username)


def _set_ssh_keys(
    session: Session,
    settings: Settings,
    user: User,
    lines: list[str],
    origin: str,
    *,
    only_origin: bool = False,
) -> None:
    """Make `lines` the user's keys (by fingerprint), keeping the rows of keys that stay.

    With `only_origin`, `lines` replace only the keys of that origin (a source's own keys: the IdP's,
    or the person's self-managed ones); keys of other origins stay, and a line that is already one of
    them is left where it is."""
    kept = {k.fingerprint: k for k in user.ssh_keys if only_origin and k.origin != origin}
    if kept:
        lines = [line for line in lines if parse_ssh_public_key(line).fingerprint not in kept]
    parsed = [parse_ssh_public_key(line) for line in lines]  # already validated by the schema
    _check_key_set(settings, [k.line for k in kept.values()] + [k.line for k in parsed])
    seen: dict[str, int] = {}
    for index, key in enumerate(parsed):
        if key.fingerprint in seen:
            raise InvalidInput(
                FieldError(
                    f"ssh_public_keys.{index}",
                    f"the same key is listed twice (first at {seen[key.fingerprint]})",
                )
            )
        seen[key.fingerprint] = index
    if parsed:
        owners = session.execute(
            select(SshKey.fingerprint, User.username)
            .join(User, SshKey.user_id == User.id)
            .where(SshKey.fingerprint.in_(list(seen)), SshKey.user_id != user.id)
        ).all()
        if owners:
            fingerprint, _owner = owners[0]
            raise Conflict(  # names nobody: self-service (sup/me) answers with it too
                f"ssh_public_keys.{seen[fingerprint]}: key {fingerprint} is already another account's; "
                "a key identifies one person",
                field=f"ssh_public_keys.{seen[fingerprint]}",
            )
    current = {stored.fingerprint: stored for stored in user.ssh_keys if stored.fingerprint not in kept}
    for fingerprint, stored in current.items():
        if fingerprint not in seen:
            user.ssh_keys.remove(stored)
    for key in parsed:
        existing = current.get(key.fingerprint)
        if existing is None:
            user.ssh_keys.append(
                SshKey(
                    key_type=key.key_type,
                    key_data=key.blob,
                    comment=key.comment,
                    fingerprint=key.fingerprint,
                    origin=origin,
                )
            )
        elif existing.comment != key.comment:
            existing.comment = key.comment


def _check_key_set(settings: Settings, lines: list[str]) -> None:
    """The person's keys after the change, against the per-person caps (count and bytes)."""
    accounts = settings.accounts
    problem = key_set_problem(lines, accounts.max_ssh_keys, accounts.max_ssh_key_bytes)
    if problem is not None:
        raise InvalidInput(FieldError("ssh_public_keys", f"{problem}; nothing was changed"))


def _check_username_free(
    session: Session, settings: Settings, username: str, field: str = "username"
) -> None:
    if user_by_name(session, username) is not None:
        raise Conflict(f"a user named {username!r} already exists", field=field)
    if settings.ids.private_groups and group_by_name(session, username) is not None:
        raise Conflict(
            f"a group named {username!r} already exists; the user's private group needs that name",
            field=field,
        )
    check_no_live_certificates(session, [username], field)


def check_no_live_certificates(session: Session, usernames: list[str], field: str = "username") -> None:
    """Conflict when one of `usernames` is still on an SSH certificate SUP signed for its previous
    holder (removed or renamed): whoever took the name would be logged in as by that certificate
    until it expires (sup/ssh_ca/service.py, names_on_live_certificates)."""
    live = names_on_live_certificates(session, usernames, utcnow())
    if live:
        raise Conflict(name_still_certified(*min(live.items())), field=field)


# --- create --------------------------------------------------------------------------------------


def create_user(
    session: Session,
    settings: Settings,
    actor: Actor,
    spec: UserCreate,
    source: str = "api",
    *,
    key_origin: str = "admin",
    columns: Mapping[str, Any] | None = None,
) -> User:
    """Create a user. `key_origin` records where the SSH keys came from (`admin`, or `idp` for SCIM);
    `columns` are values a source keeps on the user besides the spec (SCIM's userName and attributes)."""
    check_username_policy(settings, spec.username)
    _check_username_free(session, settings, spec.username)
    shell = spec.login_shell or settings.accounts.default_shell
    _check_shell(settings, shell)
    groups = groups_by_names(session, spec.groups, "groups")
    check_fill(session, settings, source, [g.name for g in groups])
    _check_default_account(session, spec.slurm_default_account)
    home = spec.home_directory or default_home(settings, spec.username)
    check_home(session, settings, home)

    if spec.uid_number is not None:
        uid = ids.claim(
            session,
            "uid",
            spec.uid_number,
            owner_kind="user",
            owner_name=spec.username,
            accepted=uid_ranges(settings.ids),
            field="uid_number",
        )
    else:
        uid = ids.allocate(
            session,
            "uid",
            settings.ids.uid_range,
            owner_kind="user",
            owner_name=spec.username,
            field="uid_number",
        )

    private_gid: int | None = None
    if settings.ids.private_groups:
        private_gid = _private_gid(session, settings, spec.username, uid, spec.primary_gid)
        primary_gid = private_gid
    elif spec.primary_gid is not None:
        primary_gid = _existing_primary_gid(session, settings, spec.primary_gid)
    else:
        primary_gid = settings.ids.default_primary_gid

    user = User(
        username=spec.username,
        display_name=spec.display_name,
        given_name=spec.given_name,
        family_name=spec.family_name,
        email=spec.email,
        uid_number=uid,
        primary_gid=primary_gid,
        login_shell=shell,
        home_directory=home,
        active=spec.active,
        suspended_at=None if spec.active else utcnow(),
        external_id=spec.external_id,
        slurm_default_account=spec.slurm_default_account,
        source=source,
        **dict(columns or {}),
    )
    session.add(user)
    session.flush()
    _set_ssh_keys(session, settings, user, spec.ssh_public_keys, origin=key_origin)
    if private_gid is not None:
        session.add(Group(name=spec.username, gid_number=private_gid, private_user_id=user.id, source=source))
        mark_dirty(session, "group", spec.username)
    set_user_groups(session, user, groups, source)
    mark_dirty(session, "user", user.username)
    session.flush()
    after = snapshot(user)
    record(session, actor, "create", "user", user.username, after=after)
    _record_group_side(session, actor, user.username, [], after["groups"])
    return user


def _private_gid(session: Session, settings: Settings, username: str, uid: int, supplied: int | None) -> int:
    if supplied is not None:
        return ids.claim(
            session,
            "gid",
            supplied,
            owner_kind="group",
            owner_name=username,
            accepted=private_gid_ranges(settings.ids),
            field="primary_gid",
        )
    if settings.ids.private_gid == "same_as_uid" and ids.is_free(session, "gid", uid):
        return ids.claim(
            session,
            "gid",
            uid,
            owner_kind="group",
            owner_name=username,
            accepted=private_gid_ranges(settings.ids),
            field="primary_gid",
        )
    return ids.allocate(
        session, "gid", settings.ids.gid_range, owner_kind="group", owner_name=username, field="primary_gid"
    )


def _existing_primary_gid(session: Session, settings: Settings, gid: int) -> int:
    if gid == settings.ids.default_primary_gid:
        return gid
    if session.scalars(select(Group.id).where(Group.gid_number == gid)).first() is None:
        raise InvalidInput(
            FieldError("primary_gid", f"no group has gid {gid} (and it is not ids.default_primary_gid)")
        )
    return gid


# --- read ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UserFilter:
    active: bool | None = None
    group: str | None = None
    source: str | None = None
    q: str | None = None  # substring of username, email or display name


def _loaded() -> tuple[Any, ...]:
    return (selectinload(User.ssh_keys), selectinload(User.memberships).selectinload(Membership.group))


def get_user(session: Session, username: str) -> User:
    return require_user(session, username)


def _conditions(flt: UserFilter) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if flt.active is not None:
        conditions.append(User.active == flt.active)
    if flt.source is not None:
        conditions.append(User.source == flt.source)
    if flt.group is not None:
        members = select(Membership.user_id).join(Group, Group.id == Membership.group_id)
        conditions.append(User.id.in_(members.where(Group.name == flt.group)))
    if flt.q:
        columns = (User.username, User.email, User.display_name)
        conditions.append(or_(*(contains(column, flt.q) for column in columns)))
    return conditions


def list_users(session: Session, flt: UserFilter, limit: int, offset: int) -> tuple[list[User], int]:
    return fetch_page(session, User, _conditions(flt), User.username, limit, offset, options=_loaded())


# --- update --------------------------------------------------------------------------------------


def update_user(
    session: Session,
    settings: Settings,
    actor: Actor,
    username: str,
    patch: UserPatch,
    expected_version: int | None = None,
    *,
    key_origin: str = "admin",
    keys_of_origin_only: bool = False,
    writer: str = "api",
) -> User:
    """Apply `patch`. With `keys_of_origin_only`, `ssh_public_keys` replaces only the keys of
    `key_origin` (a source's own keys) and leaves the others. `writer` is the source making the
    change (joining a privileged group is only for the sources allowed to: sup/groups/privilege.py)."""
    user = require_user(session, username)
    check_version(user.version, expected_version, f"user {username!r}")
    before = snapshot(user)
    changes = patch.provided()
    touched_groups: set[str] = set()

    new_name = changes.pop("username", None)
    if new_name is not None and new_name != user.username:
        touched_groups |= _rename(session, settings, user, new_name)
    # Before the ids: the homes lock is then taken before the id counters' locks, as in create_user,
    # so a change and a create never wait for each other's lock in opposite orders.
    home = changes.get("home_directory", user.home_directory)
    if home != before["home_directory"]:  # changed, or moved by a rename
        check_home(session, settings, home, user)
    if "uid_number" in changes:
        _change_uid(session, settings, user, changes.pop("uid_number"))
    if "primary_gid" in changes:
        _change_primary_gid(session, settings, user, changes.pop("primary_gid"))
    if "login_shell" in changes:
        _check_shell(settings, changes["login_shell"])
    if "slurm_default_account" in changes:
        _check_default_account(session, changes["slurm_default_account"])
    if "ssh_public_keys" in changes:
        _set_ssh_keys(
            session,
            settings,
            user,
            changes.pop("ssh_public_keys"),
            origin=key_origin,
            only_origin=keys_of_origin_only,
        )
    if "groups" in changes:
        groups = groups_by_names(session, changes.pop("groups"), "groups")
        current = {m.group_id for m in user.memberships}
        check_fill(session, settings, writer, [g.name for g in groups if g.id not in current])
        set_user_groups(session, user, groups, user.source)
    if "active" in changes and changes["active"] != user.active:
        # The lifecycle's grace period (lifecycle.delete_after_days) runs from the suspension.
        user.suspended_at = None if changes["active"] else utcnow()
    for field, value in changes.items():
        setattr(user, field, value)

    after = snapshot(user)
    if after == before:
        return user  # nothing changed: no version bump, no audit entry, no dirty mark
    _bump(user)
    mark_dirty(session, "user", user.username)
    for group in touched_groups:
        mark_dirty(session, "group", group)
    session.flush()
    after = snapshot(user)
    record(session, actor, "update", "user", user.username, before=before, after=after)
    _record_group_side(session, actor, user.username, before["groups"], after["groups"])
    return user


def _record_group_side(
    session: Session, actor: Actor, username: str, before: list[str], after: list[str]
) -> None:
    """A change of a user's groups is a change of those groups' member lists: each group it touched
    gets its own entry naming the member (sup/store/bulk_audit.py), as a change made on the group
    would. A rename is not one: the person stays in the same groups."""
    joined = {g: [username] for g in set(after) - set(before)}
    left = {g: [username] for g in set(before) - set(after)}
    record_member_changes(session, actor, joined, left)


def remove_ssh_key(
    session: Session,
    settings: Settings,
    actor: Actor,
    username: str,
    fingerprint: str,
    expected_version: int | None = None,
) -> User:
    """Take one key (by fingerprint) from the user, whatever its origin; the others keep theirs. An
    ordinary update: audited, versioned and marked for the targets. A key from a source (idp) comes
    back with that source's next pull unless it is removed there too."""
    user = require_user(session, username)
    key = next((k for k in user.ssh_keys if k.fingerprint == fingerprint), None)
    if key is None:
        raise NotFound("ssh key", fingerprint)
    same_origin = [k.line for k in user.ssh_keys if k.origin == key.origin and k.fingerprint != fingerprint]
    patch = UserPatch(ssh_public_keys=same_origin)
    return update_user(
        session,
        settings,
        actor,
        username,
        patch,
        expected_version,
        key_origin=key.origin,
        keys_of_origin_only=True,
    )


def _bump(user: User) -> None:
    """Force an UPDATE (and so a version increment) even if only related rows changed."""
    user.updated_at = utcnow()


def _rename(session: Session, settings: Settings, user: User, new_name: str) -> set[str]:
    check_username_policy(settings, new_name)
    _check_username_free(session, settings, new_name)
    old_name = user.username
    mark_dirty(session, "user", old_name)  # the targets must remove the old name too
    ids.rename_owner(session, "uid", user.uid_number, new_name)
    touched = {m.group.name for m in user.memberships}
    if user.private_group is not None:
        group = user.private_group
        mark_dirty(session, "group", group.name)
        ids.rename_owner(session, "gid", group.gid_number, new_name)
        group.name = new_name
        touched.add(new_name)
    if user.home_directory == default_home(settings, old_name):
        user.home_directory = default_home(settings, new_name)
    user.username = new_name
    return touched


def _change_uid(session: Session, settings: Settings, user: User, uid: int) -> None:
    if uid == user.uid_number:
        return
    ids.claim(
        session,
        "uid",
        uid,
        owner_kind="user",
        owner_name=user.username,
        accepted=uid_ranges(settings.ids),
        field="uid_number",
    )
    ids.release(session, "uid", user.uid_number)
    user.uid_number = uid


def _change_primary_gid(session: Session, settings: Settings, user: User, gid: int) -> None:
    if gid == user.primary_gid:
        return
    if user.private_group is not None:
        raise InvalidInput(
            FieldError(
                "primary_gid",
                f"{user.username} has a private group: change its gid_number "
                f"with PATCH /groups/{user.username}",
            )
        )
    user.primary_gid = _existing_primary_gid(session, settings, gid)


# --- delete --------------------------------------------------------------------------------------


def delete_user(session: Session, actor: Actor, username: str, expected_version: int | None = None) -> None:
    """Remove the user from the store. Their uid (and private gid) are released, never reused."""
    user = require_user(session, username)
    check_version(user.version, expected_version, f"user {username!r}")
    before = snapshot(user)
    if user.private_group is not None:
        private_id = user.private_group.id
        bound = session.scalars(
            select(SlurmAccount.name).where(
                or_(SlurmAccount.group_id == private_id, SlurmAccount.coordinators_group_id == private_id)
            )
        ).first()
        if bound is not None:
            raise Conflict(
                f"{username}'s private group is bound to Slurm account {bound!r}; unbind or delete it first"
            )
    ids.release(session, "uid", user.uid_number)
    if user.private_group is not None:
        ids.release(session, "gid", user.private_group.gid_number)
        mark_dirty(session, "group", user.private_group.name)
    for membership in user.memberships:
        mark_dirty(session, "members", membership.group.name)
    mark_dirty(session, "user", username)
    session.delete(user)
    session.flush()
    record(session, actor, "delete", "user", username, before=before)
    _record_group_side(session, actor, username, before["groups"], [])


# --- identities from an IdP -----------------------------------------------------------------------


def claim_derived_username(
    session: Session,
    settings: Settings,
    login: str,
    *,
    source: str,
    external_id: str | None,
    field: str = "login",
) -> str:
    """The username for an IdP login, refusing to hand one person's name to another.

    If a user already holds the derived name but came from a different source or has a different
    external id, that is a collision (two people, one name): it is reported, never merged.
    """
    try:
        username = derive_username(login, settings.naming)
    except InvalidName as exc:
        raise InvalidInput(FieldError(field, str(exc))) from exc
    holder = user_by_name(session, username)
    if holder is not None and (holder.source, holder.external_id) != (source, external_id):
        raise Conflict(
            f"login {login!r} maps to username {username!r}, which already belongs to another identity "
            f"(source {holder.source!r}); set a username explicitly or change naming rules",
            field=field,
        )
    return username
