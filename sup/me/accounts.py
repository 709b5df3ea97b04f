"""Which account a verified OIDC access token is: `oidc.accounts` says, per source, which claim of the
token carries the `external_id` of that source's accounts (default: the Keycloak pull's users by
`sub`).

Only `external_id` is compared, only with claims that are non-empty strings, and only for the
sources the settings name: a username or email claim never reaches an account, and a user without
an external_id is never matched. When the token matches accounts of two sources (two identity
providers both claim the person), SUP refuses rather than pick one: which one would be a guess, and
the wrong guess hands someone another person's account.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from sup.errors import Conflict, NotFound
from sup.store.models import User

log = logging.getLogger(__name__)


class AccountKey(NamedTuple):
    """One (source, external_id) a token names, and the claim it came from."""

    source: str
    external_id: str
    claim: str


def account_keys(accounts: Mapping[str, str], claims: Mapping[str, Any]) -> list[AccountKey]:
    """The (source, external_id) pairs the token's claims name, in the settings' order: a source
    whose claim is absent, empty or not a string names nothing."""
    keys: list[AccountKey] = []
    for source, claim in accounts.items():
        value = claims.get(claim)
        if isinstance(value, str) and value:
            keys.append(AccountKey(source, value, claim))
    return keys


def account_of(session: Session, accounts: Mapping[str, str], claims: Mapping[str, Any]) -> User:
    """The one account the token's claims name: NotFound when none, Conflict when more than one
    (the message names the sources, never an account or a claim's value)."""
    keys = account_keys(accounts, claims)
    found = _accounts(session, keys) if keys else []
    if not found:
        raise NotFound("account", "for your identity (it may not be provisioned yet)")
    if len(found) > 1:
        raise _ambiguous(found, keys)
    return found[0]


def _accounts(session: Session, keys: Sequence[AccountKey]) -> list[User]:
    """The accounts of these (source, external_id) pairs: at most one each, the pair being unique."""
    wanted = or_(*(and_(User.source == k.source, User.external_id == k.external_id) for k in keys))
    return list(session.scalars(select(User).where(wanted).order_by(User.username)))


def _ambiguous(found: Sequence[User], keys: Sequence[AccountKey]) -> Conflict:
    sources = sorted({u.source for u in found})
    claim_of = {k.source: k.claim for k in keys}
    # For the operators: which accounts, and through which claim (names, no token or claim value).
    log.warning(
        "self-service refused: one token matches %d accounts (%s); oidc.accounts must name one source "
        "per person, or the accounts' external ids must differ",
        len(found),
        ", ".join(f"{u.username} of {u.source} by claim {claim_of.get(u.source, '?')}" for u in found),
    )
    return Conflict(
        f"your identity matches accounts of {len(found)} sources ({', '.join(sources)}); SUP will not "
        "choose one: ask your administrators to fix oidc.accounts or the accounts' external ids"
    )
