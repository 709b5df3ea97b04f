"""Small helpers for API tests: counting rows to prove that a refused request wrote nothing."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from sup.store.models import (
    AuditEntry,
    Group,
    IdAllocation,
    Membership,
    OutboxMark,
    SlurmAccount,
    SshKey,
    User,
)

TABLES = (User, Group, Membership, SshKey, SlurmAccount, IdAllocation, AuditEntry, OutboxMark)


def row_counts(sessions: sessionmaker[Session]) -> dict[str, int]:
    with sessions() as session:
        return {
            model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
            for model in TABLES
        }


def fields(response_json: dict[str, object]) -> set[str]:
    """The field names a problem+json body blames."""
    errors = response_json.get("errors") or []
    assert isinstance(errors, list)
    return {str(e["field"]) for e in errors}
