"""Values a source keeps on a user or group beside the POSIX fields (SCIM's userName, attributes and
displayName), written by the services' create-or-update with their own audit entry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy.orm import Session

from sup.store.audit import Actor, record
from sup.store.models import Group, User
from sup.store.outbox import mark_dirty


@dataclass(frozen=True)
class SourceColumns:
    """`values` (column -> value) are written on create, and on update when one of the `audited`
    columns changes; the audit entry of such a change has `action` and names the columns as
    `audited` says (column -> its name in the entry)."""

    values: Mapping[str, Any]
    audited: Mapping[str, str]
    action: str

    def audit(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {label: values.get(column) for column, label in self.audited.items()}


def write_source_columns(
    session: Session, actor: Actor, kind: Literal["user", "group"], obj: User | Group, columns: SourceColumns
) -> bool:
    """Write `columns` if an audited one changed: the row's version moves (an ETag change), the
    object is marked dirty and the audit log says what. Returns whether anything was written."""
    before = columns.audit({column: getattr(obj, column) for column in columns.audited})
    after = columns.audit(columns.values)
    if after == before:
        return False
    for column, value in columns.values.items():
        setattr(obj, column, value)
    name = obj.username if isinstance(obj, User) else obj.name
    mark_dirty(session, kind, name)
    session.flush()
    record(session, actor, columns.action, kind, name, before=before, after=after)
    return True
