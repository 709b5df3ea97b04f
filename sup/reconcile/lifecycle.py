"""The time-based part of the user lifecycle.

    active --(source sets active=false)--> suspended: locked in LDAP (nologin, no keys, no groups),
        no Slurm associations, no login pod; home volume kept. Reactivation restores all of it with
        the same uid and gid, because nothing was deleted.
    suspended --(lifecycle.delete_after_days)--> deleted: removed from the store (ids kept as
        tombstones, never reused), then from every target by the next pass.
    deleted --(kube pvc retention)--> home volume removed by the Kubernetes target.

This module does the middle step; the scheduled full pass calls it first.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.config import Settings
from sup.store.audit import Actor
from sup.store.models import User
from sup.users.service import delete_user

log = logging.getLogger(__name__)
LIFECYCLE_ACTOR = Actor(name="reconciler:lifecycle", role="admin")


def expire_suspended(session: Session, settings: Settings, now: datetime) -> list[str]:
    """Delete users suspended for longer than the grace period (at most a batch per pass)."""
    days = settings.lifecycle.delete_after_days
    if days is None:
        return []
    cutoff = now - timedelta(days=days)
    names = list(
        session.scalars(
            select(User.username)
            .where(User.active.is_(False), User.suspended_at.is_not(None), User.suspended_at <= cutoff)
            .order_by(User.suspended_at, User.username)
            .limit(settings.lifecycle.max_deletions_per_pass)
        )
    )
    for name in names:
        delete_user(session, LIFECYCLE_ACTOR, name)
        log.info("deleted user %s: suspended for more than %s days", name, days)
    return names
