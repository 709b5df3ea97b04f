"""The outbox: "dirty" marks written in the same transaction as the change they announce.

A source that commits a change commits its mark too, so a 2xx answer means the reconciler will see it
even if every target is down right now. Marks coalesce per object (one row per kind and name).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, cast

from sqlalchemy import Table, bindparam, delete, func, select
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


def depth(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(OutboxMark)) or 0


def clear(session: Session, marks: Sequence[tuple[str, str, int]]) -> None:
    """Delete the marks that were handled, unless something re-marked them meanwhile (a newer
    generation): that later change is not covered by the pass that just ran."""
    if marks:
        table = cast(Table, OutboxMark.__table__)
        session.connection().execute(
            delete(table).where(
                table.c.kind == bindparam("k"),
                table.c.name == bindparam("n"),
                table.c.generation == bindparam("g"),
            ),
            [{"k": kind, "n": name, "g": generation} for kind, name, generation in marks],
        )


def pending(session: Session) -> list[tuple[str, str, int]]:
    """Every mark as (kind, name, generation), oldest first."""
    rows = session.execute(
        select(OutboxMark.kind, OutboxMark.name, OutboxMark.generation).order_by(OutboxMark.marked_at)
    )
    return [(kind, name, generation) for kind, name, generation in rows]


def mark_dirty_many(session: Session, kind: MarkKind, names: Iterable[str]) -> None:
    """`mark_dirty` for many objects of one kind: the same upsert, sent as one executemany."""
    rows = [{"kind": kind, "name": name} for name in sorted(set(names))]
    if not rows:
        return
    insert = postgresql.insert if is_postgresql(session) else sqlite.insert
    now = utcnow()
    statement = insert(OutboxMark).values(
        kind=bindparam("kind"), name=bindparam("name"), generation=1, marked_at=now
    )
    statement = statement.on_conflict_do_update(
        index_elements=[OutboxMark.kind, OutboxMark.name],
        set_={"generation": OutboxMark.generation + 1, "marked_at": now},
    )
    session.connection().execute(statement, rows)
