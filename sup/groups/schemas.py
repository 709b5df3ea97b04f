"""Request and response bodies of /api/v1/groups."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from sup.common.schemas import Body, PatchBody
from sup.domain.fields import Description, ExternalId, GroupName, IdNumber, Username

MAX_MEMBERS_IN_BODY = 50000


class GroupCreate(Body):
    name: GroupName = Field(description="POSIX group name: ^[a-z_][a-z0-9_-]*$, at most 32 characters")
    description: Description | None = None
    gid_number: IdNumber | None = Field(
        None, description="honoured if inside policy and never used; else allocated"
    )
    members: list[Username] = Field(default_factory=list, max_length=MAX_MEMBERS_IN_BODY)
    external_id: ExternalId | None = None


class GroupPatch(PatchBody):
    """Any subset of the group's fields; `members` replaces the member list."""

    required_fields = frozenset({"name", "gid_number", "members"})

    name: GroupName | None = None
    description: Description | None = None
    gid_number: IdNumber | None = None
    members: list[Username] | None = Field(None, max_length=MAX_MEMBERS_IN_BODY)
    external_id: ExternalId | None = None


class GroupOut(BaseModel):
    name: str
    gid_number: int
    description: str | None
    members: list[str]
    private: bool = Field(description="a user's private group: it follows the user and has no members")
    external_id: str | None
    source: str
    version: int
    created_at: datetime
    updated_at: datetime
