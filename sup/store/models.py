"""SQLAlchemy 2 typed mappings of every table SUP keeps.

One metadata for all tables (Alembic compares against it), with a naming convention so that
constraint names are the same on SQLite and PostgreSQL: the API maps a violated unique constraint back
to the field it guards by that name (sup/api/errors.py).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from sup.domain.status import SyncState

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JsonType = JSON().with_variant(JSONB(), "postgresql")
HomePath = String(1024).with_variant(String(1024, collation="C"), "postgresql")
# uid/gid numbers go up to 2^32-2: wider than a signed 32-bit INTEGER.
IdNumber = BigInteger


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_scim_id() -> str:
    """A SCIM `id` (RFC 7643 §3.1): opaque, stable across renames, never reassigned."""
    return str(uuid.uuid4())


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite otherwise hands back naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UtcDateTime()}


class TimestampMixin:
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class User(TimestampMixin, Base):
    """A person as the store knows them. `version` guards updates (optimistic concurrency)."""

    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("source", "external_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(32), unique=True)
    display_name: Mapped[str | None] = mapped_column(String(256))
    given_name: Mapped[str | None] = mapped_column(String(128))
    family_name: Mapped[str | None] = mapped_column(String(128))
    email: Mapped[str | None] = mapped_column(String(254), index=True)
    uid_number: Mapped[int] = mapped_column(IdNumber, unique=True)
    primary_gid: Mapped[int] = mapped_column(IdNumber)
    login_shell: Mapped[str] = mapped_column(String(256))
    # One person per home (unique), and none above or below another's (sup/users/homes.py asks the
    # index for a range of paths: byte order, so "C" on PostgreSQL whatever the database's locale).
    home_directory: Mapped[str] = mapped_column(HomePath, index=True, unique=True)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    # When the user was last deactivated (None while active): the lifecycle's grace period runs from it.
    suspended_at: Mapped[datetime | None] = mapped_column(index=True)
    external_id: Mapped[str | None] = mapped_column(String(256))
    source: Mapped[str] = mapped_column(String(64), default="api")
    # The account Slurm jobs are charged to by default, by name (names of Slurm accounts never
    # change). A name rather than a foreign key: users -> slurm_accounts -> groups -> users would be a
    # cycle. The service refuses to delete an account some user has as default.
    slurm_default_account: Mapped[str | None] = mapped_column(String(64), index=True)
    # SCIM (sup/scim): the resource id, the userName as the IdP sent it (the POSIX username is derived
    # from it), that userName's comparison key (NFC, lower-case: filters compare it case-insensitively,
    # RFC 7643 §4.1.1), and the SCIM attributes the store has no column for, kept so that an IdP reads
    # back what it wrote. Users never written through SCIM have no userName of their own: theirs is
    # the username.
    scim_id: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=new_scim_id)
    scim_user_name: Mapped[str | None] = mapped_column(String(256))
    scim_user_name_key: Mapped[str | None] = mapped_column(String(256), unique=True, index=True)
    scim_attributes: Mapped[dict[str, Any] | None] = mapped_column(JsonType)
    version: Mapped[int] = mapped_column(Integer, nullable=False)

    __mapper_args__ = {"version_id_col": version}

    ssh_keys: Mapped[list[SshKey]] = relationship(
        back_populates="user", cascade="all, delete-orphan", order_by="SshKey.id", passive_deletes=True
    )
    memberships: Mapped[list[Membership]] = relationship(
        back_populates="user", cascade="all, delete-orphan", passive_deletes=True
    )
    private_group: Mapped[Group | None] = relationship(
        back_populates="private_user", cascade="all, delete-orphan", passive_deletes=True
    )


class SshKey(Base):
    """One SSH public key of one user. A key (by fingerprint) belongs to one person only."""

    __tablename__ = "ssh_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    key_type: Mapped[str] = mapped_column(String(64))
    key_data: Mapped[str] = mapped_column(Text)
    comment: Mapped[str] = mapped_column(String(1024), default="")
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    origin: Mapped[str] = mapped_column(String(16), default="admin")  # admin | idp | self
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    user: Mapped[User] = relationship(back_populates="ssh_keys")

    @property
    def line(self) -> str:
        return f"{self.key_type} {self.key_data} {self.comment}".rstrip()


class Group(TimestampMixin, Base):
    """A POSIX group. A user-private group has `private_user_id` set and follows its user."""

    __tablename__ = "groups"
    __table_args__ = (UniqueConstraint("source", "external_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(32), unique=True)
    gid_number: Mapped[int] = mapped_column(IdNumber, unique=True)
    description: Mapped[str | None] = mapped_column(String(1024))
    external_id: Mapped[str | None] = mapped_column(String(256))
    source: Mapped[str] = mapped_column(String(64), default="api")
    private_user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), unique=True
    )
    # SCIM: the resource id, and the displayName as the IdP sent it (the POSIX name is derived from it
    # or equal to it, see scim.group_names); groups not written through SCIM show their name.
    scim_id: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=new_scim_id)
    scim_display_name: Mapped[str | None] = mapped_column(String(256))
    version: Mapped[int] = mapped_column(Integer, nullable=False)

    __mapper_args__ = {"version_id_col": version}

    private_user: Mapped[User | None] = relationship(back_populates="private_group")
    memberships: Mapped[list[Membership]] = relationship(
        back_populates="group", cascade="all, delete-orphan", passive_deletes=True
    )


class Membership(Base):
    __tablename__ = "memberships"

    group_id: Mapped[int] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    source: Mapped[str] = mapped_column(String(64), default="api")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    group: Mapped[Group] = relationship(back_populates="memberships")
    user: Mapped[User] = relationship(back_populates="memberships")


class SlurmAccount(TimestampMixin, Base):
    """A Slurm account SUP manages; members of `group` get an association to it, members of
    `coordinators_group` are its coordinators."""

    __tablename__ = "slurm_accounts"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    parent: Mapped[str] = mapped_column(String(64), default="root", index=True)
    description: Mapped[str | None] = mapped_column(String(1024))
    organization: Mapped[str | None] = mapped_column(String(256))
    fairshare: Mapped[int | None] = mapped_column(Integer)
    qos: Mapped[list[str]] = mapped_column(JsonType, default=list)
    default_qos: Mapped[str | None] = mapped_column(String(64))
    limits: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    partitions: Mapped[list[str]] = mapped_column(JsonType, default=list)
    group_id: Mapped[int | None] = mapped_column(ForeignKey("groups.id", ondelete="RESTRICT"), index=True)
    # Members of this group are the account's Slurm coordinators (`sacctmgr add coordinator`).
    coordinators_group_id: Mapped[int | None] = mapped_column(
        ForeignKey("groups.id", ondelete="RESTRICT"), index=True
    )
    version: Mapped[int] = mapped_column(Integer, nullable=False)

    __mapper_args__ = {"version_id_col": version}

    group: Mapped[Group | None] = relationship(foreign_keys=[group_id])
    coordinators_group: Mapped[Group | None] = relationship(foreign_keys=[coordinators_group_id])


class IdAllocation(Base):
    """Every uid or gid ever handed out. Rows are never deleted: a released number keeps its row
    (`released_at` set, a tombstone) so it is never given to somebody else."""

    __tablename__ = "id_allocations"

    kind: Mapped[str] = mapped_column(String(3), primary_key=True)  # uid | gid
    number: Mapped[int] = mapped_column(IdNumber, primary_key=True)
    owner_kind: Mapped[str] = mapped_column(String(8))  # user | group
    owner_name: Mapped[str] = mapped_column(String(64))
    allocated_at: Mapped[datetime] = mapped_column(default=utcnow)
    released_at: Mapped[datetime | None] = mapped_column()


class IdCounter(Base):
    """Where the next automatic allocation of a kind starts looking. Its row is also the lock that
    serializes allocations of that kind (SELECT ... FOR UPDATE on PostgreSQL)."""

    __tablename__ = "id_counters"

    kind: Mapped[str] = mapped_column(String(3), primary_key=True)
    next_number: Mapped[int] = mapped_column(IdNumber, default=0)


class ApiToken(Base):
    """A bearer token. Only the SHA-256 of the secret is stored; `prefix` identifies it to humans."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    last_used_at: Mapped[datetime | None] = mapped_column()
    expires_at: Mapped[datetime | None] = mapped_column()


class AuditEntry(Base):
    """One write: who (token name, or `cli:` + OS user), what, when, and the object before and after."""

    __tablename__ = "audit_log"
    __table_args__ = (Index(None, "resource_type", "resource_name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(128), index=True)
    action: Mapped[str] = mapped_column(String(32))
    resource_type: Mapped[str] = mapped_column(String(32))
    resource_name: Mapped[str] = mapped_column(String(256))
    before: Mapped[dict[str, Any] | None] = mapped_column(JsonType)
    after: Mapped[dict[str, Any] | None] = mapped_column(JsonType)
    request_id: Mapped[str | None] = mapped_column(String(64))


class TargetStatus(Base):
    """Per user and per target: a `SyncState` word (in_sync, pending or error, with the last error),
    kept by name so that the status of a deprovisioned user is still readable. The column holds the
    enum's values as plain strings."""

    __tablename__ = "target_status"

    username: Mapped[str] = mapped_column(String(32), primary_key=True)
    target: Mapped[str] = mapped_column(String(16), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), default=SyncState.PENDING.value)
    # Whether the last pass that reached this user left them active (unlocked) on the target: what the
    # mass-change guard compares the next plan with.
    active: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    last_error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class OutboxMark(Base):
    """A "dirty" mark: this user, group or Slurm account changed and the targets must catch up.

    Written in the same transaction as the change. Marks coalesce per object; `generation` grows with
    every mark so a consumer deletes a mark only if nothing re-marked it while it worked.
    """

    __tablename__ = "outbox"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)  # user | group | members | slurm_account
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    generation: Mapped[int] = mapped_column(Integer, default=1)
    marked_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


class SourceState(Base):
    """Where a pulling source (Keycloak) stands: its last full pull, the admin-event cursor, and how
    the last attempt went (shown by `sup sync` and the sources endpoint)."""

    __tablename__ = "source_state"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    last_full_at: Mapped[datetime | None] = mapped_column()
    # The time (ms since the epoch, Keycloak's clock) of the newest admin event already applied.
    event_cursor: Mapped[int | None] = mapped_column(BigInteger)
    last_attempt_at: Mapped[datetime | None] = mapped_column()
    last_error: Mapped[str | None] = mapped_column(Text)
    last_result: Mapped[dict[str, Any] | None] = mapped_column(JsonType)


class TargetRemoval(Base):
    """What one applied pass took away on one target: users it stopped holding active (locked or
    removed) and objects it deleted. The reconcile budgets (`reconcile.suspension_budget`, ...) sum
    these over `budget_window_seconds`; rows older than the window are dropped as new ones come.
    `forced`: the pass was forced, so what came before it no longer counts."""

    __tablename__ = "target_removals"
    __table_args__ = (Index(None, "target", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    target: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime] = mapped_column(default=utcnow)
    suspensions: Mapped[int] = mapped_column(Integer, default=0)
    deletions: Mapped[int] = mapped_column(Integer, default=0)
    forced: Mapped[bool] = mapped_column(Boolean, default=False)


class LoginWake(Base):
    """Whether a login pod (a user's own, `kind` user, or a group's, `kind` group) is awake, when it
    was woken and when it was last seen in use (docs/ssh-gateway.md, "Scale to zero"). Read only when
    `gateway.idle_seconds` is set: the Kubernetes target renders the pod's StatefulSet with replicas 0
    for a row that is not awake. An owner without a row is awake until the scheduled pass first sees
    it (then its row is made, awake, with last_activity now)."""

    __tablename__ = "login_wake"

    kind: Mapped[str] = mapped_column(String(8), primary_key=True)  # user | group
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    awake: Mapped[bool] = mapped_column(Boolean, default=True)
    woken_at: Mapped[datetime | None] = mapped_column()
    last_activity: Mapped[datetime | None] = mapped_column()


class GatewayHeartbeat(Base):
    """The latest report of one SSH gateway replica: its open sessions and the idle reporters'
    answers (JSON, as posted). In the store so that every `sup serve` worker and replica sees the
    same ones; one row per replica, replaced by each heartbeat; rows silent for long are dropped."""

    __tablename__ = "gateway_heartbeats"

    replica: Mapped[str] = mapped_column(String(128), primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    sessions: Mapped[list[dict[str, Any]]] = mapped_column(JsonType)
    busy: Mapped[list[dict[str, Any]]] = mapped_column(JsonType)


class AuditCursor(Base):
    """How far the audit stream (settings `audit_out`) has shipped to one sink (`file`, `webhook`):
    the id of the last audit entry the sink accepted. Moved only after a delivery, so a restart
    resumes after it (at least once: a batch delivered just before a crash may come again)."""

    __tablename__ = "audit_cursor"

    sink: Mapped[str] = mapped_column(String(16), primary_key=True)
    last_id: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
