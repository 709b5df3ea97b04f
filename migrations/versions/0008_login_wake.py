"""The SSH gateway's state: whether each login pod is awake (`login_wake`) and the gateway
replicas' latest heartbeats (`gateway_heartbeats`); docs/ssh-gateway.md, "Scale to zero".

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "login_wake",
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("awake", sa.Boolean(), nullable=False),
        sa.Column("woken_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_activity", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("kind", "name", name=op.f("pk_login_wake")),
    )
    op.create_table(
        "gateway_heartbeats",
        sa.Column("replica", sa.String(128), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sessions", _JSON, nullable=False),
        sa.Column("busy", _JSON, nullable=False),
        sa.PrimaryKeyConstraint("replica", name=op.f("pk_gateway_heartbeats")),
    )


def downgrade() -> None:
    op.drop_table("gateway_heartbeats")
    op.drop_table("login_wake")
