"""Audit entries for many objects at once (bulk imports): one multi-row insert, not a row at a time."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from sup.store.audit import Actor, member_change
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


def record_member_changes(
    session: Session,
    actor: Actor,
    added: Mapping[str, Collection[str]],
    removed: Mapping[str, Collection[str]],
) -> None:
    """The group side of membership changes made from elsewhere (a user's `groups`, a user deleted):
    an `add_member` entry per group of `added` (group -> usernames that joined) and a `remove_member`
    entry per group of `removed`, each naming them as `member_change` does."""
    joined = [(g, None, member_change((), m)) for g, m in sorted(added.items()) if m]
    left = [(g, None, member_change(m, ())) for g, m in sorted(removed.items()) if m]
    record_many(session, actor, "add_member", "group", joined)
    record_many(session, actor, "remove_member", "group", left)
