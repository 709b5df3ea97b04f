"""Creating, changing and deleting groups and their members.

A user-private group (the user's own group, primary group by default) is created, renamed and deleted
with its user; through this module only its description and gid can change. The sources go through
the create-or-update in upsert.py and the batched writes in bulk.py, which call these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session, selectinload

from sup.common.concurrency import check_version
from sup.config import IdRange, Settings
from sup.domain.gids import private_gid_ranges
from sup.domain.posix import InvalidName, check_groupname
from sup.errors import Conflict, FieldError, InvalidInput, NotFound
from sup.groups.membership import add_member, remove_member, set_group_members
from sup.groups.privilege import check_create, check_fill
from sup.groups.schemas import GroupCreate, GroupOut, GroupPatch
from sup.store import ids
from sup.store.audit import Actor, member_change, record, with_member_change
from sup.store.lookup import (
    contains,
    group_by_name,
    require_group,
    require_user,
    user_by_name,
    users_by_names,
)
from sup.store.models import Group, Membership, SlurmAccount, User, utcnow
from sup.store.outbox import MarkKind, mark_dirty, mark_dirty_each
from sup.store.paging import fetch_page


def to_out(group: Group) -> GroupOut:
    return GroupOut(
        name=group.name,
        gid_number=group.gid_number,
        description=group.description,
        members=sorted(m.user.username for m in group.memberships),
        private=group.private_user_id is not None,
        external_id=group.external_id,
        source=group.source,
        version=group.version,
        created_at=group.created_at,
        updated_at=group.updated_at,
    )


def snapshot(group: Group) -> dict[str, Any]:
    return to_out(group).model_dump(mode="json")


def _gid_ranges(settings: Settings) -> list[IdRange]:
    return [settings.ids.gid_range, *settings.ids.supplied_gid_ranges]


def _check_name(session: Session, settings: Settings, name: str, field: str = "name") -> None:
    try:
        check_groupname(name, settings.reserved_names())
    except InvalidName as exc:
        raise InvalidInput(FieldError(field, str(exc))) from exc
    if group_by_name(session, name) is not None:
        raise Conflict(f"a group named {name!r} already exists", field=field)
    if settings.ids.private_groups and user_by_name(session, name) is not None:
        raise Conflict(f"{name!r} is a user's name, and so the name of their private group", field=field)


def _refuse_private(group: Group, what: str) -> None:
    if group.private_user_id is not None:
        raise Conflict(f"{group.name!r} is a user's private group: {what} follows the user")


# --- create --------------------------------------------------------------------------------------


def create_group(
    session: Session,
    settings: Settings,
    actor: Actor,
    spec: GroupCreate,
    source: str = "api",
    *,
    columns: Mapping[str, Any] | None = None,
) -> Group:
    """Create a group; `columns` are values a source keeps besides the spec (SCIM's displayName).
    A privileged group only if `source` may create one (sup/groups/privilege.py)."""
    _check_name(session, settings, spec.name)
    check_create(session, settings, source, spec.name)
    members = users_by_names(session, spec.members, "members")
    if spec.gid_number is not None:
        gid = ids.claim(
            session,
            "gid",
            spec.gid_number,
            owner_kind="group",
            owner_name=spec.name,
            accepted=_gid_ranges(settings),
            field="gid_number",
        )
    else:
        gid = ids.allocate(
            session,
            "gid",
            settings.ids.gid_range,
            owner_kind="group",
            owner_name=spec.name,
            field="gid_number",
        )
    group = Group(
        name=spec.name,
        gid_number=gid,
        description=spec.description,
        external_id=spec.external_id,
        source=source,
        **dict(columns or {}),
    )
    session.add(group)
    session.flush()
    set_group_members(session, group, members, source)
    mark_dirty(session, "group", group.name)
    after = snapshot(group)
    entry = with_member_change(after, (), after["members"])
    record(session, actor, "create", "group", group.name, after=entry)
    return group


# --- read ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupFilter:
    member: str | None = None
    private: bool | None = None
    source: str | None = None
    q: str | None = None  # substring of the name


def _conditions(flt: GroupFilter) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if flt.private is True:
        conditions.append(Group.private_user_id.is_not(None))
    elif flt.private is False:
        conditions.append(Group.private_user_id.is_(None))
    if flt.source is not None:
        conditions.append(Group.source == flt.source)
    if flt.member is not None:
        groups_of = select(Membership.group_id).join(User, User.id == Membership.user_id)
        conditions.append(Group.id.in_(groups_of.where(User.username == flt.member)))
    if flt.q:
        conditions.append(contains(Group.name, flt.q))
    return conditions


def list_groups(session: Session, flt: GroupFilter, limit: int, offset: int) -> tuple[list[Group], int]:
    loaded = (selectinload(Group.memberships).selectinload(Membership.user),)
    return fetch_page(session, Group, _conditions(flt), Group.name, limit, offset, options=loaded)


# --- update --------------------------------------------------------------------------------------


def update_group(
    session: Session,
    settings: Settings,
    actor: Actor,
    name: str,
    patch: GroupPatch,
    expected_version: int | None = None,
    *,
    writer: str = "api",
) -> Group:
    """Apply `patch`; `writer` is the source making the change (a privileged group's name and new
    members are only for the sources allowed to: sup/groups/privilege.py)."""
    group = require_group(session, name)
    check_version(group.version, expected_version, f"group {name!r}")
    before = snapshot(group)
    changes = patch.provided()

    new_name = changes.pop("name", None)
    if new_name is not None and new_name != group.name:
        _refuse_private(group, "its name")
        _check_name(session, settings, new_name)
        check_create(session, settings, writer, new_name)
        mark_dirty(session, "group", group.name)
        ids.rename_owner(session, "gid", group.gid_number, new_name)
        group.name = new_name
    if "gid_number" in changes:
        _change_gid(session, settings, group, changes.pop("gid_number"))
    if "members" in changes:
        _refuse_private(group, "membership")
        members = users_by_names(session, changes.pop("members"), "members")
        current = {m.user_id for m in group.memberships}
        if any(u.id not in current for u in members):
            check_fill(session, settings, writer, [group.name])
        set_group_members(session, group, members, group.source)
    if "external_id" in changes:
        _refuse_private(group, "its external id")
    for field, value in changes.items():
        setattr(group, field, value)

    after = snapshot(group)
    if after == before:
        return group
    group.updated_at = utcnow()
    if _attributes(after) != _attributes(before):  # a new member list alone is marked `members`
        mark_dirty(session, "group", group.name)
    session.flush()
    entry = with_member_change(snapshot(group), before["members"], after["members"])
    record(session, actor, "update", "group", group.name, before=before, after=entry)
    return group


def change_members(
    session: Session,
    settings: Settings,
    actor: Actor,
    group: Group,
    joining: list[User],
    leaving: list[User],
    *,
    writer: str,
) -> bool:
    """Add `joining` to `group` and take `leaving` out: what `update_group` does with the member list
    that differs by these (the same checks, outbox marks and audit entry), without looking the
    group and every member up again by name. `group` has its memberships and their users loaded;
    they stay loaded and true, so the caller can answer with the group as it now is.

    Returns whether anything changed (a member joining twice, or one not there leaving, is not)."""
    _refuse_private(group, "membership")
    current = {m.user_id: m for m in group.memberships}
    joining = list({u.id: u for u in joining if u.id not in current}.values())
    leaving = [u for u in {u.id: u for u in leaving}.values() if u.id in current]
    if not joining and not leaving:
        return False
    if joining:
        check_fill(session, settings, writer, [group.name])
    before = snapshot(group)
    for user in leaving:
        group.memberships.remove(current[user.id])  # an orphan: deleted with the flush
    for user in joining:
        group.memberships.append(Membership(user=user, source=group.source))
    marks: list[tuple[MarkKind, str]] = [("members", group.name)]
    mark_dirty_each(session, marks + [("user", u.username) for u in (*joining, *leaving)])
    group.updated_at = utcnow()
    session.flush()
    after = snapshot(group)
    entry = with_member_change(after, before["members"], after["members"])
    record(session, actor, "update", "group", group.name, before=before, after=entry)
    return True


def _attributes(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A group's snapshot without its member list (set_group_members marks that change itself)."""
    return {key: value for key, value in snapshot.items() if key != "members"}


def _change_gid(session: Session, settings: Settings, group: Group, gid: int) -> None:
    """Give the group a new gid; users whose primary group it is follow."""
    if gid == group.gid_number:
        return
    ranges = private_gid_ranges(settings.ids) if group.private_user_id is not None else _gid_ranges(settings)
    ids.claim(
        session, "gid", gid, owner_kind="group", owner_name=group.name, accepted=ranges, field="gid_number"
    )
    old = group.gid_number
    ids.release(session, "gid", old)
    group.gid_number = gid
    for user in session.scalars(select(User).where(User.primary_gid == old)):
        user.primary_gid = gid
        mark_dirty(session, "user", user.username)


# --- members -------------------------------------------------------------------------------------


def put_member(
    session: Session, settings: Settings, actor: Actor, name: str, username: str, *, writer: str = "api"
) -> bool:
    """Add a member (idempotent). Returns whether the user was newly added."""
    group = require_group(session, name)
    _refuse_private(group, "membership")
    user = require_user(session, username)
    if session.get(Membership, (group.id, user.id)) is None:
        check_fill(session, settings, writer, [group.name])
    if not add_member(session, group, user, group.source):
        return False
    group.updated_at = utcnow()
    session.flush()
    after = {"member": username, **member_change((), [username])}
    record(session, actor, "add_member", "group", group.name, after=after)
    return True


def delete_member(session: Session, actor: Actor, name: str, username: str) -> None:
    group = require_group(session, name)
    user = require_user(session, username)
    if not remove_member(session, group, user):
        raise NotFound("member", f"{username} of group {name}")
    group.updated_at = utcnow()
    session.flush()
    after = member_change([username], ())
    record(session, actor, "remove_member", "group", group.name, before={"member": username}, after=after)


# --- delete --------------------------------------------------------------------------------------


def delete_group(
    session: Session, settings: Settings, actor: Actor, name: str, expected_version: int | None = None
) -> None:
    group = require_group(session, name)
    check_version(group.version, expected_version, f"group {name!r}")
    _refuse_private(group, "deletion")
    bound = session.scalars(
        select(SlurmAccount.name).where(
            or_(SlurmAccount.group_id == group.id, SlurmAccount.coordinators_group_id == group.id)
        )
    ).first()
    if bound is not None:
        raise Conflict(
            f"group {name!r} is bound to Slurm account {bound!r}; unbind or delete the account first"
        )
    primary_of = session.scalars(select(User.username).where(User.primary_gid == group.gid_number)).first()
    if primary_of is not None:
        raise Conflict(f"group {name!r} is the primary group of user {primary_of!r}")
    before = snapshot(group)
    for membership in group.memberships:
        mark_dirty(session, "user", membership.user.username)
    ids.release(session, "gid", group.gid_number)
    mark_dirty(session, "group", name)
    session.delete(group)
    session.flush()
    # The members it had leave with it: named like any other change of a member list.
    left = with_member_change(None, before["members"], ())
    record(session, actor, "delete", "group", name, before=before, after=left)
