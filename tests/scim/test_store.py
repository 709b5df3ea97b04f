"""The store side of SCIM: migration 0004 on existing rows, and SCIM connection token names."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from sup.domain.roles import Role
from sup.errors import InvalidInput
from sup.store import migrate
from sup.store.session import make_engine
from sup.tokens.service import create_token
from tests.scim.conftest import ADMIN


def test_0004_gives_existing_users_and_groups_ids_and_keeps_rows_both_ways(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    migrate.upgrade(url, "0002")
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            for i in (1, 2):
                connection.exec_driver_sql(
                    "INSERT INTO users (id, username, uid_number, primary_gid, login_shell, home_directory,"
                    f" active, source, version, created_at, updated_at) VALUES ({i}, 'u{i}', {10000 + i},"
                    f" {10000 + i}, '/bin/bash', '/home/u{i}', true, 'api', 1, CURRENT_TIMESTAMP,"
                    " CURRENT_TIMESTAMP)"
                )
                connection.exec_driver_sql(
                    "INSERT INTO groups (id, name, gid_number, source, private_user_id, version, created_at,"
                    f" updated_at) VALUES ({i}, 'u{i}', {10000 + i}, 'api', {i}, 1, CURRENT_TIMESTAMP,"
                    " CURRENT_TIMESTAMP)"
                )
        migrate.upgrade(url, "0004")
        with engine.connect() as connection:
            ids = [row[0] for row in connection.exec_driver_sql("SELECT scim_id FROM users ORDER BY id")]
            group_ids = [row[0] for row in connection.exec_driver_sql("SELECT scim_id FROM groups")]
        assert len(set(ids)) == 2 and all(len(i) == 36 for i in ids)
        assert len(set(group_ids)) == 2
        migrate.downgrade(url, "0002")
        with engine.connect() as connection:
            counts = connection.exec_driver_sql(
                "SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM groups)"
            )
            assert tuple(counts.one()) == (2, 2)
    finally:
        engine.dispose()


def test_scim_connection_names_fit_the_source_column(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session, pytest.raises(InvalidInput):
        create_token(session, ADMIN, "x" * 60, Role.scim)
    with sessions.begin() as session:
        create_token(session, ADMIN, "x" * 59, Role.scim)
        create_token(session, ADMIN, "y" * 64, Role.viewer)
