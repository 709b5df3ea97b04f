"""Permissions by group: members of an admin group may use sudo, through sssd's sudo provider.

Each admin group named in `ldap.admin_groups` gets one sudoRole entry (sudo's LDAP schema, see
sudoers.ldap(5) and sup/targets/ldap/schema/sudo.schema) below `ldap.sudoers_dn`, naming the group
as `%group`.
sssd serves it to sudo when nsswitch.conf says `sudoers: files sss` (see `sup sssd-config`).
"""

from __future__ import annotations

from sup.targets.ldap.layout import SUDO_CLASSES, SUDO_ROLE, Layout
from sup.targets.ldap.model import Wanted


def sudo_entry(group: str, layout: Layout) -> Wanted:
    """The sudoRole that lets the members of an admin group use sudo (sudoers.ldap(5))."""
    attributes = {
        "cn": (group,),
        "sudoUser": (f"%{group}",),
        "sudoHost": tuple(layout.sudo_hosts),
        "sudoCommand": tuple(layout.sudo_commands),
        "sudoRunAsUser": ("ALL",),
        "sudoOption": tuple(layout.sudo_options),
        "description": (f"Members of the SUP admin group {group}",),
    }
    return Wanted(SUDO_ROLE, group, layout.sudo_dn(group), None, SUDO_CLASSES, attributes)
