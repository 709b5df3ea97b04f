"""/api/v1/tokens: admin-only token management (the CLI does the same for bootstrapping)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request, Response
from pydantic import AwareDatetime, BaseModel, Field, field_validator

from sup.api import API_PREFIX
from sup.api.context import Admin, Viewer, token_cache
from sup.common.schemas import Body
from sup.domain.roles import Role
from sup.store.models import utcnow
from sup.tokens import service


class TokenCreate(Body):
    name: str = Field(pattern=service.NAME_PATTERN, description="unique; SCIM connections are named by it")
    role: Role
    expires_at: AwareDatetime | None = Field(None, description="optional expiry, with a timezone")

    @field_validator("expires_at")
    @classmethod
    def _in_the_future(cls, value: datetime | None) -> datetime | None:
        if value is not None and value <= utcnow():
            raise ValueError("must be in the future")
        return value


class TokenOut(BaseModel):
    name: str
    role: str
    prefix: str = Field(description="the first characters of the token, to recognise it")
    created_at: str
    created_by: str
    last_used_at: str | None
    expires_at: str | None


class TokenCreated(TokenOut):
    token: str = Field(description="the bearer token; shown this once, stored only as a hash")


router = APIRouter(prefix=API_PREFIX + "/tokens", tags=["tokens"])


@router.get("", response_model=list[TokenOut], summary="List tokens (never their secrets)")
def list_tokens(ctx: Admin) -> list[TokenOut]:
    with ctx.transaction() as session:
        return [TokenOut.model_validate(service.token_view(t)) for t in service.list_tokens(session)]


@router.post("", status_code=201, response_model=TokenCreated, summary="Create a token")
def create_token(ctx: Admin, body: TokenCreate) -> TokenCreated:
    with ctx.transaction() as session:
        token, secret = service.create_token(session, ctx.actor, body.name, body.role, body.expires_at)
        view = service.token_view(token)
    return TokenCreated(token=secret, **view)


@router.delete("/{name}", status_code=204, summary="Revoke a token")
def revoke_token(ctx: Admin, name: str, request: Request) -> Response:
    with ctx.transaction() as session:
        service.revoke_token(session, ctx.actor, name)
    token_cache(request).clear()  # revoked here: refused from the next request on, not after the TTL
    return Response(status_code=204)


class WhoAmI(BaseModel):
    name: str = Field(description="the token's name (the audit log's actor), or an OIDC person's")
    role: str = Field(description="viewer, operator or admin: what this token may do")


# Any reading role may ask who it is (the admin page hides the writes a viewer may not make).
whoami_router = APIRouter(prefix=API_PREFIX, tags=["tokens"])


@whoami_router.get("/whoami", response_model=WhoAmI, summary="The name and role of the calling token")
def whoami(ctx: Viewer) -> WhoAmI:
    return WhoAmI(name=ctx.actor.name, role=ctx.actor.role)
