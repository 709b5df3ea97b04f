"""LdapTarget: the LDAP target behind the common protocol (sup/targets/base.py)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import ClassVar

from sup.domain.desired import DesiredState
from sup.targets.base import ApplyReport, Scope
from sup.targets.ldap import unchanged
from sup.targets.ldap.apply import apply_changes
from sup.targets.ldap.connection import LdapConnection
from sup.targets.ldap.diff import plan
from sup.targets.ldap.layout import Layout
from sup.targets.ldap.model import LdapChange, Observed
from sup.targets.ldap.observe import observe, read_versions
from sup.targets.ldap.scoped import observe_scope, plan_scoped
from sup.targets.ldap.settings import LdapSettings
from sup.targets.spec import TargetContext


class LdapTarget:
    """Users, groups and sudo rules in the directory sssd reads, exactly as the store says.

    Opening it binds (and fails with TargetError, saying why, if it cannot). `diff` plans from what
    `observe` read. A full observe reads the whole of SUP's OUs, or only their entries' versions when
    they are those of the last full read that planned nothing (a hollow Observed, unchanged.py);
    `diff` then reads in full itself if the desired state changed. With a scope (a pass after
    writes, when the spec's `can_scope` allows it) only the scope's users and the groups around
    them are read (scoped.py).
    """

    name: ClassVar[str] = "ldap"

    def __init__(self, context: TargetContext[LdapSettings]) -> None:
        self.settings = context.settings
        self.layout = Layout.from_settings(self.settings)
        self.connection = LdapConnection(self.settings)
        self._key: unchanged.Key = (self.settings.url, self.settings.bind_dn, self.layout.base_dn)
        self._read_at = 0.0

    def observe(self, scope: Scope | None = None) -> Observed:
        if scope is not None:
            return observe_scope(self.connection, self.layout, scope)
        kept = unchanged.kept_versions(self._key, self.layout)
        if kept is not None:
            versions = read_versions(self.connection, self.layout)
            if versions == kept:
                return Observed(frozenset(), {}, (), versions=versions, hollow=True)
        return self._read_in_full()

    def _read_in_full(self) -> Observed:
        self._read_at = time.monotonic()
        return observe(self.connection, self.layout)

    def diff(self, desired: DesiredState, observed: Observed, scope: Scope | None = None) -> list[LdapChange]:
        if scope is not None:
            return plan_scoped(desired, observed, self.layout, scope)
        if unchanged.nothing_again(self._key, observed, self.layout, desired):
            return []  # the last full read planned nothing from these very inputs (unchanged.py)
        if observed.hollow:  # the desired state changed: read the entries after all
            observed = self._read_in_full()
        changes = plan(desired, observed, self.layout)
        unchanged.remember(self._key, observed, self.layout, desired, changes, self._read_at)
        return changes

    def apply(self, changes: Sequence[LdapChange]) -> ApplyReport:
        if changes:
            unchanged.forget(self._key)
        return apply_changes(self.connection, self.layout, changes, self.settings.pipeline_depth)

    def close(self) -> None:
        self.connection.close()
