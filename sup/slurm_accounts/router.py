"""/api/v1/slurm/accounts: reads for viewers, writes for admins (accounts carry shares and limits)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from sup.api import API_PREFIX
from sup.api.context import Admin, IfMatch, Viewer
from sup.api.paging import Paging
from sup.common.concurrency import etag
from sup.common.schemas import Page
from sup.slurm_accounts import service
from sup.slurm_accounts.schemas import SlurmAccountCreate, SlurmAccountOut, SlurmAccountPatch
from sup.store.lookup import require_account

router = APIRouter(prefix=API_PREFIX + "/slurm/accounts", tags=["slurm"])


@router.get("", response_model=Page[SlurmAccountOut], summary="List the Slurm accounts SUP manages")
def list_accounts(
    ctx: Viewer,
    paging: Paging,
    parent: Annotated[str | None, Query(description="only children of this account")] = None,
    group: Annotated[str | None, Query(description="only accounts bound to this group")] = None,
) -> Page[SlurmAccountOut]:
    with ctx.transaction() as session:
        accounts, total = service.list_accounts(
            session, service.AccountFilter(parent=parent, group=group), paging.limit, paging.offset
        )
        items = [service.to_out(a) for a in accounts]
    return Page(items=items, total=total, limit=paging.limit, offset=paging.offset)


@router.post("", status_code=201, response_model=SlurmAccountOut, summary="Create a Slurm account")
def create_account(ctx: Admin, body: SlurmAccountCreate, response: Response) -> SlurmAccountOut:
    with ctx.transaction() as session:
        out = service.to_out(service.create_account(session, ctx.actor, body))
    response.headers["ETag"] = etag(out.version)
    response.headers["Location"] = f"/api/v1/slurm/accounts/{out.name}"
    return out


@router.get("/{name}", response_model=SlurmAccountOut, summary="Read a Slurm account")
def get_account(ctx: Viewer, name: str, response: Response) -> SlurmAccountOut:
    with ctx.transaction() as session:
        out = service.to_out(require_account(session, name))
    response.headers["ETag"] = etag(out.version)
    return out


@router.patch("/{name}", response_model=SlurmAccountOut, summary="Change a Slurm account")
def patch_account(
    ctx: Admin, name: str, body: SlurmAccountPatch, expected: IfMatch, response: Response
) -> SlurmAccountOut:
    with ctx.transaction() as session:
        out = service.to_out(service.update_account(session, ctx.actor, name, body, expected))
    response.headers["ETag"] = etag(out.version)
    return out


@router.delete("/{name}", status_code=204, summary="Delete a Slurm account")
def delete_account(ctx: Admin, name: str, expected: IfMatch) -> Response:
    with ctx.transaction() as session:
        service.delete_account(session, ctx.actor, name, expected)
    return Response(status_code=204)
