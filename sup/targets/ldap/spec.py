"""The LDAP target's spec: light to import (the settings model only); ldap3 loads when it is opened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sup.domain.desired import DesiredState
from sup.targets.adoption import Adoption
from sup.targets.base import Scope
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


# More groups than this in one scope (a bulk change): one full read is cheaper than the scoped one.
MAX_SCOPED_GROUPS = 200


def can_scope(settings: LdapSettings, scope: Scope, desired: DesiredState) -> bool:
    """Whether a pass may read and plan only the scope's users and groups (scoped.py): not when it
    names an admin group (its sudoRole is the full pass's), nor too many groups. Settings changes
    take effect with the full pass a reconciler starts with (and every scheduled one)."""
    if scope.groups & set(settings.admin_groups):
        return False
    return len(scope.groups) <= MAX_SCOPED_GROUPS


SPEC: TargetSpec[LdapSettings] = TargetSpec(
    name="ldap",
    settings_model=LdapSettings,
    open=_open,
    adopt=_adopt,
    can_scope=can_scope,
    privileged_groups=_privileged_groups,
    provides=frozenset({POSIX_IDENTITY}),
)
