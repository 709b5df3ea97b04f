"""Finding users, groups and accounts by name, one at a time or in bulk."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from sup.errors import FieldError, InvalidInput, NotFound
from sup.store.models import Group, SlurmAccount, User


def contains(column: Any, text: str) -> ColumnElement[bool]:
    """Case-insensitive substring match where `%`, `_` and `\\` in `text` are literal characters."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return func.lower(column).like(f"%{escaped}%", escape="\\")


def user_by_name(session: Session, username: str) -> User | None:
    return session.scalars(select(User).where(User.username == username)).one_or_none()


def group_by_name(session: Session, name: str) -> Group | None:
    return session.scalars(select(Group).where(Group.name == name)).one_or_none()


def account_by_name(session: Session, name: str) -> SlurmAccount | None:
    return session.scalars(select(SlurmAccount).where(SlurmAccount.name == name)).one_or_none()


def require_user(session: Session, username: str) -> User:
    user = user_by_name(session, username)
    if user is None:
        raise NotFound("user", username)
    return user


def require_group(session: Session, name: str) -> Group:
    group = group_by_name(session, name)
    if group is None:
        raise NotFound("group", name)
    return group


def require_account(session: Session, name: str) -> SlurmAccount:
    account = account_by_name(session, name)
    if account is None:
        raise NotFound("Slurm account", name)
    return account


def _repeats(names: list[str], field: str) -> list[FieldError]:
    seen: dict[str, int] = {}
    errors = []
    for index, name in enumerate(names):
        if name in seen:
            errors.append(FieldError(f"{field}.{index}", f"{name!r} is listed twice (first at {seen[name]})"))
        seen.setdefault(name, index)
    return errors


def users_by_names(session: Session, names: Iterable[str], field: str) -> list[User]:
    """The users named, in order; every unknown or repeated name is reported against `field.N`."""
    wanted = list(names)
    found = {u.username: u for u in session.scalars(select(User).where(User.username.in_(wanted)))}
    errors = [
        FieldError(f"{field}.{i}", f"there is no user {name!r}")
        for i, name in enumerate(wanted)
        if name not in found
    ]
    errors += _repeats(wanted, field)
    if errors:
        raise InvalidInput(errors)
    return [found[name] for name in wanted]


def groups_by_names(session: Session, names: Iterable[str], field: str) -> list[Group]:
    """The groups named, in order; unknown, repeated or user-private groups are reported."""
    wanted = list(names)
    found = {g.name: g for g in session.scalars(select(Group).where(Group.name.in_(wanted)))}
    errors = _repeats(wanted, field)
    for index, name in enumerate(wanted):
        group = found.get(name)
        if group is None:
            errors.append(FieldError(f"{field}.{index}", f"there is no group {name!r}"))
        elif group.private_user_id is not None:
            errors.append(
                FieldError(f"{field}.{index}", f"{name!r} is a user's private group; nobody can join it")
            )
    if errors:
        raise InvalidInput(errors)
    return [found[name] for name in wanted]
