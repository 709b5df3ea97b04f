"""Load the store as plain data in a handful of bulk queries (for the desired state): all of it, or
the users and groups of given names (a pass scoped to a few people, sup/reconcile/desired_cache.py).

Column queries rather than ORM objects: every pass loads every user, and building ORM instances for
10,000 users, their private groups and memberships cost over a second; plain rows cost a fraction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.domain.desired import StoredAccount, StoredGroup, StoredUser, StoreSnapshot
from sup.store.models import Group, Membership, SlurmAccount, SshKey, User

CHUNK = 500  # names per IN (...) query: well under any database's limit on bound parameters

USER_COLUMNS = (
    User.id,
    User.username,
    User.uid_number,
    User.primary_gid,
    User.display_name,
    User.given_name,
    User.family_name,
    User.email,
    User.login_shell,
    User.home_directory,
    User.active,
    User.slurm_default_account,
    User.suspended_at,
)
GROUP_COLUMNS = (Group.id, Group.name, Group.gid_number, Group.description, Group.private_user_id)
KEY_COLUMNS = (SshKey.user_id, SshKey.key_type, SshKey.key_data, SshKey.comment)


def load_snapshot(session: Session) -> StoreSnapshot:
    usernames: dict[int, str] = dict(session.execute(select(User.id, User.username)).all())
    group_names: dict[int, str] = dict(session.execute(select(Group.id, Group.name)).all())
    keys = _keys(session.execute(select(*KEY_COLUMNS).order_by(SshKey.id)))
    groups_of: dict[int, set[str]] = defaultdict(set)
    members_of: dict[int, set[str]] = defaultdict(set)
    for group_id, user_id in session.execute(select(Membership.group_id, Membership.user_id)):
        groups_of[user_id].add(group_names[group_id])
        members_of[group_id].add(usernames[user_id])
    users = tuple(_user(row, keys, groups_of) for row in session.execute(select(*USER_COLUMNS)))
    groups = tuple(_group(row, members_of, usernames) for row in session.execute(select(*GROUP_COLUMNS)))
    accounts = tuple(_account(a, group_names) for a in session.scalars(select(SlurmAccount)))
    return StoreSnapshot(users=users, groups=groups, accounts=accounts)


def load_users(session: Session, names: Collection[str]) -> list[StoredUser]:
    """The users of these names that exist, each with their keys and groups."""
    found: list[StoredUser] = []
    for chunk in _chunks(names):
        ids = select(User.id).where(User.username.in_(chunk)).scalar_subquery()
        keys = _keys(session.execute(select(*KEY_COLUMNS).where(SshKey.user_id.in_(ids)).order_by(SshKey.id)))
        groups_of: dict[int, set[str]] = defaultdict(set)
        joined = select(Membership.user_id, Group.name).join(Group, Group.id == Membership.group_id)
        for user_id, group_name in session.execute(joined.where(Membership.user_id.in_(ids))):
            groups_of[user_id].add(group_name)
        rows = session.execute(select(*USER_COLUMNS).where(User.username.in_(chunk)))
        found.extend(_user(row, keys, groups_of) for row in rows)
    return found


def load_groups(session: Session, names: Collection[str]) -> list[StoredGroup]:
    """The groups of these names that exist, each with all its members' names."""
    found: list[StoredGroup] = []
    for chunk in _chunks(names):
        ids = select(Group.id).where(Group.name.in_(chunk)).scalar_subquery()
        members_of: dict[int, set[str]] = defaultdict(set)
        joined = select(Membership.group_id, User.username).join(User, User.id == Membership.user_id)
        for group_id, username in session.execute(joined.where(Membership.group_id.in_(ids))):
            members_of[group_id].add(username)
        owners_query = select(User.id, User.username).join(Group, Group.private_user_id == User.id)
        owners = dict(session.execute(owners_query.where(Group.name.in_(chunk))).all())
        rows = session.execute(select(*GROUP_COLUMNS).where(Group.name.in_(chunk)))
        found.extend(_group(row, members_of, owners) for row in rows)
    return found


def load_private_groups(session: Session, owners: Collection[str]) -> list[StoredGroup]:
    """The private groups of the users of these names (a private group has no members)."""
    found: list[StoredGroup] = []
    for chunk in _chunks(owners):
        query = select(*GROUP_COLUMNS, User.username).join(User, Group.private_user_id == User.id)
        for group_id, name, gid, description, owner_id, owner in session.execute(
            query.where(User.username.in_(chunk))
        ):
            owner_of: dict[int, str] = {owner_id: owner} if owner_id is not None else {}
            found.append(_group((group_id, name, gid, description, owner_id), {}, owner_of))
    return found


def load_accounts(session: Session) -> tuple[StoredAccount, ...]:
    """Every Slurm account (a site has a few hundred at most), without reading every group."""
    accounts = list(session.scalars(select(SlurmAccount)))
    wanted = sorted({i for a in accounts for i in (a.group_id, a.coordinators_group_id) if i is not None})
    group_names: dict[int, str] = {}
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start : start + CHUNK]
        group_names.update(session.execute(select(Group.id, Group.name).where(Group.id.in_(chunk))).all())
    return tuple(_account(a, group_names) for a in accounts)


def _chunks(names: Collection[str]) -> list[list[str]]:
    ordered = sorted(names)
    return [ordered[i : i + CHUNK] for i in range(0, len(ordered), CHUNK)]


def _keys(rows: Iterable[Sequence[Any]]) -> dict[int, list[str]]:
    keys: dict[int, list[str]] = defaultdict(list)
    for user_id, key_type, key_data, comment in rows:
        keys[user_id].append(f"{key_type} {key_data} {comment}".rstrip())  # as SshKey.line
    return keys


def _user(row: Sequence[Any], keys: dict[int, list[str]], groups_of: dict[int, set[str]]) -> StoredUser:
    (
        user_id,
        username,
        uid_number,
        primary_gid,
        display_name,
        given_name,
        family_name,
        email,
        login_shell,
        home_directory,
        active,
        default_account,
        suspended_at,
    ) = row
    return StoredUser(
        username=username,
        uid_number=uid_number,
        primary_gid=primary_gid,
        display_name=display_name,
        given_name=given_name,
        family_name=family_name,
        email=email,
        login_shell=login_shell,
        home_directory=home_directory,
        ssh_public_keys=tuple(keys.get(user_id, ())),
        active=active,
        groups=frozenset(groups_of.get(user_id, ())),
        default_account=default_account,
        suspended_at=suspended_at,
    )


def _group(row: Sequence[Any], members_of: dict[int, set[str]], usernames: dict[int, str]) -> StoredGroup:
    group_id, name, gid_number, description, private_user_id = row
    return StoredGroup(
        name=name,
        gid_number=gid_number,
        description=description,
        members=frozenset(members_of.get(group_id, ())),
        private_for=usernames[private_user_id] if private_user_id is not None else None,
    )


def _account(a: SlurmAccount, group_names: dict[int, str]) -> StoredAccount:
    return StoredAccount(
        name=a.name,
        parent=a.parent,
        description=a.description,
        organization=a.organization,
        fairshare=a.fairshare,
        qos=tuple(a.qos),
        default_qos=a.default_qos,
        partitions=tuple(a.partitions),
        limits=dict(a.limits),
        group=group_names[a.group_id] if a.group_id is not None else None,
        coordinators=group_names[a.coordinators_group_id] if a.coordinators_group_id is not None else None,
    )
