"""/api/v1/users: thin HTTP handlers over sup/users/service.py."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy import select

from sup.api import API_PREFIX
from sup.api.context import IfMatch, Operator, Viewer
from sup.api.paging import Paging, max_page_size
from sup.common.concurrency import etag
from sup.common.schemas import Page
from sup.errors import FieldError, InvalidInput
from sup.store.lookup import require_user
from sup.store.models import User
from sup.users import service
from sup.users.schemas import SshKeyOut, UserCreate, UserOut, UserPatch
from sup.users.status import UserStatus, status_of, statuses_of

router = APIRouter(prefix=API_PREFIX + "/users", tags=["users"])
# Under its own prefix: any word after /users/ may be a username.
status_router = APIRouter(prefix=API_PREFIX + "/status", tags=["users"])


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


@router.get("/{username}/ssh-keys", response_model=list[SshKeyOut], summary="A user's SSH keys, every origin")
def list_ssh_keys(ctx: Viewer, username: str) -> list[SshKeyOut]:
    with ctx.transaction() as session:
        user = require_user(session, username)
        return [SshKeyOut(fingerprint=k.fingerprint, key=k.line, origin=k.origin) for k in user.ssh_keys]


@router.delete(
    "/{username}/ssh-keys/{fingerprint:path}",
    status_code=204,
    summary="Remove one of a user's SSH keys (any origin; audited as an update of the user)",
)
def delete_ssh_key(ctx: Operator, username: str, fingerprint: str, expected: IfMatch) -> Response:
    with ctx.transaction() as session:
        service.remove_ssh_key(session, ctx.settings, ctx.actor, username, fingerprint, expected)
    return Response(status_code=204)


@status_router.get(
    "/users",
    response_model=list[UserStatus],
    summary="Provisioning state per target of several users at once (a page of a list)",
)
def users_status(
    ctx: Viewer,
    request: Request,
    username: Annotated[list[str], Query(min_length=1, description="repeat for each user, in order")],
) -> list[UserStatus]:
    """Users the store does not know are left out (one may be deleted between a list and this)."""
    if len(username) > max_page_size(request):
        raise InvalidInput(FieldError("username", f"at most {max_page_size(request)} users at once"))
    with ctx.transaction() as session:
        known = set(session.scalars(select(User.username).where(User.username.in_(username))))
        return statuses_of(session, ctx.settings, [name for name in username if name in known])
