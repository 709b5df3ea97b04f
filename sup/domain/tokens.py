"""SUP's own bearer tokens: what one looks like and how it is stored.

A token is `sup_` followed by 43 URL-safe characters (256 random bits). Only its SHA-256 is stored:
with that much entropy a fast hash is enough (there is nothing to brute-force), and lookups stay a
single indexed equality.
"""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "sup_"  # noqa: S105 - a marker, not a secret
MAX_TOKEN_LENGTH = 128  # longer is not one of ours: refused before hashing
SHOWN_PREFIX_LENGTH = len(TOKEN_PREFIX) + 6  # what listings show to tell tokens apart


def new_secret() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def may_be_token(secret: str) -> bool:
    """Whether `secret` can be one of SUP's tokens at all (worth a lookup)."""
    return secret.startswith(TOKEN_PREFIX) and len(secret) <= MAX_TOKEN_LENGTH
