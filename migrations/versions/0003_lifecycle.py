"""Lifecycle: when a user was suspended, and whether each target last saw them active.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN on both databases (no table rebuild on SQLite: nothing cascades).
    op.add_column("users", sa.Column("suspended_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(op.f("ix_users_suspended_at"), "users", ["suspended_at"])
    # Users already inactive start their grace period now rather than being deleted at once.
    op.execute(
        sa.text("UPDATE users SET suspended_at = CURRENT_TIMESTAMP WHERE active = :no").bindparams(no=False)
    )
    op.add_column(
        "target_status", sa.Column("active", sa.Boolean(), nullable=False, server_default=sa.true())
    )


def downgrade() -> None:
    # In place, not batch mode: a batch rebuild of `users` on SQLite drops the table, which cascades
    # into ssh_keys and memberships (see 0002). SQLite >= 3.35 drops a plain column in place.
    op.drop_column("target_status", "active")
    op.drop_index(op.f("ix_users_suspended_at"), table_name="users")
    op.drop_column("users", "suspended_at")
