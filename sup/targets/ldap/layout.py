"""The shape of the directory SUP writes: where entries go, which classes they have, what SUP owns.

Everything the pure parts (entries.py, diff.py) need from the settings, as one immutable value, so
they can be tested without settings files or a server.
"""

from __future__ import annotations

from dataclasses import dataclass

from sup.targets.ldap import dn as dnlib
from sup.targets.ldap.settings import LdapSettings

RFC2307BIS = "rfc2307bis"
RFC2307 = "rfc2307"

USER_CLASSES: tuple[str, ...] = ("inetOrgPerson", "posixAccount", "ldapPublicKey")
# The attributes of a user entry that SUP owns: it sets them and removes values it did not set.
USER_ATTRIBUTES: tuple[str, ...] = (
    "uid", "cn", "sn", "givenName", "mail", "uidNumber", "gidNumber", "homeDirectory", "loginShell",
    "gecos", "sshPublicKey",
)  # fmt: skip
GROUP_ATTRIBUTES: tuple[str, ...] = ("cn", "gidNumber", "description")
SUDO_CLASSES: tuple[str, ...] = ("sudoRole",)
SUDO_ATTRIBUTES: tuple[str, ...] = (
    "cn", "sudoUser", "sudoHost", "sudoCommand", "sudoRunAsUser", "sudoOption", "description",
)  # fmt: skip
OU_CLASSES: tuple[str, ...] = ("organizationalUnit",)

# Kinds of entries, as they appear in Change.kind.
USER = "user"
GROUP = "group"
SUDO_ROLE = "sudo_role"
OU = "ou"
ENTRY = "entry"  # something else found in SUP's OUs


@dataclass(frozen=True)
class Layout:
    base_dn: str
    users_dn: str
    groups_dn: str
    sudoers_dn: str
    schema: str = RFC2307BIS
    group_class: str = "groupOfNames"
    empty_group_member: str | None = "cn=empty-membership-placeholder"
    unknown_entries: str = "delete"
    deactivated: str = "lock"
    admin_groups: tuple[str, ...] = ()
    sudo_commands: tuple[str, ...] = ("ALL",)
    sudo_hosts: tuple[str, ...] = ("ALL",)
    sudo_options: tuple[str, ...] = ("!authenticate",)

    @classmethod
    def from_settings(cls, ldap: LdapSettings) -> Layout:
        containers = ldap.containers()
        return cls(
            base_dn=ldap.base_dn,
            users_dn=containers["users_dn"],
            groups_dn=containers["groups_dn"],
            sudoers_dn=containers["sudoers_dn"],
            schema=ldap.schema_,
            group_class=ldap.group_class,
            empty_group_member=ldap.empty_group_member,
            unknown_entries=ldap.unknown_entries,
            deactivated=ldap.deactivated,
            admin_groups=tuple(ldap.admin_groups),
            sudo_commands=tuple(ldap.sudo_commands),
            sudo_hosts=tuple(ldap.sudo_hosts),
            sudo_options=tuple(ldap.sudo_options),
        )

    # --- names -------------------------------------------------------------------------------------

    def user_dn(self, username: str) -> str:
        return dnlib.child_dn("uid", username, self.users_dn)

    def group_dn(self, name: str) -> str:
        return dnlib.child_dn("cn", name, self.groups_dn)

    def sudo_dn(self, group: str) -> str:
        return dnlib.child_dn("cn", group, self.sudoers_dn)

    @property
    def containers(self) -> tuple[str, str, str]:
        return (self.users_dn, self.groups_dn, self.sudoers_dn)

    @property
    def normalized_containers(self) -> tuple[str, str, str]:
        users, groups, sudoers = (dnlib.normalize(c) for c in self.containers)
        return (users, groups, sudoers)

    # --- schema ------------------------------------------------------------------------------------

    @property
    def bis(self) -> bool:
        return self.schema == RFC2307BIS

    @property
    def group_classes(self) -> tuple[str, ...]:
        return (self.group_class, "posixGroup") if self.bis else ("posixGroup",)

    @property
    def member_attribute(self) -> str:
        """rfc2307bis names members by DN (`member`), rfc2307 by uid (`memberUid`)."""
        return "member" if self.bis else "memberUid"

    @property
    def placeholder(self) -> str | None:
        """The member value an empty group holds, if its structural class requires one."""
        return self.empty_group_member if self.bis else None

    def member_value(self, username: str) -> str:
        return self.user_dn(username) if self.bis else username

    def username_of_member(self, value: str) -> str | None:
        """The username a membership value names, if it names an entry in SUP's users OU."""
        if not self.bis:
            return value
        try:
            normal = dnlib.normalize(value)
            if dnlib.parent_of(normal) != dnlib.normalize(self.users_dn):
                return None
            ((attribute, name),) = dnlib.first_rdn(value)
        except (dnlib.InvalidDn, ValueError):
            return None
        return name if attribute == "uid" else None
