"""LdapTarget: the LDAP target behind the common protocol (sup/targets/base.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from sup.domain.desired import DesiredState
from sup.targets.base import ApplyReport, Scope
from sup.targets.ldap.apply import apply_changes
from sup.targets.ldap.connection import LdapConnection
from sup.targets.ldap.diff import plan
from sup.targets.ldap.layout import Layout
from sup.targets.ldap.model import LdapChange, Observed
from sup.targets.ldap.observe import observe
from sup.targets.ldap.scoped import observe_scope, plan_scoped
from sup.targets.ldap.settings import LdapSettings
from sup.targets.spec import TargetContext


class LdapTarget:
    """Users, groups and sudo rules in the directory sssd reads, exactly as the store says.

    Opening it binds (and fails with TargetError, saying why, if it cannot). `diff` is pure. It
    reads the whole of its OUs, or with a scope (a pass after writes, when the spec's `can_scope`
    allows it) only the scope's users and the groups around them (scoped.py).
    """

    name: ClassVar[str] = "ldap"

    def __init__(self, context: TargetContext[LdapSettings]) -> None:
        self.settings = context.settings
        self.layout = Layout.from_settings(self.settings)
        self.connection = LdapConnection(self.settings)

    def observe(self, scope: Scope | None = None) -> Observed:
        if scope is not None:
            return observe_scope(self.connection, self.layout, scope)
        return observe(self.connection, self.layout)

    def diff(self, desired: DesiredState, observed: Observed, scope: Scope | None = None) -> list[LdapChange]:
        if scope is not None:
            return plan_scoped(desired, observed, self.layout, scope)
        return plan(desired, observed, self.layout)

    def apply(self, changes: Sequence[LdapChange]) -> ApplyReport:
        return apply_changes(self.connection, self.layout, changes, self.settings.pipeline_depth)

    def close(self) -> None:
        self.connection.close()
