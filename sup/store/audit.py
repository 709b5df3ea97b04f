"""The audit log: every write records who did it, what changed, and the object before and after.

Callers pass the object's public representation (what the API shows), which never holds secrets.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.store.models import AuditEntry

NAMES_PER_QUERY = 500  # well under every database's limit on bound parameters


@dataclass(frozen=True)
class Actor:
    """Who is acting: a token's name and role, or `cli:<os user>` for local administration."""

    name: str
    role: str
    request_id: str | None = None


def record(
    session: Session,
    actor: Actor,
    action: str,
    resource_type: str,
    resource_name: str,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> None:
    session.add(
        AuditEntry(
            actor=actor.name,
            action=action,
            resource_type=resource_type,
            resource_name=resource_name,
            before=before,
            after=after,
            request_id=actor.request_id,
        )
    )


def entries_since(
    session: Session, action: str, since: datetime, users: Collection[str] | None = None
) -> Sequence[AuditEntry]:
    """The entries of `action` recorded at or after `since`, oldest first: the index on `at` bounds
    the scan to the window, whatever the log's length. With `users`, only those about these users
    (read through the index on the resource, a few hundred names a query)."""
    query = select(AuditEntry).where(AuditEntry.at >= since, AuditEntry.action == action)
    if users is None:
        return session.scalars(query.order_by(AuditEntry.id)).all()
    names = sorted(set(users))
    found: list[AuditEntry] = []
    for start in range(0, len(names), NAMES_PER_QUERY):
        about = AuditEntry.resource_name.in_(names[start : start + NAMES_PER_QUERY])
        found.extend(session.scalars(query.where(AuditEntry.resource_type == "user", about)))
    return sorted(found, key=lambda entry: entry.id)


def member_change(before: Iterable[str], after: Iterable[str]) -> dict[str, list[str]]:
    """What every audit entry that changes a group's member list carries in its `after`, whichever
    path wrote it (API, SCIM, Keycloak, import, a user's own groups): the usernames that joined and
    the ones that left, each sorted. A reader (a SIEM) need not diff member lists itself."""
    old, new = set(before), set(after)
    return {"members_added": sorted(new - old), "members_removed": sorted(old - new)}


def with_member_change(
    after: dict[str, Any] | None, before_members: Iterable[str], after_members: Iterable[str]
) -> dict[str, Any] | None:
    """`after` with the member change added when the member list changed (else `after` as it is)."""
    change = member_change(before_members, after_members)
    if not change["members_added"] and not change["members_removed"]:
        return after
    return {**(after or {}), **change}
