"""The LDAP target's settings model (settings key `ldap`, env SUP_LDAP__*)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from sup.common.sections import Section
from sup.domain.posix import check_name
from sup.targets.ldap.dn import InvalidDn, is_under, normalize


class LdapSettings(Section):
    """The LDAP target (settings key `ldap`): where SUP writes, what it owns there, how it connects.

    SUP owns everything below `users_dn`, `groups_dn` and `sudoers_dn`: they must lie below
    `base_dn`, and none inside another, since SUP deletes what it does not know below them (unless
    `unknown_entries: report`), so they must be its own. Everything else in the directory is only
    read, to find uid, uidNumber, group name and gidNumber collisions. docs/ldap.md.
    """

    url: str = Field(
        description="ldap://HOST[:PORT] or ldaps://HOST[:PORT]", examples=["ldaps://ldap.example.org"]
    )
    bind_dn: str = Field(
        description="who SUP binds as: writes SUP's OUs, reads below base_dn, with no size limit",
        examples=["cn=sup,ou=services,dc=example,dc=org"],
    )
    bind_password: SecretStr = Field(description="bind_dn's password")
    base_dn: str = Field(
        description="the directory's base: SUP reads below it for collisions", examples=["dc=example,dc=org"]
    )
    schema_: Literal["rfc2307bis", "rfc2307"] = Field(
        "rfc2307bis",
        alias="schema",
        description="rfc2307bis: groups hold their members' DNs (member); rfc2307: their names (memberUid)",
    )
    users_dn: str | None = Field(None, description="the OU of people's entries; default ou=people,BASE")
    groups_dn: str | None = Field(None, description="the OU of groups' entries; default ou=groups,BASE")
    sudoers_dn: str | None = Field(None, description="the OU of sudoRoles; default ou=SUDOers,BASE")
    group_class: str = Field(
        "groupOfNames",
        pattern=r"^[A-Za-z][A-Za-z0-9-]*$",
        description="rfc2307bis: the structural object class beside posixGroup (must allow `member`)",
    )
    empty_group_member: str | None = Field(
        "cn=empty-membership-placeholder",
        description="rfc2307bis: the member DN an empty group holds, because groupOfNames needs one "
        "(a DN that is no entry, outside every search base); null (env: empty) with a group_class whose "
        "member is optional",
    )
    unknown_entries: Literal["delete", "report"] = Field(
        "delete", description="entries below SUP's OUs that the store does not know: delete them, or report"
    )
    deactivated: Literal["lock", "delete"] = Field(
        "lock",
        description="a deactivated user's entry: lock keeps it with no keys, no groups, the nologin shell; "
        "delete removes it",
    )
    admin_groups: list[str] = Field(
        default_factory=list, description="groups whose members get a sudoRole (sudo through sssd)"
    )
    sudo_commands: list[str] = Field(
        default_factory=lambda: ["ALL"], min_length=1, description="sudoCommand of those sudoRoles"
    )
    sudo_hosts: list[str] = Field(
        default_factory=lambda: ["ALL"], min_length=1, description="sudoHost of those sudoRoles"
    )
    sudo_options: list[str] = Field(
        default_factory=lambda: ["!authenticate"],
        description="sudoOption of those sudoRoles; SUP's users log in with SSH keys and have no password "
        "to type",
    )
    page_size: int = Field(500, ge=1, le=100000, description="entries per page of a paged search")
    pipeline_depth: int = Field(64, ge=1, le=10000, description="writes in flight at once (1: one by one)")
    timeout_seconds: int = Field(30, ge=1, le=3600, description="connect and per-operation timeout")
    start_tls: bool = Field(False, description="StartTLS on an ldap:// URL")
    ca_file: str | None = Field(
        None, description="CA certificates (PEM) that sign the server's; default: the system's"
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.fullmatch(r"ldaps?://[^/?#\s]+/?", value):
            raise ValueError("must be ldap://HOST[:PORT] or ldaps://HOST[:PORT]")
        return value

    @field_validator("empty_group_member", mode="before")
    @classmethod
    def _no_placeholder(cls, value: object) -> object:
        return None if value == "" else value  # SUP_LDAP__EMPTY_GROUP_MEMBER= (empty): none

    @field_validator("admin_groups")
    @classmethod
    def _admin_groups(cls, value: list[str]) -> list[str]:
        for name in value:
            check_name(name, kind="admin group")
        return value

    @field_validator("sudo_commands", "sudo_hosts", "sudo_options")
    @classmethod
    def _sudo_values(cls, value: list[str]) -> list[str]:
        for item in value:
            if not item.strip() or not item.isascii() or not item.isprintable():
                raise ValueError(f"{item!r} must be printable ASCII (sudo's LDAP schema stores IA5 strings)")
        return value

    @model_validator(mode="after")
    def _directory_shape(self) -> LdapSettings:
        if self.start_tls and self.url.startswith("ldaps://"):
            raise ValueError("start_tls applies to ldap:// URLs; an ldaps:// URL is TLS already")
        names = {"base_dn": self.base_dn, "bind_dn": self.bind_dn, **self.containers()}
        if self.empty_group_member is not None:
            names["empty_group_member"] = self.empty_group_member
        normal = {}
        for key, dn in names.items():
            try:
                normal[key] = normalize(dn)
            except InvalidDn as exc:
                raise ValueError(f"{key} is not a distinguished name: {exc}") from None
            if not normal[key]:
                raise ValueError(f"{key} must not be empty")
        containers = ("users_dn", "groups_dn", "sudoers_dn")
        for key in containers:
            if not is_under(normal[key], normal["base_dn"]):
                raise ValueError(f"{key} {names[key]} must lie below base_dn {self.base_dn}")
            for other in containers:
                if key != other and (normal[key] == normal[other] or is_under(normal[key], normal[other])):
                    raise ValueError(f"{key} and {other} must be different OUs, neither inside the other")
        return self

    def containers(self) -> dict[str, str]:
        """The DNs of the three OUs SUP owns, defaults filled in."""
        return {
            "users_dn": self.users_dn or f"ou=people,{self.base_dn}",
            "groups_dn": self.groups_dn or f"ou=groups,{self.base_dn}",
            "sudoers_dn": self.sudoers_dn or f"ou=SUDOers,{self.base_dn}",
        }
