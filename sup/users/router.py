"""/api/v1/users: thin HTTP handlers over sup/users/service.py."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from sup.api import API_PREFIX
from sup.api.context import IfMatch, Operator, Viewer
from sup.api.paging import Paging
from sup.common.concurrency import etag
from sup.common.schemas import Page
from sup.store.lookup import require_user
from sup.users import service
from sup.users.schemas import UserCreate, UserOut, UserPatch
from sup.users.status import UserStatus, status_of

router = APIRouter(prefix=API_PREFIX + "/users", tags=["users"])


@router.get("", response_model=Page[UserOut], summary="List users")
def list_users(
    ctx: Viewer,
    paging: Paging,
    active: Annotated[bool | None, Query(description="only active (true) or inactive (false) users")] = None,
    group: Annotated[str | None, Query(description="only members of this group")] = None,
    source: Annotated[
        str | None, Query(description="only users from this source (api, import, scim:NAME, ...)")
    ] = None,
    q: Annotated[
        str | None, Query(max_length=128, description="substring of username, email or display name")
    ] = None,
) -> Page[UserOut]:
    flt = service.UserFilter(active=active, group=group, source=source, q=q)
    with ctx.transaction() as session:
        users, total = service.list_users(session, flt, paging.limit, paging.offset)
        items = [service.to_out(u) for u in users]
    return Page(items=items, total=total, limit=paging.limit, offset=paging.offset)


@router.post("", status_code=201, response_model=UserOut, summary="Create a user")
def create_user(ctx: Operator, body: UserCreate, response: Response) -> UserOut:
    with ctx.transaction() as session:
        out = service.to_out(service.create_user(session, ctx.settings, ctx.actor, body))
    response.headers["ETag"] = etag(out.version)
    response.headers["Location"] = f"/api/v1/users/{out.username}"
    return out


@router.get("/{username}", response_model=UserOut, summary="Read a user")
def get_user(ctx: Viewer, username: str, response: Response) -> UserOut:
    with ctx.transaction() as session:
        out = service.to_out(service.get_user(session, username))
    response.headers["ETag"] = etag(out.version)
    return out


@router.patch("/{username}", response_model=UserOut, summary="Change any of a user's fields")
def patch_user(
    ctx: Operator, username: str, body: UserPatch, expected: IfMatch, response: Response
) -> UserOut:
    with ctx.transaction() as session:
        user = service.update_user(session, ctx.settings, ctx.actor, username, body, expected)
        out = service.to_out(user)
    response.headers["ETag"] = etag(out.version)
    return out


@router.delete("/{username}", status_code=204, summary="Delete a user (their ids are never reused)")
def delete_user(ctx: Operator, username: str, expected: IfMatch) -> Response:
    with ctx.transaction() as session:
        service.delete_user(session, ctx.actor, username, expected)
    return Response(status_code=204)


@router.get("/{username}/status", response_model=UserStatus, summary="Provisioning state per target")
def user_status(ctx: Viewer, username: str) -> UserStatus:
    with ctx.transaction() as session:
        require_user(session, username)
        return status_of(session, ctx.settings, username)
