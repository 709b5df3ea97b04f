"""Load the whole store as plain data in a handful of bulk queries (for the desired state).

Column queries rather than ORM objects: every pass loads every user, and building ORM instances for
10,000 users, their private groups and memberships cost over a second; plain rows cost a fraction.
"""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.domain.desired import StoredAccount, StoredGroup, StoredUser, StoreSnapshot
from sup.store.models import Group, Membership, SlurmAccount, SshKey, User


def load_snapshot(session: Session) -> StoreSnapshot:
    usernames: dict[int, str] = dict(session.execute(select(User.id, User.username)).all())
    group_names: dict[int, str] = dict(session.execute(select(Group.id, Group.name)).all())

    keys: dict[int, list[str]] = defaultdict(list)
    for user_id, key_type, key_data, comment in session.execute(
        select(SshKey.user_id, SshKey.key_type, SshKey.key_data, SshKey.comment).order_by(SshKey.id)
    ):
        keys[user_id].append(f"{key_type} {key_data} {comment}".rstrip())  # as SshKey.line

    groups_of: dict[int, set[str]] = defaultdict(set)
    members_of: dict[int, set[str]] = defaultdict(set)
    for group_id, user_id in session.execute(select(Membership.group_id, Membership.user_id)):
        groups_of[user_id].add(group_names[group_id])
        members_of[group_id].add(usernames[user_id])

    user_rows = session.execute(
        select(
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
    )
    users = tuple(
        StoredUser(
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
        for (
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
        ) in user_rows
    )
    groups = tuple(
        StoredGroup(
            name=name,
            gid_number=gid_number,
            description=description,
            members=frozenset(members_of.get(group_id, ())),
            private_for=usernames[private_user_id] if private_user_id is not None else None,
        )
        for group_id, name, gid_number, description, private_user_id in session.execute(
            select(Group.id, Group.name, Group.gid_number, Group.description, Group.private_user_id)
        )
    )
    accounts = tuple(
        StoredAccount(
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
            coordinators=group_names[a.coordinators_group_id]
            if a.coordinators_group_id is not None
            else None,
        )
        for a in session.scalars(select(SlurmAccount))
    )
    return StoreSnapshot(users=users, groups=groups, accounts=accounts)
