"""Request and response bodies of /api/v1/users (field names are part of the interface contract)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from sup.common.schemas import Body, PatchBody
from sup.domain.fields import (
    AbsolutePath,
    AccountName,
    DisplayName,
    Email,
    ExternalId,
    GroupName,
    IdNumber,
    PersonName,
    SshKeyLine,
    Username,
)

MAX_KEYS_IN_BODY = 1000
MAX_GROUPS_IN_BODY = 10000


class UserCreate(Body):
    username: Username = Field(description="POSIX username: ^[a-z_][a-z0-9_-]*$, at most 32 characters")
    email: Email | None = None
    display_name: DisplayName | None = None
    given_name: PersonName | None = None
    family_name: PersonName | None = None
    uid_number: IdNumber | None = Field(
        None, description="honoured if inside policy and never used; else allocated"
    )
    primary_gid: IdNumber | None = Field(
        None, description="with private groups: the private group's gid; otherwise an existing group's gid"
    )
    login_shell: AbsolutePath | None = Field(None, description="one of accounts.allowed_shells")
    home_directory: AbsolutePath | None = Field(None, description="default from accounts.home_template")
    ssh_public_keys: list[SshKeyLine] = Field(default_factory=list, max_length=MAX_KEYS_IN_BODY)
    active: bool = True
    external_id: ExternalId | None = None
    groups: list[GroupName] = Field(
        default_factory=list, max_length=MAX_GROUPS_IN_BODY, description="names of existing groups to join"
    )
    slurm_default_account: AccountName | None = Field(
        None,
        description="a SUP Slurm account; used as the default account while the user is a member of it "
        "(otherwise the first of their accounts by name)",
    )


class UserPatch(PatchBody):
    """Any subset of the user's fields; lists (`ssh_public_keys`, `groups`) replace the current set."""

    required_fields = frozenset(
        {"username", "uid_number", "primary_gid", "login_shell", "home_directory", "active"}
    )

    username: Username | None = None
    email: Email | None = None
    display_name: DisplayName | None = None
    given_name: PersonName | None = None
    family_name: PersonName | None = None
    uid_number: IdNumber | None = None
    primary_gid: IdNumber | None = None
    login_shell: AbsolutePath | None = None
    home_directory: AbsolutePath | None = None
    ssh_public_keys: list[SshKeyLine] | None = Field(None, max_length=MAX_KEYS_IN_BODY)
    active: bool | None = None
    external_id: ExternalId | None = None
    groups: list[GroupName] | None = Field(None, max_length=MAX_GROUPS_IN_BODY)
    slurm_default_account: AccountName | None = None


class UserOut(BaseModel):
    username: str
    uid_number: int
    primary_gid: int
    display_name: str | None
    given_name: str | None
    family_name: str | None
    email: str | None
    login_shell: str
    home_directory: str
    ssh_public_keys: list[str]
    active: bool
    suspended_at: datetime | None = Field(
        description="when the user was deactivated; lifecycle.delete_after_days later they are deleted"
    )
    groups: list[str] = Field(description="ordinary groups the user is a member of (not the private group)")
    external_id: str | None
    slurm_default_account: str | None
    source: str
    version: int
    created_at: datetime
    updated_at: datetime


class SshKeyOut(BaseModel):
    fingerprint: str = Field(description="SHA256 fingerprint: what DELETE .../ssh-keys/{fingerprint} names")
    key: str
    origin: str = Field(description="admin (set through the API or an import), idp (from a source), self")
