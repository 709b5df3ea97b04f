"""The audit log: every write records who did it, what changed, and the object before and after.

Callers pass the object's public representation (what the API shows), which never holds secrets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from sup.store.models import AuditEntry


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
