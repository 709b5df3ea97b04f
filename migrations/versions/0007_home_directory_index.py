"""An index on users.home_directory: every create and every change of a home checks that no other
person has it (sup/users/homes.py), which without an index reads the whole table.

Not a unique index: homes stored before that rule may repeat, and they stay until changed.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(op.f("ix_users_home_directory"), "users", ["home_directory"])


def downgrade() -> None:
    op.drop_index(op.f("ix_users_home_directory"), table_name="users")
