"""Named exclusive locks shared by every SUP process that uses the same store.

PostgreSQL: a session-level advisory lock held on a dedicated connection, so replicas on different
hosts exclude each other and a replica that dies releases its locks with its connection.
SQLite (one host by nature): an flock on a file beside the database, released by the kernel if the
process dies. In-memory SQLite: a process-local lock.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from sup.common.locks import LockTimeout, file_lock

__all__ = ["LockTimeout", "exclusive", "file_lock", "lock_key", "transaction_lock"]

_local_locks: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()


def lock_key(name: str) -> int:
    """A stable signed 64-bit key for pg_advisory_lock, derived from the lock's name."""
    return int.from_bytes(hashlib.sha256(f"sup:{name}".encode()).digest()[:8], "big", signed=True)


@contextmanager
def exclusive(engine: Engine, name: str, timeout: float = 0.0, poll: float = 0.2) -> Iterator[None]:
    """Hold lock `name` for the block; wait up to `timeout` seconds, then raise LockTimeout."""
    deadline = time.monotonic() + timeout
    if engine.dialect.name == "postgresql":
        key = lock_key(name)
        with engine.connect() as connection:
            while not connection.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"lock {name!r} is held by another SUP process")
                time.sleep(poll)
            connection.commit()
            try:
                yield
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                connection.commit()
        return
    database = engine.url.database
    if not database or database == ":memory:":
        with _local_guard:
            lock = _local_locks.setdefault(name, threading.Lock())
        if not lock.acquire(timeout=max(timeout, 0.001)):
            raise LockTimeout(f"lock {name!r} is held by another thread")
        try:
            yield
        finally:
            lock.release()
        return
    with file_lock(Path(f"{database}.{name}.lock"), timeout, poll, f"lock {name!r}"):
        yield


def transaction_lock(session: Session, name: str) -> None:
    """Hold lock `name` until `session`'s transaction ends (commit or rollback); wait for it.

    PostgreSQL: a transaction-level advisory lock, so concurrent writers that check-then-write a
    rule spanning rows (no two homes nested) do it one after another, each seeing what the one before
    committed. SQLite needs nothing: every transaction there begins IMMEDIATE, one writer at a time.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_key(name)})
