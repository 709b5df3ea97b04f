"""Alembic migrations on SQLite and on a real PostgreSQL: from empty to head, and back one step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect
from sqlalchemy.exc import IntegrityError

from sup.errors import ConfigurationError
from sup.store import migrate
from sup.store.models import Base
from sup.store.session import make_engine


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    factory: Callable[[bool], str] = request.getfixturevalue("new_postgres_database")
    return factory(False)


_HOME_INDEX = "ix_users_home_directory"


def _schema_differences(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def test_upgrade_from_empty_matches_the_models(empty_database: str) -> None:
    migrate.upgrade(empty_database)
    engine = make_engine(empty_database)
    try:
        assert migrate.current_revision(engine) == migrate.head_revision()
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert set(Base.metadata.tables) <= tables
    # What the migrations built is exactly what the ORM expects: no missing column, index or type.
    assert _schema_differences(empty_database) == []


def test_downgrade_last_revision_then_upgrade_again(empty_database: str) -> None:
    migrate.upgrade(empty_database)
    head = migrate.head_revision()
    migrate.downgrade(empty_database, "-1")
    engine = make_engine(empty_database)
    try:
        now = migrate.current_revision(engine)
        remaining = set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()
    assert now != head
    if now is None:
        assert remaining == set()  # the first revision's downgrade removes everything it made
    migrate.upgrade(empty_database)
    assert _schema_differences(empty_database) == []


def test_upgrade_is_idempotent(empty_database: str) -> None:
    migrate.upgrade(empty_database)
    migrate.upgrade(empty_database)
    engine = make_engine(empty_database)
    try:
        assert migrate.current_revision(engine) == migrate.head_revision()
    finally:
        engine.dispose()


def test_0002_keeps_existing_rows_both_ways(empty_database: str) -> None:
    """Adding and dropping the Slurm columns must not rebuild `users` (on SQLite a rebuild with foreign
    keys on would cascade into keys, memberships and private groups)."""
    migrate.upgrade(empty_database, "0001")
    engine = make_engine(empty_database)
    counts = (
        "SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM memberships),"
        " (SELECT count(*) FROM groups)"
    )
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(
                "INSERT INTO users (id, username, uid_number, primary_gid, login_shell, home_directory,"
                " active, source, version, created_at, updated_at)"
                " VALUES (1, 'kim', 10000, 10000, '/bin/bash', '/home/kim', true, 'api', 1,"
                " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            )
            connection.exec_driver_sql(
                "INSERT INTO groups (id, name, gid_number, source, private_user_id, version, created_at,"
                " updated_at) VALUES (1, 'kim', 10000, 'api', 1, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            )
            connection.exec_driver_sql(
                "INSERT INTO memberships (group_id, user_id, source, created_at)"
                " VALUES (1, 1, 'api', CURRENT_TIMESTAMP)"
            )
        migrate.upgrade(empty_database, "0002")
        with engine.connect() as connection:
            assert tuple(connection.exec_driver_sql(counts).one()) == (1, 1, 1)
            default = connection.exec_driver_sql("SELECT slurm_default_account FROM users").scalar()
            assert default is None
        migrate.downgrade(empty_database, "0001")
        with engine.connect() as connection:
            assert tuple(connection.exec_driver_sql(counts).one()) == (1, 1, 1)
    finally:
        engine.dispose()


def _insert_user(connection: Connection, n: int, username: str, home: str) -> None:
    connection.exec_driver_sql(
        "INSERT INTO users (id, username, uid_number, primary_gid, login_shell, home_directory, active,"
        " source, version, created_at, updated_at, scim_id) VALUES"
        f" ({n}, '{username}', {10000 + n}, 100, '/bin/bash', '{home}', true, 'api', 1,"
        f" CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'scim-{n}')"
    )


def test_0009_refuses_shared_homes_clearly_and_changes_nothing(empty_database: str) -> None:
    """Homes stored before the one-home rule may repeat: 0009 (a unique index) names each shared home
    and its users and stops before changing anything; once they are apart it applies."""
    migrate.upgrade(empty_database, "0008")
    engine = make_engine(empty_database)
    try:
        with engine.begin() as connection:
            for n, (username, home) in enumerate(
                [("kim", "/home/shared"), ("lee", "/home/shared"), ("amy", "/home/amy")], start=1
            ):
                _insert_user(connection, n, username, home)
        with pytest.raises(ConfigurationError) as refused:
            migrate.upgrade(empty_database)
        assert "1 home(s) are shared: '/home/shared': kim, lee" in refused.value.message
        assert "PATCH /api/v1/users/NAME" in refused.value.message
        assert migrate.current_revision(engine) == "0008"
        assert not any(i["unique"] for i in inspect(engine).get_indexes("users") if i["name"] == _HOME_INDEX)
        with engine.begin() as connection:
            connection.exec_driver_sql("UPDATE users SET home_directory = '/home/lee' WHERE username = 'lee'")
        migrate.upgrade(empty_database)
        assert migrate.current_revision(engine) == migrate.head_revision()
        with pytest.raises(IntegrityError), engine.begin() as connection:
            _insert_user(connection, 4, "bo", "/home/amy")
    finally:
        engine.dispose()
