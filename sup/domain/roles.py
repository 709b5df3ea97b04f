"""Who may do what on the admin API: the roles a bearer token (SUP's own or an OIDC one) carries.

- viewer: reads everything;
- operator: viewer, plus writes users, groups and memberships, and triggers reconciles;
- admin: everything, including Slurm accounts and tokens;
- scim: only the SCIM endpoints (one token per identity-provider connection);
- gateway: only the SSH gateway's endpoints (/api/v1/gateway/*: routes, wake, heartbeat, events;
  docs/ssh-gateway.md), which admin may call too. A stolen gateway token wakes pods and reads
  usernames and key fingerprints, nothing more.
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    viewer = "viewer"
    operator = "operator"
    admin = "admin"
    scim = "scim"
    gateway = "gateway"


_RANK = {Role.viewer: 1, Role.operator: 2, Role.admin: 3}


def rank(role: Role) -> int:
    """Its place on the ladder viewer < operator < admin; scim and gateway stand apart (0)."""
    return _RANK.get(role, 0)


def role_allows(role: str, needed: Role) -> bool:
    """Whether a token of `role` may do what needs `needed`. SCIM and gateway tokens stand apart from
    the ladder: a SCIM endpoint takes a scim token only; a gateway endpoint a gateway or admin token."""
    if needed is Role.scim:
        return role == Role.scim.value
    if needed is Role.gateway:
        return role in (Role.gateway.value, Role.admin.value)
    try:
        held = rank(Role(role))
    except ValueError:
        return False
    return held >= _RANK[needed]
