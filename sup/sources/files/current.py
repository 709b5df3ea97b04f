"""What the store holds now, loaded in a few bulk column queries (as the reconciler's snapshot is):
an import of 10,000 users compares against this instead of asking the database per record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from sup.slurm_accounts.service import to_out as account_out
from sup.store.models import Group, Membership, SlurmAccount, SshKey, User


@dataclass
class CurrentUser:
    id: int
    source: str
    values: dict[str, Any]  # field -> value, in the shape of UserCreate
    groups: set[str] = field(default_factory=set)  # ordinary groups


@dataclass
class CurrentGroup:
    id: int
    source: str
    private: bool
    values: dict[str, Any]  # name, description, gid_number, external_id
    members: set[str] = field(default_factory=set)


@dataclass
class Current:
    users: dict[str, CurrentUser]
    groups: dict[str, CurrentGroup]
    accounts: dict[str, dict[str, Any]]  # name -> the account as SlurmAccountCreate fields
    key_owners: dict[str, str]  # ssh key fingerprint -> username


USER_COLUMNS = (
    "username",
    "email",
    "display_name",
    "given_name",
    "family_name",
    "uid_number",
    "primary_gid",
    "login_shell",
    "home_directory",
    "active",
    "external_id",
    "slurm_default_account",
)
GROUP_COLUMNS = ("name", "description", "gid_number", "external_id")
ACCOUNT_FIELDS = (
    "name",
    "group",
    "coordinators",
    "parent",
    "description",
    "organization",
    "fairshare",
    "qos",
    "default_qos",
    "partitions",
    "limits",
)


def load_current(session: Session) -> Current:
    users: dict[str, CurrentUser] = {}
    by_user_id: dict[int, CurrentUser] = {}
    rows = session.execute(select(User.id, User.source, *(getattr(User, c) for c in USER_COLUMNS)))
    for user_id, source, *values in rows:
        user = CurrentUser(user_id, source, dict(zip(USER_COLUMNS, values, strict=True)))
        user.values["ssh_public_keys"] = []
        users[user.values["username"]] = by_user_id[user_id] = user

    key_owners: dict[str, str] = {}
    for user_id, key_type, key_data, comment, fingerprint in session.execute(
        select(SshKey.user_id, SshKey.key_type, SshKey.key_data, SshKey.comment, SshKey.fingerprint).order_by(
            SshKey.id
        )
    ):
        owner = by_user_id[user_id]
        owner.values["ssh_public_keys"].append(f"{key_type} {key_data} {comment}".rstrip())
        key_owners[fingerprint] = owner.values["username"]

    groups: dict[str, CurrentGroup] = {}
    by_group_id: dict[int, CurrentGroup] = {}
    for group_id, source, private_user_id, *values in session.execute(
        select(Group.id, Group.source, Group.private_user_id, *(getattr(Group, c) for c in GROUP_COLUMNS))
    ):
        group = CurrentGroup(
            group_id, source, private_user_id is not None, dict(zip(GROUP_COLUMNS, values, strict=True))
        )
        groups[group.values["name"]] = by_group_id[group_id] = group

    for group_id, user_id in session.execute(select(Membership.group_id, Membership.user_id)):
        username = by_user_id[user_id].values["username"]
        group = by_group_id[group_id]
        group.members.add(username)
        by_user_id[user_id].groups.add(group.values["name"])

    accounts = {
        account.name: account_out(account).model_dump(include=set(ACCOUNT_FIELDS))
        for account in session.scalars(
            select(SlurmAccount).options(
                selectinload(SlurmAccount.group), selectinload(SlurmAccount.coordinators_group)
            )
        )
    }
    return Current(users=users, groups=groups, accounts=accounts, key_owners=key_owners)
