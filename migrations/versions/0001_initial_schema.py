"""Initial schema: identities, Slurm accounts, id allocations, tokens, audit, status, outbox.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def _timestamps() -> list[sa.Column[object]]:
    return [
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(32), nullable=False),
        sa.Column("display_name", sa.String(256), nullable=True),
        sa.Column("given_name", sa.String(128), nullable=True),
        sa.Column("family_name", sa.String(128), nullable=True),
        sa.Column("email", sa.String(254), nullable=True),
        sa.Column("uid_number", sa.BigInteger(), nullable=False),
        sa.Column("primary_gid", sa.BigInteger(), nullable=False),
        sa.Column("login_shell", sa.String(256), nullable=False),
        sa.Column("home_directory", sa.String(1024), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("external_id", sa.String(256), nullable=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("source", "external_id", name=op.f("uq_users_source_external_id")),
        sa.UniqueConstraint("uid_number", name=op.f("uq_users_uid_number")),
        sa.UniqueConstraint("username", name=op.f("uq_users_username")),
    )
    op.create_index(op.f("ix_users_email"), "users", ["email"])

    op.create_table(
        "groups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("gid_number", sa.BigInteger(), nullable=False),
        sa.Column("description", sa.String(1024), nullable=True),
        sa.Column("external_id", sa.String(256), nullable=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("private_user_id", sa.Integer(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        *_timestamps(),
        sa.ForeignKeyConstraint(
            ["private_user_id"],
            ["users.id"],
            name=op.f("fk_groups_private_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_groups")),
        sa.UniqueConstraint("gid_number", name=op.f("uq_groups_gid_number")),
        sa.UniqueConstraint("name", name=op.f("uq_groups_name")),
        sa.UniqueConstraint("private_user_id", name=op.f("uq_groups_private_user_id")),
        sa.UniqueConstraint("source", "external_id", name=op.f("uq_groups_source_external_id")),
    )

    op.create_table(
        "ssh_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("key_type", sa.String(64), nullable=False),
        sa.Column("key_data", sa.Text(), nullable=False),
        sa.Column("comment", sa.String(1024), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_ssh_keys_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ssh_keys")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_ssh_keys_fingerprint")),
    )
    op.create_index(op.f("ix_ssh_keys_user_id"), "ssh_keys", ["user_id"])

    op.create_table(
        "memberships",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["group_id"], ["groups.id"], name=op.f("fk_memberships_group_id_groups"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_memberships_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("group_id", "user_id", name=op.f("pk_memberships")),
    )
    op.create_index(op.f("ix_memberships_user_id"), "memberships", ["user_id"])

    op.create_table(
        "slurm_accounts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("parent", sa.String(64), nullable=False),
        sa.Column("description", sa.String(1024), nullable=True),
        sa.Column("organization", sa.String(256), nullable=True),
        sa.Column("fairshare", sa.Integer(), nullable=True),
        sa.Column("qos", JSON, nullable=False),
        sa.Column("default_qos", sa.String(64), nullable=True),
        sa.Column("limits", JSON, nullable=False),
        sa.Column("partitions", JSON, nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        *_timestamps(),
        sa.ForeignKeyConstraint(
            ["group_id"], ["groups.id"], name=op.f("fk_slurm_accounts_group_id_groups"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_slurm_accounts")),
        sa.UniqueConstraint("name", name=op.f("uq_slurm_accounts_name")),
    )
    op.create_index(op.f("ix_slurm_accounts_group_id"), "slurm_accounts", ["group_id"])
    op.create_index(op.f("ix_slurm_accounts_parent"), "slurm_accounts", ["parent"])

    op.create_table(
        "id_allocations",
        sa.Column("kind", sa.String(3), nullable=False),
        sa.Column("number", sa.BigInteger(), nullable=False),
        sa.Column("owner_kind", sa.String(8), nullable=False),
        sa.Column("owner_name", sa.String(64), nullable=False),
        sa.Column("allocated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("kind", "number", name=op.f("pk_id_allocations")),
    )
    counters = op.create_table(
        "id_counters",
        sa.Column("kind", sa.String(3), nullable=False),
        sa.Column("next_number", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("kind", name=op.f("pk_id_counters")),
    )
    # The counter rows double as the allocation locks; they must exist before the first allocation.
    op.bulk_insert(counters, [{"kind": "uid", "next_number": 0}, {"kind": "gid", "next_number": 0}])

    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("name", name=op.f("uq_api_tokens_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )

    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("resource_type", sa.String(32), nullable=False),
        sa.Column("resource_name", sa.String(256), nullable=False),
        sa.Column("before", JSON, nullable=True),
        sa.Column("after", JSON, nullable=True),
        sa.Column("request_id", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_actor"), "audit_log", ["actor"])
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"])
    op.create_index(
        op.f("ix_audit_log_resource_type_resource_name"), "audit_log", ["resource_type", "resource_name"]
    )

    op.create_table(
        "target_status",
        sa.Column("username", sa.String(32), nullable=False),
        sa.Column("target", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("username", "target", name=op.f("pk_target_status")),
    )

    op.create_table(
        "outbox",
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("marked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kind", "name", name=op.f("pk_outbox")),
    )
    op.create_index(op.f("ix_outbox_marked_at"), "outbox", ["marked_at"])


def downgrade() -> None:
    for table in (
        "outbox",
        "target_status",
        "audit_log",
        "api_tokens",
        "id_counters",
        "id_allocations",
        "slurm_accounts",
        "memberships",
        "ssh_keys",
        "groups",
        "users",
    ):
        op.drop_table(table)
