"""What each request handler gets: settings, a way to open a transaction, and who is acting.

`Viewer`, `Operator` and `Admin` are dependencies that authenticate the bearer token and check its
role: 401 without a valid token, 403 when the token's role is not enough.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from sup.api.auth import lookup
from sup.api.oidc import VERIFIED_OIDC, InvalidToken, OidcIdentity, OidcVerifier, looks_like_jwt
from sup.api.token_cache import TokenCache
from sup.config import Settings
from sup.domain.roles import Role, role_allows
from sup.domain.tokens import hash_token, may_be_token
from sup.errors import FieldError, InvalidInput
from sup.store.audit import Actor

bearer_scheme = HTTPBearer(auto_error=False, description="a token from `sup token create`")


@dataclass(frozen=True)
class ApiContext:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    actor: Actor

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """Commit when the block ends normally: the answer is sent only after the commit."""
        with self.sessions.begin() as session:
            yield session


def unauthorized(detail: str) -> HTTPException:
    return HTTPException(401, detail, headers={"WWW-Authenticate": 'Bearer realm="sup"'})


def oidc_identity(request: Request, bearer: str) -> OidcIdentity | None:
    """The verified OIDC identity behind a JWT bearer, when OIDC is configured; None for SUP's own
    tokens. An OIDC token that does not verify is a 401 (the reason, never the token, is shown)."""
    verifier: OidcVerifier | None = getattr(request.app.state, "oidc", None)
    if verifier is None or not looks_like_jwt(bearer):
        return None
    checked = getattr(request.state, VERIFIED_OIDC, None)  # the write rate limit verified it already
    if checked is not None and checked[0] == bearer:
        identity: OidcIdentity = checked[1]
        return identity
    try:
        return verifier.verify(bearer)
    except InvalidToken as exc:
        raise unauthorized(str(exc)) from None


def token_cache(request: Request) -> TokenCache:
    """The app's cache of bearer-token lookups (sup/api/token_cache.py; create_app makes it)."""
    cache: TokenCache = request.app.state.token_cache
    return cache


async def _principal(request: Request, bearer: str) -> tuple[str, str]:
    """(name, role) of the bearer, or 401. A cached token costs no thread hop and no transaction."""
    if getattr(request.app.state, "oidc", None) is not None and looks_like_jwt(bearer):
        identity = await run_in_threadpool(oidc_identity, request, bearer)  # may fetch the JWKS
        if identity is not None:
            if identity.role is None:
                raise HTTPException(403, f"the OIDC token of {identity.username!r} grants no SUP role")
            return f"oidc:{identity.username}", identity.role.value
    if not may_be_token(bearer):
        raise unauthorized("the bearer token is not valid (unknown, revoked or expired)")
    cache = token_cache(request)
    token = cache.get(hash_token(bearer))
    if token is None:
        token = await run_in_threadpool(lookup, request.app.state.sessions, bearer, cache)
    if token is None:
        raise unauthorized("the bearer token is not valid (unknown, revoked or expired)")
    return token.name, token.role


def context(request: Request, actor: Actor) -> ApiContext:
    """The handler's context for `actor`, once they are authenticated."""
    state = request.app.state
    return ApiContext(settings=state.settings, engine=state.engine, sessions=state.sessions, actor=actor)


async def authorized(
    request: Request, credentials: HTTPAuthorizationCredentials | None, needed: Role
) -> ApiContext:
    """The context of the bearer token's holder: 401 without a valid token, 403 without the role."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise unauthorized("a bearer token is required (Authorization: Bearer ...)")
    name, role = await _principal(request, credentials.credentials)
    if not role_allows(role, needed):
        raise HTTPException(403, f"token {name!r} has role {role}; this needs {needed.value}")
    request_id = getattr(request.state, "request_id", None)
    return context(request, Actor(name=name, role=role, request_id=request_id))


def requires(needed: Role) -> object:
    async def dependency(
        request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer_scheme)
    ) -> ApiContext:
        return await authorized(request, credentials, needed)

    return Depends(dependency)


Viewer = Annotated[ApiContext, requires(Role.viewer)]
Operator = Annotated[ApiContext, requires(Role.operator)]
Admin = Annotated[ApiContext, requires(Role.admin)]

_ETAG = re.compile(r'(W/)?"?([0-9]{1,18})"?')


def if_match(
    value: Annotated[
        str | None,
        Header(alias="If-Match", description='the ETag read before, e.g. "3"; a mismatch gives 412'),
    ] = None,
) -> int | None:
    """The version the client expects, from If-Match (`"3"`, `W/"3"` or `*` for any)."""
    if value is None or value.strip() == "*":
        return None
    match = _ETAG.fullmatch(value.strip())
    if match is None:
        raise InvalidInput(FieldError("If-Match", 'must be an ETag this API returned, such as "3"'))
    return int(match.group(2))


IfMatch = Annotated[int | None, Depends(if_match)]
