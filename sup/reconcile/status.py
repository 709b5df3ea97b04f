"""Per user and per target provisioning status, written after each reconcile pass.

Only rows whose state changes are written, so a pass without drift writes nothing here either.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.domain.desired import DesiredState
from sup.store.models import TargetStatus, utcnow
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
    target's error when the whole target failed). Rows of users no longer desired are dropped."""
    errors: dict[str, str] = {}
    for failure in failures:
        if failure.change.subject is not None:
            errors.setdefault(failure.change.subject, failure.error)
    rows = {
        row.username: row
        for row in session.scalars(select(TargetStatus).where(TargetStatus.target == target))
    }
    for username in desired.users:
        message = target_error or errors.get(username)
        state = ERROR if message else IN_SYNC
        row = rows.pop(username, None)
        if row is None:
            row = TargetStatus(username=username, target=target, state=state, attempts=0)
            session.add(row)
        elif row.state == state and row.last_error == message:
            continue
        row.state = state
        row.last_error = message[:MAX_ERROR_TEXT] if message else None
        row.attempts = row.attempts + 1 if message else 0
        row.updated_at = utcnow()
    for username, row in rows.items():
        if username not in errors:
            session.delete(row)
