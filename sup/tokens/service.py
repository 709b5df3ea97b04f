"""Bearer tokens: create, list, revoke (the API and the CLI).

What a token looks like and how it is stored is sup/domain/tokens.py; the roles it carries,
sup/domain/roles.py; the lookup behind every request, sup/api/auth.py.
"""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.domain.roles import Role
from sup.domain.tokens import SHOWN_PREFIX_LENGTH, hash_token, new_secret
from sup.errors import Conflict, FieldError, InvalidInput, NotFound
from sup.store.audit import Actor, record
from sup.store.models import ApiToken

NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
SCIM_NAME_MAX = 59  # "scim:" + name must fit users.source (64)


def check_token_name(name: str) -> str:
    if not re.match(NAME_PATTERN, name):
        raise InvalidInput(
            FieldError("name", "token names are 1-64 characters: lower-case letters, digits, '_', '.', '-'")
        )
    return name


def token_view(token: ApiToken) -> dict[str, str | None]:
    """What may be shown about a token: never the secret, never its hash."""
    return {
        "name": token.name,
        "role": token.role,
        "prefix": token.prefix,
        "created_at": token.created_at.isoformat(),
        "created_by": token.created_by,
        "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
        "expires_at": token.expires_at.isoformat() if token.expires_at else None,
    }


def create_token(
    session: Session, actor: Actor, name: str, role: Role, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token and return it with its secret, which exists nowhere else afterwards."""
    check_token_name(name)
    if role is Role.scim and len(name) > SCIM_NAME_MAX:
        # What a SCIM connection creates has source `scim:NAME`, a 64-character column.
        raise InvalidInput(
            FieldError("name", f"SCIM connection names are at most {SCIM_NAME_MAX} characters")
        )
    if session.scalars(select(ApiToken.id).where(ApiToken.name == name)).first() is not None:
        raise Conflict(
            f"a token named {name!r} already exists; revoke it first or pick another name", field="name"
        )
    secret = new_secret()
    token = ApiToken(
        name=name,
        role=role.value,
        token_hash=hash_token(secret),
        prefix=secret[:SHOWN_PREFIX_LENGTH],
        created_by=actor.name,
        expires_at=expires_at,
    )
    session.add(token)
    session.flush()
    record(session, actor, "create", "token", name, after=token_view(token))
    return token, secret


def list_tokens(session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.name)))


def revoke_token(session: Session, actor: Actor, name: str) -> None:
    """Delete the token: every later request with it gets 401. The audit log keeps the record."""
    token = session.scalars(select(ApiToken).where(ApiToken.name == name)).one_or_none()
    if token is None:
        raise NotFound("token", name)
    before = token_view(token)
    session.delete(token)
    session.flush()
    record(session, actor, "revoke", "token", name, before=before)
