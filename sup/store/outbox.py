"""The outbox: "dirty" marks written in the same transaction as the change they announce.

A source that commits a change commits its mark too, so a 2xx answer means the reconciler will see it
even if every target is down right now. Marks coalesce per object (one row per kind and name).
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from sup.store.models import OutboxMark, utcnow
from sup.store.session import is_postgresql

MarkKind = Literal["user", "group", "slurm_account"]


def mark_dirty(session: Session, kind: MarkKind, name: str) -> None:
    """Insert a mark, or bump the generation of an existing one (a single upsert statement)."""
    insert = postgresql.insert if is_postgresql(session) else sqlite.insert
    now = utcnow()
    statement = insert(OutboxMark).values(kind=kind, name=name, generation=1, marked_at=now)
    statement = statement.on_conflict_do_update(
        index_elements=[OutboxMark.kind, OutboxMark.name],
        set_={"generation": OutboxMark.generation + 1, "marked_at": now},
    )
    session.execute(statement)


def pending(session: Session) -> list[tuple[str, str, int]]:
    """Every mark as (kind, name, generation), oldest first."""
    rows = session.execute(
        select(OutboxMark.kind, OutboxMark.name, OutboxMark.generation).order_by(OutboxMark.marked_at)
    )
    return [(kind, name, generation) for kind, name, generation in rows]
