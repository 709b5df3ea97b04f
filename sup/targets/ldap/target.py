"""LdapTarget: the LDAP target behind the common protocol (sup/targets/base.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from sup.config import Settings
from sup.domain.desired import DesiredState
from sup.targets.base import ApplyReport, Change, TargetError
from sup.targets.ldap.apply import apply_changes
from sup.targets.ldap.connection import LdapConnection
from sup.targets.ldap.diff import plan
from sup.targets.ldap.layout import Layout
from sup.targets.ldap.model import Observed
from sup.targets.ldap.observe import observe


class LdapTarget:
    """Users, groups and sudo rules in the directory sssd reads, exactly as the store says.

    Opening it binds (and fails with TargetError, saying why, if it cannot). `diff` is pure.
    """

    name: ClassVar[str] = "ldap"

    def __init__(self, settings: Settings) -> None:
        if settings.ldap is None:
            raise TargetError("the ldap target is not configured (settings key `ldap`)")
        self.settings = settings.ldap
        self.layout = Layout.from_settings(settings.ldap)
        self.connection = LdapConnection(settings.ldap)

    def observe(self) -> Observed:
        return observe(self.connection, self.layout)

    def diff(self, desired: DesiredState, observed: Observed) -> list[Change]:
        return plan(desired, observed, self.layout)

    def apply(self, changes: Sequence[Change]) -> ApplyReport:
        return apply_changes(self.connection, self.layout, changes, self.settings.pipeline_depth)

    def close(self) -> None:
        self.connection.close()
