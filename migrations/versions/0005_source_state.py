"""Keycloak source: where each pulling source stands (last full pull, admin-event cursor, outcome).

Ownership needs no new column (users and groups carry `source` and `external_id`, SSH keys their
`origin`: admin, idp or self, since 0001).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JsonType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "source_state",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("last_full_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("event_cursor", sa.BigInteger(), nullable=True),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_result", JsonType, nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_source_state")),
    )


def downgrade() -> None:
    op.drop_table("source_state")
