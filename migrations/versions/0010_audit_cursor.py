"""The audit stream's cursors (`audit_cursor`): per sink, the last audit entry shipped
(docs/operations.md, "Audit stream").

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_cursor",
        sa.Column("sink", sa.String(16), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sink", name=op.f("pk_audit_cursor")),
    )


def downgrade() -> None:
    op.drop_table("audit_cursor")
