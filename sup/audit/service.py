"""Queries over the audit log, newest first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import ColumnElement
from sqlalchemy.orm import Session

from sup.store.models import AuditEntry
from sup.store.paging import fetch_page


class AuditEntryOut(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    resource_type: str
    resource_name: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    request_id: str | None


@dataclass(frozen=True)
class AuditFilter:
    actor: str | None = None
    action: str | None = None
    resource_type: str | None = None
    resource_name: str | None = None
    since: datetime | None = None


def _conditions(flt: AuditFilter) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    for column, value in (
        (AuditEntry.actor, flt.actor),
        (AuditEntry.action, flt.action),
        (AuditEntry.resource_type, flt.resource_type),
        (AuditEntry.resource_name, flt.resource_name),
    ):
        if value is not None:
            conditions.append(column == value)
    if flt.since is not None:
        conditions.append(AuditEntry.at >= flt.since)
    return conditions


def list_entries(
    session: Session, flt: AuditFilter, limit: int, offset: int
) -> tuple[list[AuditEntryOut], int]:
    rows, total = fetch_page(session, AuditEntry, _conditions(flt), AuditEntry.id.desc(), limit, offset)
    return [AuditEntryOut.model_validate(row, from_attributes=True) for row in rows], total
