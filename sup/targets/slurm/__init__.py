"""The Slurm accounting target: accounts, users, associations, coordinators and admin levels in
slurmdbd, written through sacctmgr in batches, one writer per slurmdbd at a time.

Modules: sacctmgr (running the command, classifying outcomes), parse (reading `show` output),
model (what was observed; attribute values and how they compare), desired (what Slurm should hold),
diff (pure: desired vs observed -> Changes), scoped (a pass after writes: only the named users'
rows and changes), apply (batches, order, verification), lock (serialized
writes), target (the SlurmTarget class), settings (SlurmSettings, settings key `slurm`), spec
(SPEC, what the registry lists), adopt (`sup import --from-slurm`, the spec's adopt hook).

Public surface: SPEC, SlurmSettings, SlurmTarget (imported lazily).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sup.targets.slurm.settings import SlurmSettings
from sup.targets.slurm.spec import SPEC

if TYPE_CHECKING:
    from sup.targets.slurm.target import SlurmTarget

__all__ = ["SPEC", "SlurmSettings", "SlurmTarget"]


def __getattr__(name: str) -> Any:
    if name == "SlurmTarget":
        from sup.targets.slurm.target import SlurmTarget

        return SlurmTarget
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
