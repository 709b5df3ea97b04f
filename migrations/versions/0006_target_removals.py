"""Reconcile budgets: what each applied pass took away per target (users no longer active, objects
deleted), summed over `reconcile.budget_window_seconds`.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "target_removals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("suspensions", sa.Integer(), nullable=False),
        sa.Column("deletions", sa.Integer(), nullable=False),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_target_removals")),
    )
    op.create_index(op.f("ix_target_removals_target_at"), "target_removals", ["target", "at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_target_removals_target_at"), table_name="target_removals")
    op.drop_table("target_removals")
