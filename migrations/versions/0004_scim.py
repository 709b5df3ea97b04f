"""SCIM: resource ids for users and groups, the userName and displayName IdPs sent, extra attributes.

Self-contained (it touches only columns it adds), so it applies after any revision that leaves the
`users` and `groups` tables as 0002 made them.

Every existing user and group gets a random SCIM id. On SQLite a column cannot be made NOT NULL after
it is added without rebuilding the table, and rebuilding `users` with foreign keys on would cascade
into SSH keys, memberships and private groups (see 0002); so there the column is added NOT NULL with
an empty default that the UPDATE below replaces at once (the ORM always supplies a value).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JsonType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _add_scim_id(table: str) -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if sqlite:
        op.add_column(table, sa.Column("scim_id", sa.String(36), nullable=False, server_default=""))
    else:
        op.add_column(table, sa.Column("scim_id", sa.String(36), nullable=True))
    rows = sa.table(table, sa.column("id", sa.Integer()), sa.column("scim_id", sa.String(36)))
    ids = [row[0] for row in bind.execute(sa.select(rows.c.id))]
    for row_id in ids:
        bind.execute(sa.update(rows).where(rows.c.id == row_id).values(scim_id=str(uuid.uuid4())))
    if not sqlite:
        op.alter_column(table, "scim_id", existing_type=sa.String(36), nullable=False)
    op.create_index(op.f(f"ix_{table}_scim_id"), table, ["scim_id"], unique=True)


def upgrade() -> None:
    _add_scim_id("users")
    op.add_column("users", sa.Column("scim_user_name", sa.String(256), nullable=True))
    op.add_column("users", sa.Column("scim_user_name_key", sa.String(256), nullable=True))
    op.add_column("users", sa.Column("scim_attributes", JsonType, nullable=True))
    op.create_index(op.f("ix_users_scim_user_name_key"), "users", ["scim_user_name_key"], unique=True)

    _add_scim_id("groups")
    op.add_column("groups", sa.Column("scim_display_name", sa.String(256), nullable=True))


def downgrade() -> None:
    # Not batch mode: a rebuild of `users` or `groups` would cascade (see the docstring). SQLite >= 3.35
    # drops a column in place once no index uses it.
    op.drop_index(op.f("ix_groups_scim_id"), table_name="groups")
    op.drop_column("groups", "scim_display_name")
    op.drop_column("groups", "scim_id")

    op.drop_index(op.f("ix_users_scim_user_name_key"), table_name="users")
    op.drop_index(op.f("ix_users_scim_id"), table_name="users")
    op.drop_column("users", "scim_attributes")
    op.drop_column("users", "scim_user_name_key")
    op.drop_column("users", "scim_user_name")
    op.drop_column("users", "scim_id")
