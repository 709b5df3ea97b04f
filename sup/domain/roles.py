"""Who may do what on the admin API: the roles a bearer token (SUP's own or an OIDC one) carries.

- viewer: reads everything;
- operator: viewer, plus writes users, groups and memberships, and triggers reconciles;
- admin: everything, including Slurm accounts and tokens;
- scim: only the SCIM endpoints (one token per identity-provider connection).
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    viewer = "viewer"
    operator = "operator"
    admin = "admin"
    scim = "scim"


_RANK = {Role.viewer: 1, Role.operator: 2, Role.admin: 3}


def rank(role: Role) -> int:
    """Its place on the ladder viewer < operator < admin; scim stands apart (0)."""
    return _RANK.get(role, 0)


def role_allows(role: str, needed: Role) -> bool:
    """Whether a token of `role` may do what needs `needed`. SCIM tokens stand apart from the ladder."""
    if needed is Role.scim:
        return role == Role.scim.value
    try:
        held = rank(Role(role))
    except ValueError:
        return False
    return held >= _RANK[needed]
