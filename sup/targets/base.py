"""The one small protocol every target implements, and the Change it speaks in.

A target is level-triggered, like a Kubernetes controller:
- `observe(scope=None)` reads the real system in bulk (paged LDAP searches, one `sacctmgr show`,
  label-selected Kubernetes lists), or with a Scope only what it names. A read that is partial or
  failed raises `ObserveError`: deciding on half a picture could delete what exists, so the pass
  stops for this target instead.
- `diff(desired, observed, scope=None)` is pure: the typed Changes that make the observed system match.
- `apply(changes)` performs them batched, idempotent, ordered (creates before memberships,
  memberships before deletes), and reports per change what happened.
The same Change objects are printed for review (`sup plan`) and then applied (`sup reconcile`).
A failure is a TargetError, transient (retried with backoff) unless raised with `terminal=True`.
Each target package exports a TargetSpec (sup/targets/spec.py) that the registry lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Generic, Protocol, TypeAlias, TypeVar

from sup.domain.desired import DesiredState


class ChangeAction(StrEnum):
    """What a Change does, in the order a target applies them. A `str` enum: JSON and text output
    show the value (`sup plan --json` prints "create")."""

    CREATE = "create"
    UPDATE = "update"
    ADD_MEMBERS = "add_members"
    REMOVE_MEMBERS = "remove_members"
    DELETE = "delete"
    REPORT = "report"  # something found that SUP will not change by itself (e.g. a foreign entry)


CREATE = ChangeAction.CREATE
UPDATE = ChangeAction.UPDATE
ADD_MEMBERS = ChangeAction.ADD_MEMBERS
REMOVE_MEMBERS = ChangeAction.REMOVE_MEMBERS
DELETE = ChangeAction.DELETE
REPORT = ChangeAction.REPORT


class Details(Protocol):
    """What a target's typed change details have in common: the JSON `sup plan --json` prints."""

    def as_json(self) -> dict[str, Any]: ...


# A target's details: its own frozen dataclasses (see each target's model.py), or, for a target not
# typed yet, a JSON-ready mapping that its apply re-reads.
AnyDetails: TypeAlias = Details | Mapping[str, Any]
DetailsT_co = TypeVar("DetailsT_co", bound=AnyDetails, covariant=True)


@dataclass(frozen=True)
class Change(Generic[DetailsT_co]):
    """One change to one object of one target.

    `details` is what `apply` needs, typed by the target (e.g. the DN and attributes of an entry,
    or an attribute's old and new value for an update); `as_json()` shows it for review (`sup plan
    --json`), e.g. {"attribute": {"old": ..., "new": ...}}.
    `subject` is the username whose provisioning status this change affects, if any.
    """

    target: str
    action: ChangeAction
    kind: str
    name: str
    details: DetailsT_co
    subject: str | None = None

    def details_json(self) -> dict[str, Any]:
        details = self.details
        return dict(details) if isinstance(details, Mapping) else details.as_json()

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "action": self.action.value,
            "kind": self.kind,
            "name": self.name,
            "subject": self.subject,
            "details": self.details_json(),
        }


# The Change of a target whose details are still a plain JSON-ready mapping.
UntypedChange: TypeAlias = "Change[Mapping[str, Any]]"


@dataclass(frozen=True)
class Failure:
    change: Change[AnyDetails]
    error: str


@dataclass
class ApplyReport:
    applied: list[Change[AnyDetails]] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)


@dataclass(frozen=True)
class Scope:
    """What the outbox named since the last pass: the users and groups a pass triggered by writes must
    look at. A target whose spec can scope reads and plans just these (`observe(scope)`,
    `diff(..., scope)`); the others, and every scheduled pass, read everything."""

    users: frozenset[str]
    groups: frozenset[str]
    accounts: frozenset[str] = frozenset()  # Slurm accounts the outbox named (slurm_account marks)
    # Those of `groups` named only because their member list changed (`members` marks): whoever
    # joined or left is among `users`, and nothing else about the group changed.
    members_only: frozenset[str] = frozenset()

    @property
    def changed_groups(self) -> frozenset[str]:
        """The groups whose own attributes (name, gid, description, ...) may have changed."""
        return self.groups - self.members_only


class ObserveError(Exception):
    """The target could not be read completely; nothing may be decided from what was read.
    Transient: the reconciler retries with backoff."""

    terminal = False


class TargetError(Exception):
    """The target refused or failed in a way that stops this pass for it (not for the others).

    `terminal`: retrying cannot help until the input changes (the settings, a template, the store),
    so the reconciler does not retry it with backoff; the next write or scheduled pass runs again.
    Otherwise (the default) the failure is transient: a server down, a lock held, a timeout.
    """

    def __init__(self, message: str, *, terminal: bool = False) -> None:
        super().__init__(message)
        self.terminal = terminal


ObservedT = TypeVar("ObservedT")
DetailsT = TypeVar("DetailsT", bound=AnyDetails)


class Target(Protocol, Generic[ObservedT, DetailsT]):
    """A target, opened from its spec (sup/targets/spec.py) with a TargetContext.

    `scope` is given only when the spec's `can_scope` said yes for this pass: then `observe` reads
    and `diff` plans the scope's users and groups only, and must not delete anything outside it.
    """

    name: ClassVar[str]

    def observe(self, scope: Scope | None = None) -> ObservedT: ...

    def diff(
        self, desired: DesiredState, observed: ObservedT, scope: Scope | None = None
    ) -> list[Change[DetailsT]]: ...

    def apply(self, changes: Sequence[Change[DetailsT]]) -> ApplyReport: ...

    def close(self) -> None: ...
