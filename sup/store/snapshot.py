"""Load the whole store as plain data in a handful of bulk queries (for the desired state)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from sup.domain.desired import StoredAccount, StoredGroup, StoredUser, StoreSnapshot
from sup.store.models import Group, Membership, SlurmAccount, User


def load_snapshot(session: Session) -> StoreSnapshot:
    users = session.scalars(
        select(User).options(
            selectinload(User.ssh_keys), selectinload(User.memberships).selectinload(Membership.group)
        )
    ).all()
    groups = session.scalars(
        select(Group).options(
            selectinload(Group.memberships).selectinload(Membership.user), selectinload(Group.private_user)
        )
    ).all()
    accounts = session.scalars(
        select(SlurmAccount).options(
            selectinload(SlurmAccount.group), selectinload(SlurmAccount.coordinators_group)
        )
    ).all()
    return StoreSnapshot(
        users=tuple(
            StoredUser(
                username=u.username,
                uid_number=u.uid_number,
                primary_gid=u.primary_gid,
                display_name=u.display_name,
                given_name=u.given_name,
                family_name=u.family_name,
                email=u.email,
                login_shell=u.login_shell,
                home_directory=u.home_directory,
                ssh_public_keys=tuple(k.line for k in u.ssh_keys),
                active=u.active,
                groups=frozenset(m.group.name for m in u.memberships),
                default_account=u.slurm_default_account,
            )
            for u in users
        ),
        groups=tuple(
            StoredGroup(
                name=g.name,
                gid_number=g.gid_number,
                description=g.description,
                members=frozenset(m.user.username for m in g.memberships),
                private_for=g.private_user.username if g.private_user is not None else None,
            )
            for g in groups
        ),
        accounts=tuple(
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
                group=a.group.name if a.group is not None else None,
                coordinators=a.coordinators_group.name if a.coordinators_group is not None else None,
            )
            for a in accounts
        ),
    )
