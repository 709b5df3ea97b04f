"""Bearer tokens and roles.

A token is `sup_` followed by 43 URL-safe characters (256 random bits). Only its SHA-256 is stored:
with that much entropy a fast hash is enough (there is nothing to brute-force), and lookups stay a
single indexed equality. Roles:
- viewer: reads everything;
- operator: viewer, plus writes users, groups and memberships, and triggers reconciles;
- admin: everything, including Slurm accounts and tokens;
- scim: only the SCIM endpoints (one token per identity-provider connection).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session

from sup.errors import Conflict, FieldError, InvalidInput, NotFound
from sup.store.audit import Actor, record
from sup.store.models import ApiToken, utcnow

TOKEN_PREFIX = "sup_"  # noqa: S105 - a marker, not a secret
NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
# Don't write last_used_at on every request: once a minute is plenty to spot unused tokens.
LAST_USED_RESOLUTION = timedelta(minutes=1)
SCIM_NAME_MAX = 59  # "scim:" + name must fit users.source (64)


class Role(StrEnum):
    viewer = "viewer"
    operator = "operator"
    admin = "admin"
    scim = "scim"


_RANK = {Role.viewer: 1, Role.operator: 2, Role.admin: 3}


def role_allows(role: str, needed: Role) -> bool:
    """Whether a token of `role` may do what needs `needed`. SCIM tokens stand apart from the ladder."""
    if needed is Role.scim:
        return role == Role.scim.value
    try:
        rank = _RANK.get(Role(role), 0)
    except ValueError:
        return False
    return rank >= _RANK[needed]


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def check_token_name(name: str) -> str:
    if not re.fullmatch(NAME_PATTERN, name):  # not re.match: its `$` lets a trailing newline through
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
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        name=name,
        role=role.value,
        token_hash=hash_token(secret),
        prefix=secret[: len(TOKEN_PREFIX) + 6],
        created_by=actor.name,
        expires_at=expires_at,
    )
    session.add(token)
    session.flush()
    record(session, actor, "create", "token", name, after=token_view(token))
    return token, secret


def authenticate(session: Session, secret: str) -> ApiToken | None:
    """The live token with this secret, or None. Updates last_used_at (coarsely)."""
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 128:
        return None
    token = session.scalars(select(ApiToken).where(ApiToken.token_hash == hash_token(secret))).one_or_none()
    if token is None:
        return None
    now = utcnow()
    if token.expires_at is not None and token.expires_at <= now:
        return None
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        token.last_used_at = now
    return token


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
