"""Create-or-update of a group: the one call every source (Keycloak, SCIM, import) makes for a group.

A source says what it knows of a group (`GroupInput`: the POSIX name it gives it and the fields it
sets); `save_group` works out what differs from the store, applies it through the groups service
(validation, gid allocation, renames, members, audit, outbox) and answers what changed. Whether a
source may write the group at all is the source's question, asked before it calls; taking a group
over is `take_over_group`. Only changed values are validated (pydantic's ValidationError, which each
source reports its own way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy.orm import Session

from sup.config import Settings
from sup.groups.schemas import GroupCreate, GroupPatch
from sup.groups.service import create_group, update_group
from sup.store.audit import Actor, record
from sup.store.models import Group
from sup.store.source_columns import SourceColumns, write_source_columns

Action = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class GroupInput:
    """A source's view of one group: `fields` are GroupPatch fields it sets (`members` by username,
    compared as a set); the others stay as they are."""

    name: str
    source: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    columns: SourceColumns | None = None


@dataclass(frozen=True)
class GroupChange:
    action: Action
    name: str
    changed: frozenset[str] = frozenset()


def save_group(
    session: Session,
    settings: Settings,
    actor: Actor,
    data: GroupInput,
    group: Group | None,
    *,
    expected_version: int | None = None,
) -> tuple[Group, GroupChange]:
    """Create the group (`group` None) or bring `group` to what `data` says; nothing differing,
    nothing is written."""
    if group is None:
        spec = GroupCreate.model_validate({"name": data.name, **data.fields})
        columns = data.columns.values if data.columns is not None else None
        created = create_group(session, settings, actor, spec, data.source, columns=columns)
        return created, GroupChange("created", created.name, frozenset(spec.model_fields_set))
    changes = differences(group, data)
    changed = set(changes)
    if changes:
        patch = GroupPatch.model_validate(changes)
        update_group(session, settings, actor, group.name, patch, expected_version, writer=data.source)
    if data.columns is not None and write_source_columns(session, actor, "group", group, data.columns):
        changed |= set(data.columns.audited)
    action: Action = "updated" if changed else "unchanged"
    return group, GroupChange(action, group.name, frozenset(changed))


def differences(group: Group, data: GroupInput) -> dict[str, Any]:
    """The fields of `data` that differ from `group` (name included), as a GroupPatch's values."""
    changes: dict[str, Any] = {}
    if data.name != group.name:
        changes["name"] = data.name
    for name, value in data.fields.items():
        if name == "members":
            if sorted(value or []) != sorted(m.user.username for m in group.memberships):
                changes[name] = value
        elif getattr(group, name) != value:
            changes[name] = value
    return changes


def take_over_group(
    session: Session, actor: Actor, group: Group, source: str, external_id: str | None
) -> None:
    """Hand `group` to `source` (as sources.precedence allows: the caller has asked)."""
    before = {"source": group.source, "external_id": group.external_id}
    group.source = source
    group.external_id = external_id
    session.flush()
    record(session, actor, "take_over", "group", group.name, before=before,
           after={"source": source, "external_id": external_id})  # fmt: skip
