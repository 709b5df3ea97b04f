"""/api/v1/groups and their members: thin HTTP handlers over sup/groups/service.py."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from sup.api import API_PREFIX
from sup.api.context import IfMatch, Operator, Viewer
from sup.api.paging import Paging
from sup.common.concurrency import etag
from sup.common.schemas import Page
from sup.groups import service
from sup.groups.schemas import GroupCreate, GroupOut, GroupPatch
from sup.store.lookup import require_group

router = APIRouter(prefix=API_PREFIX + "/groups", tags=["groups"])


@router.get("", response_model=Page[GroupOut], summary="List groups")
def list_groups(
    ctx: Viewer,
    paging: Paging,
    member: Annotated[str | None, Query(description="only groups this user is a member of")] = None,
    private: Annotated[
        bool | None, Query(description="only user-private (true) or ordinary (false) groups")
    ] = None,
    source: Annotated[str | None, Query(description="only groups from this source")] = None,
    q: Annotated[str | None, Query(max_length=128, description="substring of the name")] = None,
) -> Page[GroupOut]:
    flt = service.GroupFilter(member=member, private=private, source=source, q=q)
    with ctx.transaction() as session:
        groups, total = service.list_groups(session, flt, paging.limit, paging.offset)
        items = [service.to_out(g) for g in groups]
    return Page(items=items, total=total, limit=paging.limit, offset=paging.offset)


@router.post("", status_code=201, response_model=GroupOut, summary="Create a group")
def create_group(ctx: Operator, body: GroupCreate, response: Response) -> GroupOut:
    with ctx.transaction() as session:
        out = service.to_out(service.create_group(session, ctx.settings, ctx.actor, body))
    response.headers["ETag"] = etag(out.version)
    response.headers["Location"] = f"/api/v1/groups/{out.name}"
    return out


@router.get("/{name}", response_model=GroupOut, summary="Read a group")
def get_group(ctx: Viewer, name: str, response: Response) -> GroupOut:
    with ctx.transaction() as session:
        out = service.to_out(require_group(session, name))
    response.headers["ETag"] = etag(out.version)
    return out


@router.patch("/{name}", response_model=GroupOut, summary="Change a group (members replaces the list)")
def patch_group(
    ctx: Operator, name: str, body: GroupPatch, expected: IfMatch, response: Response
) -> GroupOut:
    with ctx.transaction() as session:
        out = service.to_out(service.update_group(session, ctx.settings, ctx.actor, name, body, expected))
    response.headers["ETag"] = etag(out.version)
    return out


@router.delete("/{name}", status_code=204, summary="Delete a group (its gid is never reused)")
def delete_group(ctx: Operator, name: str, expected: IfMatch) -> Response:
    with ctx.transaction() as session:
        service.delete_group(session, ctx.settings, ctx.actor, name, expected)
    return Response(status_code=204)


@router.put("/{name}/members/{username}", status_code=204, summary="Add a member (idempotent)")
def put_member(ctx: Operator, name: str, username: str) -> Response:
    with ctx.transaction() as session:
        service.put_member(session, ctx.settings, ctx.actor, name, username)
    return Response(status_code=204)


@router.delete("/{name}/members/{username}", status_code=204, summary="Remove a member")
def delete_member(ctx: Operator, name: str, username: str) -> Response:
    with ctx.transaction() as session:
        service.delete_member(session, ctx.actor, name, username)
    return Response(status_code=204)
