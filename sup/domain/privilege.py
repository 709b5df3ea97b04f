"""Privileged groups: who may create or fill them.

Membership of some groups grants power on the cluster: a target's admin groups (the LDAP target's
`admin_groups` get a sudoRole, the Slurm target's `admin_groups` an AdminLevel) and the coordinator
groups of Slurm accounts. A source that anyone with an IdP account can influence (a SCIM connection,
a Keycloak realm) must not be able to create such a group or add people to it, unless the settings
say so: `sources.privileged_group_writers` lists the sources that may (by default `api` and
`import`, i.e. an operator). Removing members or deleting such a group takes power away and stays
allowed to whoever may write the group.

The names come from the settings (each target's spec says which of its groups are privileged) and
the store (coordinator groups); this module only decides.
"""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_WRITERS = ("api", "import")


def may_write_privileged(writers: Sequence[str], source: str) -> bool:
    """Whether `source` may create or fill a privileged group; `scim:*` in `writers` stands for
    every SCIM connection (as in sources.precedence)."""
    return any(w == source or (w.endswith(":*") and source.startswith(w[:-1])) for w in writers)


def refusal(name: str, source: str, what: str) -> str:
    """The message of a refused write: `what` is e.g. "create" or "add members to"."""
    return (
        f"group {name!r} is privileged (an admin or coordinator group); source {source!r} may not "
        f"{what} it (setting sources.privileged_group_writers lists the sources that may)"
    )
