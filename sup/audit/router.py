"""/api/v1/audit: the write history, newest first."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from sup.api import API_PREFIX
from sup.api.context import Viewer
from sup.api.paging import Paging
from sup.audit.service import AuditEntryOut, AuditFilter, list_entries
from sup.common.schemas import Page

router = APIRouter(prefix=API_PREFIX + "/audit", tags=["audit"])


@router.get("", response_model=Page[AuditEntryOut], summary="Read the audit log")
def read_audit(
    ctx: Viewer,
    paging: Paging,
    actor: Annotated[str | None, Query(description="token name, or cli:USER")] = None,
    action: Annotated[str | None, Query(description="create, update, delete, add_member, ...")] = None,
    resource_type: Annotated[str | None, Query(description="user, group, slurm_account, token")] = None,
    resource_name: Annotated[str | None, Query()] = None,
    since: Annotated[
        datetime | None, Query(description="only entries at or after this time (UTC if no zone)")
    ] = None,
) -> Page[AuditEntryOut]:
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    flt = AuditFilter(
        actor=actor, action=action, resource_type=resource_type, resource_name=resource_name, since=since
    )
    with ctx.transaction() as session:
        items, total = list_entries(session, flt, paging.limit, paging.offset)
    return Page(items=items, total=total, limit=paging.limit, offset=paging.offset)
