"""Home directories against the rule (sup/domain/homes.py) and the store: one user per home.

Checked whenever a home is written: a create (the default home too), a change, a rename that moves
a default home, and the batched create of an import. A home that breaks the rule is an InvalidInput
(422 / SCIM 400 invalidValue) on `home_directory`; one that another user has is a Conflict (409 /
SCIM 409 uniqueness) that does not say who has it.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.homes import InvalidHome, home_root
from sup.domain.homes import check_home as check_home_rule
from sup.errors import Conflict, FieldError, InvalidInput
from sup.store.models import User

FIELD = "home_directory"
_CHUNK = 500


def _taken(home: str) -> Conflict:
    return Conflict(f"home directory {home!r} is already used by another user", field=FIELD)


def _check_rule(settings: Settings, home: str, field: str = FIELD) -> None:
    try:
        check_home_rule(home, home_root(settings.accounts.home_template))
    except InvalidHome as exc:
        raise InvalidInput(FieldError(field, f"{home[:80]!r} {exc}")) from exc


def check_home(session: Session, settings: Settings, home: str, holder: User | None = None) -> None:
    """`home` is a safe path below the home root that no user but `holder` has."""
    _check_rule(settings, home)
    query = select(User.id).where(User.home_directory == home)
    if holder is not None and holder.id is not None:
        query = query.where(User.id != holder.id)
    if session.scalars(query.limit(1)).first() is not None:
        raise _taken(home)


def check_new_homes(session: Session, settings: Settings, homes: Mapping[str, str]) -> None:
    """The homes of new users (username -> home), as `check_home` checks one: the rule, each other
    and the store."""
    seen: dict[str, str] = {}
    for username, home in homes.items():
        _check_rule(settings, home, f"{FIELD} ({username})")
        if home in seen:
            raise _taken(home)
        seen[home] = username
    wanted = sorted(seen)
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        taken = session.scalars(select(User.home_directory).where(User.home_directory.in_(chunk))).first()
        if taken is not None:
            raise _taken(taken)
