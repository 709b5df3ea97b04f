"""The Slurm target's spec: light to import (the settings model only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sup.targets.adoption import Adoption
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


# An association makes slurmctld look the user up; a lookup that fails too early is cached and their
# jobs are rejected: a user's first association waits for their POSIX identity.
SPEC: TargetSpec[SlurmSettings] = TargetSpec(
    name="slurm",
    settings_model=SlurmSettings,
    open=_open,
    adopt=_adopt,
    privileged_groups=_privileged_groups,
    needs=frozenset({POSIX_IDENTITY}),
)
