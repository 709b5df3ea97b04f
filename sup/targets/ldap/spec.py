"""The LDAP target's spec: light to import (the settings model only); ldap3 loads when it is opened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sup.targets.adoption import Adoption
from sup.targets.ldap.settings import LdapSettings
from sup.targets.spec import POSIX_IDENTITY, TargetContext, TargetSpec

if TYPE_CHECKING:
    from sup.targets.ldap.target import LdapTarget


def _open(context: TargetContext[LdapSettings]) -> LdapTarget:
    from sup.targets.ldap.target import LdapTarget

    return LdapTarget(context)


def _adopt(context: TargetContext[LdapSettings], adoption: Adoption) -> None:
    from sup.targets.ldap.adopt import adopt

    adopt(context, adoption)


def _privileged_groups(settings: LdapSettings) -> frozenset[str]:
    """The admin groups: their members get a sudoRole."""
    return frozenset(settings.admin_groups)


SPEC: TargetSpec[LdapSettings] = TargetSpec(
    name="ldap",
    settings_model=LdapSettings,
    open=_open,
    adopt=_adopt,
    privileged_groups=_privileged_groups,
    provides=frozenset({POSIX_IDENTITY}),
)
