"""Membership changes as deltas, from either side (a user's groups or a group's members).

Every change marks both the user and the group dirty: the LDAP target rewrites the group's member
list, the Slurm target the user's associations. The group's mark is of kind `members` (its member
list changed, nothing else about it): a target that renders a group's name and gid into each
member's objects, but not who else is in it (the Kubernetes login files), can then stay scoped to
the users who joined or left instead of re-reading every member.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from sup.store.models import Group, Membership, User
from sup.store.outbox import mark_dirty, mark_dirty_many


def _link(session: Session, group: Group, user: User, source: str) -> None:
    session.add(Membership(group_id=group.id, user_id=user.id, source=source))
    mark_dirty(session, "members", group.name)
    mark_dirty(session, "user", user.username)


def _unlink(session: Session, membership: Membership) -> None:
    mark_dirty(session, "members", membership.group.name)
    mark_dirty(session, "user", membership.user.username)
    session.delete(membership)


def _replace(
    session: Session, current: dict[int, Membership], wanted: dict[int, tuple[Group, User]], source: str
) -> bool:
    """Delete the memberships not wanted, add the wanted ones missing. Returns whether anything changed.

    The outbox marks go in as one upsert per kind (a member list of hundreds is not hundreds of
    statements); each object touched is marked once, as `_link`/`_unlink` would."""
    groups: set[str] = set()
    users: set[str] = set()
    for key, membership in current.items():
        if key not in wanted:
            groups.add(membership.group.name)
            users.add(membership.user.username)
            session.delete(membership)
    for key, (group, user) in wanted.items():
        if key not in current:
            session.add(Membership(group_id=group.id, user_id=user.id, source=source))
            groups.add(group.name)
            users.add(user.username)
    mark_dirty_many(session, "members", groups)
    mark_dirty_many(session, "user", users)
    session.flush()
    return set(wanted) != set(current)


def set_user_groups(session: Session, user: User, groups: list[Group], source: str) -> bool:
    """Make `groups` exactly the user's ordinary groups."""
    current = {m.group_id: m for m in user.memberships}
    changed = _replace(session, current, {g.id: (g, user) for g in groups}, source)
    session.expire(user, ["memberships"])
    return changed


def set_group_members(session: Session, group: Group, users: list[User], source: str) -> bool:
    """Make `users` exactly the group's members."""
    current = {m.user_id: m for m in group.memberships}
    changed = _replace(session, current, {u.id: (group, u) for u in users}, source)
    session.expire(group, ["memberships"])
    return changed


def add_member(session: Session, group: Group, user: User, source: str) -> bool:
    """Idempotent: adding a member twice is not an error. Returns whether anything changed."""
    if session.get(Membership, (group.id, user.id)) is not None:
        return False
    _link(session, group, user, source)
    session.flush()
    session.expire(group, ["memberships"])
    return True


def remove_member(session: Session, group: Group, user: User) -> bool:
    membership = session.get(Membership, (group.id, user.id))
    if membership is None:
        return False
    _unlink(session, membership)
    session.flush()
    session.expire(group, ["memberships"])
    return True
