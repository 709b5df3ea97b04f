"""The registry of targets: adding a target is one line in SPECS (its package exports a TargetSpec).

The order is the order of plans, of adoption (`sup import --from-...`) and of /readyz.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sup.targets.kube.settings import KubeSettings
from sup.targets.kube.spec import SPEC as KUBE
from sup.targets.ldap.settings import LdapSettings
from sup.targets.ldap.spec import SPEC as LDAP
from sup.targets.slurm.settings import SlurmSettings
from sup.targets.slurm.spec import SPEC as SLURM
from sup.targets.spec import TargetSpec

SPECS: tuple[TargetSpec[Any], ...] = (LDAP, SLURM, KUBE)


class TargetSections:
    """The target sections as typed attributes of `Settings`, for type checkers only: at runtime
    Settings composes its sections from SPECS (sup/config), and a unit test checks that the two agree.
    A new target may add its line here to make `settings.<name>` typed; `settings.target_settings(SPEC)`
    is typed without it."""

    ldap: LdapSettings | None
    slurm: SlurmSettings | None
    kube: KubeSettings | None


TARGET_NAMES: tuple[str, ...] = tuple(spec.name for spec in SPECS)


def find(name: str, specs: Sequence[TargetSpec[Any]] = SPECS) -> TargetSpec[Any]:
    """The spec called `name`; ValueError naming the known targets if there is none."""
    for spec in specs:
        if spec.name == name:
            return spec
    raise ValueError(f"unknown target {name!r}; targets are {', '.join(s.name for s in specs)}")
