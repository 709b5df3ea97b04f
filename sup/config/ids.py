"""Where uid and gid numbers come from (settings key `ids`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sup.common.sections import Section
from sup.domain.ids import MAX_ID, IdRange


class IdPolicy(Section):
    """Where uid and gid numbers come from (settings key `ids`).

    - The uid range and the gid range must not overlap while `private_gid` is `same_as_uid`: private
      and ordinary groups would otherwise compete for the same gids.
    - A private group's gid equals its user's uid when that gid is free; otherwise it is allocated
      from `gid_range`.
    - Numbers 0, 65534, 65535, 4294967294 and 4294967295 are never assigned.
    - A number supplied by a source (API, import, IdP) is honoured if it lies in the allocation range
      or a `supplied_*_ranges` entry and was never allocated before: also not to somebody since
      deleted. Uids are never reused.
    """

    uid_range: IdRange = Field(
        IdRange(min=10000, max=49999), description="automatic uids: people's uids are allocated from it"
    )
    gid_range: IdRange = Field(
        IdRange(min=50000, max=59999), description="automatic gids of ordinary (non-private) groups"
    )
    private_groups: bool = Field(
        True, description="every user gets a group of their own name as primary group"
    )
    private_gid: Literal["same_as_uid", "allocate"] = Field(
        "same_as_uid",
        description="`same_as_uid`: a private group's gid equals its user's uid when that gid is free, "
        "else it is allocated from gid_range; `allocate`: always from gid_range",
    )
    default_primary_gid: int = Field(
        100, ge=1, le=MAX_ID, description="primary gid of every user when private_groups is false"
    )
    supplied_uid_ranges: list[IdRange] = Field(
        default_factory=list,
        description="extra ranges in which uids supplied by a source (API, import, IdP) are honoured",
    )
    supplied_gid_ranges: list[IdRange] = Field(
        default_factory=list,
        description="the same for gids: to adopt the gids of existing groups, say",
        examples=[[{"min": 1000, "max": 9999}]],
    )

    @model_validator(mode="after")
    def _no_overlap(self) -> IdPolicy:
        if self.private_gid == "allocate" or not self.private_groups:
            return self
        u, g = self.uid_range, self.gid_range
        if u.min <= g.max and g.min <= u.max:
            raise ValueError(
                f"uid_range {u} overlaps gid_range {g}: with private_gid=same_as_uid, private and "
                "ordinary groups would compete for the same gids"
            )
        return self
