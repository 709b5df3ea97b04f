"""Deriving a POSIX username from an identity-provider login.

IdPs identify people by logins such as `Kim.Wexler@corp.example` or `José.Núñez`. The cluster needs a
POSIX name. The derivation is deterministic (the same login always gives the same name, so a re-sync
never renames anybody) and never merges two people: `find_collisions` reports logins that derive to the
same name, and the store refuses to give a name that another identity already holds (see
sup/users/service.py: `claim_derived_username`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sup.domain.posix import MAX_NAME_LENGTH, InvalidName, check_username


class UsernameRule(BaseModel):
    """How a login becomes a username (settings key `naming`): the identity provider's login ->
    the POSIX username, e.g. `Kim.Wexler@corp.example` -> `kim_wexler` by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Literal["localpart", "full"] = Field(
        "localpart",
        description="`localpart` keeps what is before the last '@' (Kim.Wexler@corp.example -> "
        "kim_wexler); `full` keeps the whole login (the '@' becomes the replacement character)",
    )
    replacement: Literal["_", "-", ""] = Field(
        "_", description='what a character outside [a-z0-9_-] becomes: `_`, `-` or nothing (`""`: dropped)'
    )
    leading_digit_prefix: str = Field(
        "",
        pattern=r"^[a-z_]?[a-z0-9_-]{0,7}$",
        description="prefix for names that would start with a digit or '-' (`u` turns 2pac into u2pac); "
        "empty refuses them",
    )
    extra_reserved: frozenset[str] = Field(
        frozenset(), description="names refused besides the built-in reserved list"
    )
    overlong: Literal["refuse", "hash"] = Field(
        "refuse",
        description="a name over 32 characters: `refuse` it, or `hash`: cut it and end it with '_' and "
        "8 hex digits of the login's SHA-256 (deterministic; a clash left is still reported)",
    )


def _fold_to_ascii(text: str) -> str:
    """`José Núñez` -> `Jose Nunez`: decompose, drop combining marks, keep ASCII."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def derive_username(
    login: str, rule: UsernameRule | None = None, *, overlong: Literal["refuse", "hash"] | None = None
) -> str:
    """Return the POSIX username for `login`, or raise InvalidName saying why there is none.

    A name over 32 characters is refused, unless the rule's (or the `overlong` argument's) choice is
    `hash` (SCIM group names from long display names always are): then it is cut and ends in `_` and
    8 hex digits of the login's SHA-256, so two long names that share a beginning still differ (and
    a clash left is reported by the caller).
    """
    rule = rule or UsernameRule()
    raw = login.strip()
    if not raw:
        raise InvalidName("login is empty")
    if rule.strategy == "localpart" and "@" in raw:
        raw = raw.rsplit("@", 1)[0]
    name = _fold_to_ascii(raw).lower()
    name = re.sub(r"[^a-z0-9_-]", rule.replacement if rule.replacement else "", name)
    if rule.replacement:
        # "kim..wexler" -> "kim_wexler", and no leading/trailing separators from mapped characters.
        name = re.sub(re.escape(rule.replacement) + "{2,}", rule.replacement, name)
        name = name.strip(rule.replacement)
    if name and (name[0].isdigit() or name[0] == "-"):
        if not rule.leading_digit_prefix:
            raise InvalidName(
                f"login {login!r} gives {name!r}, which starts with a digit or '-'; "
                "set naming.leading_digit_prefix or supply a username"
            )
        name = rule.leading_digit_prefix + name
    if not name:
        raise InvalidName(f"login {login!r} has no characters usable in a POSIX username")
    if len(name) > MAX_NAME_LENGTH and (overlong or rule.overlong) == "hash":
        digest = hashlib.sha256(login.encode("utf-8")).hexdigest()[:8]
        name = name[: MAX_NAME_LENGTH - 9].rstrip("_-") + "_" + digest
    if len(name) > MAX_NAME_LENGTH:
        # Truncating could silently merge two people who share a long prefix: refuse instead.
        raise InvalidName(
            f"login {login!r} gives {name!r}, longer than {MAX_NAME_LENGTH} characters; supply a username"
        )
    try:
        return check_username(name, rule.extra_reserved)
    except InvalidName as exc:
        raise InvalidName(f"login {login!r} gives an unusable username: {exc}") from exc


def find_collisions(logins: Iterable[str], rule: UsernameRule | None = None) -> dict[str, list[str]]:
    """Group distinct logins that derive to the same username: {username: [login, login, ...]}.

    Logins that cannot be derived at all are left to `derive_username` to report.
    """
    by_name: dict[str, set[str]] = defaultdict(set)
    for login in logins:
        try:
            by_name[derive_username(login, rule)].add(login)
        except InvalidName:
            continue
    return {name: sorted(found) for name, found in sorted(by_name.items()) if len(found) > 1}
