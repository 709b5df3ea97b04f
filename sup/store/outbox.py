"""The outbox: "dirty" marks written in the same transaction as the change they announce.

A source that commits a change commits its mark too, so a 2xx answer means the reconciler will see it
even if every target is down right now. Marks coalesce per object (one row per kind and name).

A reconciler in the same process need not wait for its next look at the outbox: `on_commit` calls
it back as soon as a transaction that wrote marks commits (issue 27: the poll and the debounce
rounding to it were some 0.75 s of a push-to-login's 2.8 s). Other processes (replicas, `--workers`)
still see the marks when they poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, cast

from sqlalchemy import Table, bindparam, delete, event, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from sup.store.models import OutboxMark, utcnow
from sup.store.session import is_postgresql

# "members": only a group's member list changed; the users who joined or left are marked too, so a
# target whose objects list a group's attributes but not its other members can stay scoped.
MarkKind = Literal["user", "group", "members", "slurm_account"]
MARKED = "sup.outbox.marked"  # session.info: this transaction wrote marks

log = logging.getLogger(__name__)
_listeners: list[Callable[[], None]] = []
_listeners_lock = threading.Lock()


def on_commit(callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback` (quickly: it runs in the committing thread) after every commit of this
    process that wrote marks; returns the function that stops it."""
    with _listeners_lock:
        _listeners.append(callback)

    def stop() -> None:
        with _listeners_lock:
            if callback in _listeners:
                _listeners.remove(callback)

    return stop


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    if not session.info.pop(MARKED, False):
        return
    with _listeners_lock:
        callbacks = list(_listeners)
    for callback in callbacks:
        try:
            callback()
        except Exception:  # a listener never fails the commit that already happened
            log.exception("outbox listener failed")


@event.listens_for(Session, "after_rollback")
def _rolled_back(session: Session) -> None:
    session.info.pop(MARKED, None)


def mark_dirty(session: Session, kind: MarkKind, name: str) -> None:
    """Insert a mark, or bump the generation of an existing one (a single upsert statement)."""
    insert = postgresql.insert if is_postgresql(session) else sqlite.insert
    now = utcnow()
    session.info[MARKED] = True
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
    mark_dirty_each(session, [(kind, name) for name in names])


def mark_dirty_each(session: Session, marks: Iterable[tuple[MarkKind, str]]) -> None:
    """`mark_dirty` for each (kind, name), of any kinds: one executemany (one round trip)."""
    rows = [{"kind": kind, "name": name} for kind, name in sorted(set(marks))]
    if not rows:
        return
    insert = postgresql.insert if is_postgresql(session) else sqlite.insert
    now = utcnow()
    session.info[MARKED] = True
    statement = insert(OutboxMark).values(
        kind=bindparam("kind"), name=bindparam("name"), generation=1, marked_at=now
    )
    statement = statement.on_conflict_do_update(
        index_elements=[OutboxMark.kind, OutboxMark.name],
        set_={"generation": OutboxMark.generation + 1, "marked_at": now},
    )
    session.connection().execute(statement, rows)
