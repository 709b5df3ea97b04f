"""Engines and sessions for SQLite (the embedded default) and PostgreSQL (production).

SQLite: WAL, foreign keys on, and every transaction opened with BEGIN IMMEDIATE. Without IMMEDIATE,
two transactions that read then write deadlock on the lock upgrade and one fails at once with
"database is locked", whatever the busy timeout; with it, writers queue up for up to `busy_timeout`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 30_000


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control from pysqlite so that the "begin" hook below decides how to begin.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_begin(conn: Any) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str, **kwargs: Any) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if parsed.drivername == "postgresql":
        # psycopg 3 is the driver we ship; a bare postgresql:// URL would ask for psycopg2.
        url = parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    kwargs.setdefault("pool_pre_ping", True)  # survive a PostgreSQL restart without operator action
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    return create_engine(url, **kwargs)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def is_postgresql(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"
