"""Which id ranges a number may come from: a uid, and a private group's gid.

A private group (one per user, named like the user) takes its gid from the gid ranges; with
`ids.private_gid: same_as_uid` it takes its user's uid, so the uid ranges hold private gids too.
The rules read the `ids` settings section (`settings.ids`) through `IdRanges`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

R_co = TypeVar("R_co", covariant=True)


class IdRanges(Protocol[R_co]):
    """The `ids` settings: the ranges SUP allocates from, and those it accepts when supplied."""

    @property
    def uid_range(self) -> R_co: ...

    @property
    def supplied_uid_ranges(self) -> Sequence[R_co]: ...

    @property
    def gid_range(self) -> R_co: ...

    @property
    def supplied_gid_ranges(self) -> Sequence[R_co]: ...

    @property
    def private_gid(self) -> str: ...


R = TypeVar("R")


def uid_ranges(ids: IdRanges[R]) -> list[R]:
    """Where a uid may lie."""
    return [ids.uid_range, *ids.supplied_uid_ranges]


def private_gid_ranges(ids: IdRanges[R]) -> list[R]:
    """Where a private group's gid may lie: with same_as_uid that is the uid range too."""
    ranges = [ids.gid_range, *ids.supplied_gid_ranges]
    if ids.private_gid == "same_as_uid":
        ranges += uid_ranges(ids)
    return ranges
