"""Audit entries for many objects at once (bulk imports): one multi-row insert, not a row at a time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from sup.store.audit import Actor
from sup.store.models import AuditEntry, utcnow

Entry = tuple[str, dict[str, Any] | None, dict[str, Any] | None]  # name, before, after


def record_many(
    session: Session, actor: Actor, action: str, resource_type: str, entries: Sequence[Entry]
) -> None:
    """`record` for many objects of one kind and action."""
    if not entries:
        return
    now = utcnow()
    session.execute(
        insert(AuditEntry),
        [
            {
                "actor": actor.name,
                "action": action,
                "resource_type": resource_type,
                "resource_name": name,
                "before": before,
                "after": after,
                "request_id": actor.request_id,
                "at": now,
            }
            for name, before, after in entries
        ],
    )
