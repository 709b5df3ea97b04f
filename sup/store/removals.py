"""What each applied reconcile pass took away per target, for the reconcile budgets
(sup/domain/guards.py `budget_refusal`): the per-pass limits cannot see removals that trickle in a
few at a time, a sum over a window can.

One row per applied pass that locked, removed or deleted anything on a target. A forced pass is
recorded too (`forced`): it is the operator vouching for what was spent until then, so only the
passes after it count. Rows older than the window are dropped when a new one is written.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from sup.domain.guards import Spent
from sup.store.models import TargetRemoval, utcnow


def spent(session: Session, target: str, window_seconds: int, now: datetime | None = None) -> Spent:
    """What `target` spent in the last `window_seconds` by passes not forced, after the last forced one."""
    if window_seconds <= 0:
        return Spent()
    since = (now or utcnow()) - timedelta(seconds=window_seconds)
    in_window = (TargetRemoval.target == target, TargetRemoval.at >= since)
    last_forced = session.scalar(
        select(func.max(TargetRemoval.id)).where(*in_window, TargetRemoval.forced.is_(True))
    )
    suspensions, deletions = session.execute(
        select(
            func.coalesce(func.sum(TargetRemoval.suspensions), 0),
            func.coalesce(func.sum(TargetRemoval.deletions), 0),
        ).where(*in_window, TargetRemoval.id > (last_forced or 0))
    ).one()
    return Spent(int(suspensions), int(deletions))


def record(
    session: Session,
    target: str,
    *,
    suspensions: int,
    deletions: int,
    forced: bool,
    window_seconds: int,
    now: datetime | None = None,
) -> None:
    """Remember what a pass took away on `target` (nothing to remember: no row), and forget what has
    left the window."""
    now = now or utcnow()
    session.execute(
        delete(TargetRemoval).where(
            TargetRemoval.target == target, TargetRemoval.at < now - timedelta(seconds=window_seconds)
        )
    )
    if suspensions or deletions or forced:
        session.add(
            TargetRemoval(target=target, at=now, suspensions=suspensions, deletions=deletions, forced=forced)
        )
