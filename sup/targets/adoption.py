"""What `sup import --from-<target>` reads from a target: records in the shape of the import document
(the documented `sup import` format: `users`, `groups`, `slurm_accounts` lists of mappings), and the
problems found on the way. Each adopting target adds to one Adoption, in registry order, so a later
target can see what an earlier one found (Slurm accounts join the groups LDAP holds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class AdoptionProblem:
    """Something that cannot be adopted as it is (reported, never guessed at)."""

    where: str
    message: str
    field: str | None = None
    kind: Literal["user", "group", "slurm_account"] | None = None
    name: str | None = None


@dataclass
class Adoption:
    """The inputs an adoption needs from the site's settings, and what the targets have read so far."""

    private_groups: bool = True  # ids.private_groups: every user should have a group of their own
    reserved_names: frozenset[str] = frozenset()
    users: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    slurm_accounts: list[dict[str, Any]] = field(default_factory=list)
    problems: list[AdoptionProblem] = field(default_factory=list)


class AdoptionError(Exception):
    """The target cannot be read for adoption (a partial read, or what it holds cannot be adopted)."""
