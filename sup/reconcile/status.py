"""Per user and per target provisioning status, written after each reconcile pass.

Only rows whose state changes are written, so a pass without drift writes nothing here either.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.config import TARGETS, Settings
from sup.domain.desired import DesiredState
from sup.store.models import OutboxMark, TargetStatus, utcnow
from sup.targets.base import Failure

IN_SYNC = "in_sync"
ERROR = "error"
MAX_ERROR_TEXT = 2000


def record_statuses(
    session: Session,
    target: str,
    desired: DesiredState,
    failures: Sequence[Failure],
    target_error: str | None,
) -> None:
    """Mark every desired user in_sync, or error with the message of their first failure (or the
    target's error when the whole target failed). An in_sync row also remembers whether the user is
    now active on the target (the mass-change guard's baseline); an error keeps what was there.
    Rows of users no longer desired are dropped once their removal went through."""
    errors: dict[str, str] = {}
    for failure in failures:
        if failure.change.subject is not None:
            errors.setdefault(failure.change.subject, failure.error)
    rows = {
        row.username: row
        for row in session.scalars(select(TargetStatus).where(TargetStatus.target == target))
    }
    for username, user in desired.users.items():
        message = target_error or errors.get(username)
        state = ERROR if message else IN_SYNC
        row = rows.pop(username, None)
        if row is None:
            row = TargetStatus(username=username, target=target, state=state, attempts=0, active=False)
            session.add(row)
        active = user.active if state == IN_SYNC else row.active
        if row.state == state and row.last_error == message and row.active == active:
            continue
        row.state = state
        row.active = active
        row.last_error = message[:MAX_ERROR_TEXT] if message else None
        row.attempts = row.attempts + 1 if message else 0
        row.updated_at = utcnow()
    for username, row in rows.items():
        message = target_error or errors.get(username)
        if message is None:
            session.delete(row)  # removed from the target: nothing left to report
        elif row.state != ERROR or row.last_error != message[:MAX_ERROR_TEXT]:
            # Still on the target (its removal failed, or the whole target did): keep the row, and
            # its `active`, which the mass-change guard counts, until the removal goes through.
            row.state, row.last_error = ERROR, message[:MAX_ERROR_TEXT]
            row.attempts += 1
            row.updated_at = utcnow()


class TargetState(BaseModel):
    target: str
    state: str = Field(description="disabled | pending | in_sync | error")
    last_error: str | None = None
    attempts: int = Field(0, description="passes in a row that failed for this user")
    updated_at: datetime | None = Field(None, description="when the state last changed")


class UserStatus(BaseModel):
    username: str
    targets: list[TargetState]


def status_of(session: Session, settings: Settings, username: str) -> UserStatus:
    """Per target: disabled; pending (a change newer than the target's last verdict waits in the
    outbox, or no pass has reached the user yet; the last error, if any, is kept); in_sync; or error."""
    rows = {
        row.target: row
        for row in session.scalars(select(TargetStatus).where(TargetStatus.username == username))
    }
    mark = session.get(OutboxMark, ("user", username))
    states = []
    for target in TARGETS:
        row = rows.get(target)
        if not settings.target_enabled(target):
            states.append(TargetState(target=target, state="disabled"))
        elif row is None:
            states.append(TargetState(target=target, state="pending"))
        else:
            state = "pending" if mark is not None and mark.marked_at > row.updated_at else row.state
            states.append(
                TargetState(
                    target=target,
                    state=state,
                    last_error=row.last_error,
                    attempts=row.attempts,
                    updated_at=row.updated_at,
                )
            )
    return UserStatus(username=username, targets=states)
