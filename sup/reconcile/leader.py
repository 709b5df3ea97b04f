"""Leader election: exactly one replica runs the reconciler; a replica that dies hands over.

PostgreSQL: a session-level advisory lock held on a dedicated connection for as long as this process
leads. If the process dies, or its connection does, PostgreSQL releases the lock and a standby
replica takes it at its next try. The leader checks its connection before each pass and steps down
when it is gone (another replica may lead by then).
SQLite: an flock beside the database file (one host by nature); in-memory SQLite: always the leader.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from pathlib import Path

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from sup.store.locks import LockTimeout, file_lock, lock_key

log = logging.getLogger(__name__)

# A bigint advisory key is stored as classid (high 32 bits) and objid (low 32 bits), objsubid 1.
HELD_ADVISORY_LOCKS = (
    "SELECT classid, objid FROM pg_locks "
    "WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND pid = pg_backend_pid()"
)


class Lease:
    def __init__(self, engine: Engine, name: str = "reconciler") -> None:
        self.engine = engine
        self.name = name
        self._connection: Connection | None = None
        self._held = ExitStack()
        self.leading = False

    def try_acquire(self) -> bool:
        if self.leading:
            return True
        try:
            self.leading = self._acquire()
        except (SQLAlchemyError, OSError) as exc:
            log.warning("cannot try for the reconciler lease: %s", type(exc).__name__)
            self._drop_connection()
            self.leading = False
        return self.leading

    def _acquire(self) -> bool:
        if self.engine.dialect.name == "postgresql":
            connection = self.engine.connect()
            got = bool(
                connection.execute(
                    text("SELECT pg_try_advisory_lock(:k)"), {"k": lock_key(self.name)}
                ).scalar()
            )
            connection.commit()
            if not got:
                connection.close()
                return False
            self._connection = connection
            return True
        database = self.engine.url.database
        if not database or database == ":memory:":
            return True
        try:
            self._held.enter_context(file_lock(Path(f"{database}.{self.name}.lock"), timeout=0))
        except LockTimeout:
            return False
        return True

    def alive(self) -> bool:
        """Still the leader? On PostgreSQL: does our session still hold the advisory lock? (Asked of
        pg_locks, not just "does the connection answer": a connection that silently reconnected is a
        new session that holds nothing.)"""
        if not self.leading:
            return False
        if self._connection is not None:
            try:
                rows = self._connection.execute(text(HELD_ADVISORY_LOCKS)).all()
                self._connection.commit()
                held = (lock_key(self.name) & 0xFFFFFFFFFFFFFFFF) in {
                    (int(c) << 32) | int(o) for c, o in rows
                }
            except SQLAlchemyError:
                held = False
            if not held:
                log.warning("the reconciler lease is gone (database connection lost); stepping down")
                self._drop_connection()
                self.leading = False
        return self.leading

    def release(self) -> None:
        if self._connection is not None:
            try:
                self._connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_key(self.name)})
                self._connection.commit()
            except SQLAlchemyError:
                pass
            self._drop_connection()
        self._held.close()
        self.leading = False

    def _drop_connection(self) -> None:
        if self._connection is not None:
            try:
                self._connection.invalidate()
                self._connection.close()
            except SQLAlchemyError:
                pass
            self._connection = None
