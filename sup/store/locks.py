"""Named exclusive locks shared by every SUP process that uses the same store.

PostgreSQL: a session-level advisory lock held on a dedicated connection, so replicas on different
hosts exclude each other and a replica that dies releases its locks with its connection.
SQLite (one host by nature): an flock on a file beside the database, released by the kernel if the
process dies. In-memory SQLite: a process-local lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, text

_local_locks: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()


class LockTimeout(Exception):
    """Somebody else holds the lock and did not let go in time."""


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


@contextmanager
def file_lock(path: Path, timeout: float, poll: float = 0.1, what: str = "the lock") -> Iterator[None]:
    """An exclusive flock on `path` (created if needed). flock locks belong to the open file, so
    this excludes other threads of this process as well as other processes; the kernel drops it
    when its holder dies. Raises LockTimeout after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with path.open("a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"{what} is held by another SUP process or thread") from None
                time.sleep(poll)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
