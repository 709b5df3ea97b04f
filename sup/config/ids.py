"""Where uid and gid numbers come from (settings key `ids`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sup.common.sections import Section
from sup.domain.ids import MAX_ID, IdRange


class IdPolicy(Section):
    """Where uid and gid numbers come from (settings key `ids`)."""

    uid_range: IdRange = IdRange(min=10000, max=49999)
    gid_range: IdRange = Field(
        IdRange(min=50000, max=59999), description="gids of ordinary (non-private) groups"
    )
    private_groups: bool = Field(
        True, description="give every user a group of their own name as primary group"
    )
    private_gid: Literal["same_as_uid", "allocate"] = Field(
        "same_as_uid", description="a private group's gid equals the uid when free, or comes from gid_range"
    )
    default_primary_gid: int = Field(
        100, ge=1, le=MAX_ID, description="primary gid of users when private_groups is off"
    )
    supplied_uid_ranges: list[IdRange] = Field(
        default_factory=list, description="extra ranges in which uids supplied by a source are honoured"
    )
    supplied_gid_ranges: list[IdRange] = Field(
        default_factory=list, description="extra ranges in which gids supplied by a source are honoured"
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
