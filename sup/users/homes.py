"""Home directories against the rule (sup/domain/homes.py) and the store: one user per home, and no
home above or below another user's.

Checked whenever a home is written: a create (the default home too), a change, a rename that moves
a default home, and the batched create of an import. A home that breaks the path rule is an
InvalidInput (422 / SCIM 400 invalidValue) on `home_directory`; one that another user has, or that
lies inside or contains another user's home, is a Conflict (409 / SCIM 409 uniqueness) naming that
user (sup/domain/homes.py says why naming them tells the caller nothing it cannot read).

The store is asked only for the homes that can clash, through the index on `users.home_directory`
(unique since migration 0009): those equal to the new home or to a directory above it (an IN list as
long as the path is deep) and those below it (a range from `home/` up to `home0`, `0` being the
character after `/`; byte order, which the column's "C" collation gives on PostgreSQL and SQLite's
BINARY collation gives there). No query reads all users.

Check-then-write is made safe against concurrent writers by the `homes` transaction lock
(sup/store/locks.py): taken before the store is asked and held until the transaction ends, so of two
concurrent writes of the same or nested homes the second sees the first and is refused. The unique
index is the backstop for the equal case should a writer ever skip the lock (the API answers its
IntegrityError 409 on `home_directory` too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.homes import Clash, HomeIndex, InvalidHome, ancestors, below_prefix, clash, home_root
from sup.domain.homes import check_home as check_home_rule
from sup.errors import Conflict, FieldError, InvalidInput
from sup.store.locks import transaction_lock
from sup.store.models import User

FIELD = "home_directory"
LOCK = "homes"
_CHUNK = 200  # homes per query: each adds its ancestors to an IN list and one range


def conflict(found: Clash, field: str = FIELD) -> Conflict:
    return Conflict(f"home directory {found.message()}", field=field)


def _check_rule(settings: Settings, home: str, field: str = FIELD) -> None:
    try:
        check_home_rule(home, home_root(settings.accounts.home_template))
    except InvalidHome as exc:
        raise InvalidInput(FieldError(field, f"{home[:80]!r} {exc}")) from exc


def _after(prefix: str) -> str:
    """The least string greater than every string that starts with `prefix` (which ends in `/`)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _near(homes: Iterable[str]) -> ColumnElement[bool]:
    """Stored homes equal to one of `homes`, above one or below one."""
    exact: set[str] = set()
    ranges: list[ColumnElement[bool]] = []
    for home in homes:
        exact.add(home)
        exact.update(ancestors(home))
        prefix = below_prefix(home)
        ranges.append(and_(User.home_directory >= prefix, User.home_directory < _after(prefix)))
    return or_(User.home_directory.in_(sorted(exact)), *ranges)


def stored_holders(
    session: Session, homes: Iterable[str], exclude_id: int | None = None
) -> list[tuple[str, str]]:
    """(username, home) of the stored users whose home is one of `homes`, above or below one."""
    query = select(User.username, User.home_directory).where(_near(homes))
    if exclude_id is not None:
        query = query.where(User.id != exclude_id)
    # The caller's own pending change (a rename moving its home) must not be flushed into the unique
    # index before the check has spoken: the check compares against what is committed.
    with session.no_autoflush:
        return [(name, home) for name, home in session.execute(query)]


def check_home(session: Session, settings: Settings, home: str, holder: User | None = None) -> None:
    """`home` is a safe path below the home root that no user but `holder` has, lies in or holds."""
    _check_rule(settings, home)
    transaction_lock(session, LOCK)
    exclude = holder.id if holder is not None and holder.id is not None else None
    found = clash(home, stored_holders(session, [home], exclude))
    if found is not None:
        raise conflict(found)


def check_new_homes(session: Session, settings: Settings, homes: Mapping[str, str]) -> None:
    """The homes of new users (username -> home), as `check_home` checks one: the rule, each other
    and the store (a few queries of `_CHUNK` homes each)."""
    batch = HomeIndex()
    for username, home in homes.items():
        field = f"{FIELD} ({username})"
        _check_rule(settings, home, field)
        found = batch.clash(home)
        if found is not None:
            raise conflict(found, field)
        batch.add(username, home)
    transaction_lock(session, LOCK)
    wanted = sorted(homes.items(), key=lambda item: item[1])
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        stored = HomeIndex(stored_holders(session, [home for _, home in chunk]))
        for username, home in chunk:
            found = stored.clash(home)
            if found is not None:
                raise conflict(found, f"{FIELD} ({username})")
