"""Slurm target: a user's explicit default account, an account's coordinators group.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("users", sa.Column("slurm_default_account", sa.String(64), nullable=True))
    op.create_index(op.f("ix_users_slurm_default_account"), "users", ["slurm_default_account"])
    # batch_alter_table: SQLite cannot add a foreign key to an existing table in place, so Alembic
    # rebuilds slurm_accounts there (no table references it, so nothing cascades); on PostgreSQL it
    # issues plain ALTER TABLE statements.
    with op.batch_alter_table("slurm_accounts") as batch:
        batch.add_column(sa.Column("coordinators_group_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_slurm_accounts_coordinators_group_id_groups"),
            "groups",
            ["coordinators_group_id"],
            ["id"],
            ondelete="RESTRICT",
        )
        batch.create_index(op.f("ix_slurm_accounts_coordinators_group_id"), ["coordinators_group_id"])


def downgrade() -> None:
    with op.batch_alter_table("slurm_accounts") as batch:
        batch.drop_index(op.f("ix_slurm_accounts_coordinators_group_id"))
        batch.drop_constraint(op.f("fk_slurm_accounts_coordinators_group_id_groups"), type_="foreignkey")
        batch.drop_column("coordinators_group_id")
    # Not batch mode for `users`: on SQLite a batch rebuild drops the table, and with foreign keys on
    # that cascades into ssh_keys, memberships and private groups. SQLite >= 3.35 drops a column in place.
    op.drop_index(op.f("ix_users_slurm_default_account"), table_name="users")
    op.drop_column("users", "slurm_default_account")
