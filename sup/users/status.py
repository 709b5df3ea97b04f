"""A user's provisioning status per target, as the API, the CLI and self-service show it.

The reconciler writes the rows after each pass (sup/reconcile/status.py); this reads them, and adds
what a row cannot say: a target that is disabled, and a change that waits in the outbox (pending).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.config import Settings
from sup.domain.status import SyncState
from sup.store.models import OutboxMark, TargetStatus
from sup.targets.registry import TARGET_NAMES


class TargetState(BaseModel):
    target: str
    state: SyncState
    last_error: str | None = None
    attempts: int = Field(0, description="passes in a row that failed for this user")
    updated_at: datetime | None = Field(None, description="when the state last changed")


class UserStatus(BaseModel):
    username: str
    targets: list[TargetState]


def status_of(
    session: Session, settings: Settings, username: str, *, targets: Sequence[str] = TARGET_NAMES
) -> UserStatus:
    """Per target (the registered ones by default): disabled; pending (a change newer than the
    target's last verdict waits in the outbox, or no pass has reached the user yet; the last error,
    if any, is kept); in_sync; or error."""
    return statuses_of(session, settings, [username], targets=targets)[0]


def statuses_of(
    session: Session, settings: Settings, usernames: Sequence[str], *, targets: Sequence[str] = TARGET_NAMES
) -> list[UserStatus]:
    """`status_of` for several users, in their order, with two queries in all (the admin page asks
    for a page of users at once, never one request per user)."""
    names = list(dict.fromkeys(usernames))
    rows: dict[str, dict[str, TargetStatus]] = {name: {} for name in names}
    marks: dict[str, OutboxMark] = {}
    if names:
        for row in session.scalars(select(TargetStatus).where(TargetStatus.username.in_(names))):
            rows[row.username][row.target] = row
        marks_query = select(OutboxMark).where(OutboxMark.kind == "user", OutboxMark.name.in_(names))
        marks = {mark.name: mark for mark in session.scalars(marks_query)}
    return [_status(settings, name, rows[name], marks.get(name), targets) for name in usernames]


def _status(
    settings: Settings,
    username: str,
    rows: dict[str, TargetStatus],
    mark: OutboxMark | None,
    targets: Sequence[str],
) -> UserStatus:
    states = []
    for target in targets:
        row = rows.get(target)
        if not settings.target_enabled(target):
            states.append(TargetState(target=target, state=SyncState.DISABLED))
        elif row is None:
            states.append(TargetState(target=target, state=SyncState.PENDING))
        else:
            state = (
                SyncState.PENDING
                if mark is not None and mark.marked_at > row.updated_at
                else SyncState(row.state)
            )
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
