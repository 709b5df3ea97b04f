"""What a Keycloak sync did (`SyncReport`, kept as the source's last result) and what a read covers
(`Scope`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class SyncReport:
    mode: str = "full"
    users_read: int = 0
    groups_read: int = 0
    requests: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    suspended: list[str] = field(default_factory=list)
    reactivated: list[str] = field(default_factory=list)
    groups_created: list[str] = field(default_factory=list)
    groups_updated: list[str] = field(default_factory=list)
    groups_deleted: list[str] = field(default_factory=list)
    members_added: int = 0
    members_removed: int = 0
    conflicts: list[str] = field(default_factory=list)
    group_cycles: list[str] = field(default_factory=list)  # subgroups nested in a cycle (flattened)
    errors: list[str] = field(default_factory=list)
    refused: str | None = None

    @property
    def writes(self) -> int:
        """Objects written (0 for a pull without changes)."""
        return (
            len(self.created) + len(self.updated) + len(self.groups_created) + len(self.groups_updated)
            + len(self.groups_deleted) + self.members_added + self.members_removed
        )  # fmt: skip

    @property
    def ok(self) -> bool:
        return self.refused is None and not self.errors

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "writes": self.writes, "ok": self.ok}


@dataclass(frozen=True)
class Scope:
    """What a (partial) read covers. None: everything (a full pull)."""

    users: frozenset[str] | None = None  # Keycloak user ids re-read; absent from the read = gone
    groups_complete: bool = True  # the whole group tree was read: a group absent from it is gone
    member_groups: frozenset[str] | None = None  # groups whose member list was read in full
    user_groups: dict[str, set[str]] | None = None  # user id -> every group id it is in (events)

    @property
    def full(self) -> bool:
        return self.users is None
