"""Per user and per target provisioning status, written after each reconcile pass.

Only rows whose state changes are written, so a pass without drift writes nothing here either.
The read side (what the API, the CLI and self-service show) is sup/users/status.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session

from sup.domain.desired import DesiredState, DesiredUser
from sup.domain.status import SyncState
from sup.store.models import TargetStatus, utcnow
from sup.targets.base import Failure

MAX_ERROR_TEXT = 2000


def record_statuses(
    session: Session,
    target: str,
    desired: DesiredState,
    failures: Sequence[Failure],
    target_error: str | None,
    *,
    only: frozenset[str] | None = None,
) -> None:
    """Mark every desired user in_sync, or error with the message of their first failure (or the
    target's error when the whole target failed). An in_sync row also remembers whether the user is
    now active on the target (the mass-change guard's baseline); an error keeps what was there.
    Rows of users no longer desired are dropped once their removal went through.

    `only`: the pass looked at these users alone (a scoped pass): the others' rows stay as they are,
    and are not read (at most planner.MAX_SCOPED_USERS names: one IN list).

    Every pass calls this for every user, so it reads plain rows and writes only the rows that change,
    in bulk statements (ORM objects for 10,000 unchanged rows cost most of a no-change pass)."""
    errors: dict[str, str] = {}
    for failure in failures:
        if failure.change.subject is not None:
            errors.setdefault(failure.change.subject, failure.error)
    query = select(
        TargetStatus.username,
        TargetStatus.state,
        TargetStatus.active,
        TargetStatus.last_error,
        TargetStatus.attempts,
    ).where(TargetStatus.target == target)
    if only is not None:
        query = query.where(TargetStatus.username.in_(sorted(only)))
    rows: dict[str, tuple[str, bool, str | None, int]] = {
        username: (state, active, last_error, attempts)
        for username, state, active, last_error, attempts in session.execute(query)
    }
    now = utcnow()
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    looked_at = desired.users.items() if only is None else _among(desired, only)
    for username, user in looked_at:
        message = _clip(target_error or errors.get(username))
        state = SyncState.ERROR if message else SyncState.IN_SYNC
        row = rows.pop(username, None)
        if row is None:
            active = user.active if state == SyncState.IN_SYNC else False
            attempts = 1 if message else 0
            inserts.append(_row(username, target, state, active, message, attempts, now))
            continue
        old_state, old_active, old_error, old_attempts = row
        active = user.active if state == SyncState.IN_SYNC else old_active
        if (old_state, old_error, old_active) == (state, message, active):
            continue
        attempts = old_attempts + 1 if message else 0
        updates.append(_row(username, target, state, active, message, attempts, now))
    gone: list[str] = []
    for username, (old_state, old_active, old_error, old_attempts) in rows.items():
        message = _clip(target_error or errors.get(username))
        if message is None:
            gone.append(username)  # removed from the target: nothing left to report
        elif old_state != SyncState.ERROR or old_error != message:
            # Still on the target (its removal failed, or the whole target did): keep the row, and
            # its `active`, which the mass-change guard counts, until the removal goes through.
            updates.append(
                _row(username, target, SyncState.ERROR, old_active, message, old_attempts + 1, now)
            )
    if inserts:
        session.execute(insert(TargetStatus), inserts)
    if updates:
        session.execute(update(TargetStatus), updates)  # by primary key (username, target)
    for start in range(0, len(gone), 500):
        session.execute(
            delete(TargetStatus).where(
                TargetStatus.target == target, TargetStatus.username.in_(gone[start : start + 500])
            )
        )


def _among(desired: DesiredState, only: frozenset[str]) -> list[tuple[str, DesiredUser]]:
    return [(name, desired.users[name]) for name in sorted(only) if name in desired.users]


def _clip(message: str | None) -> str | None:
    return message[:MAX_ERROR_TEXT] if message else None


def _row(
    username: str, target: str, state: str, active: bool, error: str | None, attempts: int, now: datetime
) -> dict[str, Any]:
    return {
        "username": username,
        "target": target,
        "state": state,
        "active": active,
        "last_error": error,
        "attempts": attempts,
        "updated_at": now,
    }
