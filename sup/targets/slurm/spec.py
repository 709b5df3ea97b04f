"""The Slurm target's spec: light to import (the settings model only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sup.domain.desired import DesiredState
from sup.targets.adoption import Adoption
from sup.targets.base import Scope
from sup.targets.slurm.settings import SlurmSettings
from sup.targets.spec import POSIX_IDENTITY, TargetContext, TargetSpec

if TYPE_CHECKING:
    from sup.targets.slurm.target import SlurmTarget


def _open(context: TargetContext[SlurmSettings]) -> SlurmTarget:
    from sup.targets.slurm.target import SlurmTarget

    return SlurmTarget(context)


def _adopt(context: TargetContext[SlurmSettings], adoption: Adoption) -> None:
    from sup.targets.slurm.adopt import adopt

    adopt(context, adoption)


def _privileged_groups(settings: SlurmSettings) -> frozenset[str]:
    """The admin groups: their members get an AdminLevel. (Accounts' coordinator groups are in the
    store, not the settings: the groups service adds them.)"""
    return frozenset(settings.admin_groups)


def can_scope(settings: SlurmSettings, scope: Scope, desired: DesiredState) -> bool:
    """Whether a pass may read and plan only the scope's users (scoped.py): not after an account
    changed (its limits, parent or bound group concern all its members; the outbox names the
    account). Membership changes name the users they move, so a scope of users covers them. Settings
    changes take effect with the full pass a reconciler starts with (and every scheduled one)."""
    return not scope.accounts


# An association makes slurmctld look the user up; a lookup that fails too early is cached and their
# jobs are rejected: a user's first association waits for their POSIX identity.
SPEC: TargetSpec[SlurmSettings] = TargetSpec(
    name="slurm",
    settings_model=SlurmSettings,
    open=_open,
    adopt=_adopt,
    can_scope=can_scope,
    privileged_groups=_privileged_groups,
    needs=frozenset({POSIX_IDENTITY}),
)
