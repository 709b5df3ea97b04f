"""The Slurm accounting target: accounts, users, associations, coordinators and admin levels in
slurmdbd, written through sacctmgr in batches, one writer per slurmdbd at a time.

Modules: sacctmgr (running the command, classifying outcomes), parse (reading `show` output),
model (what was observed; attribute values and how they compare), desired (what Slurm should hold),
diff (pure: desired vs observed -> Changes), apply (batches, order, verification), lock (serialized
writes), target (the SlurmTarget class).
"""

from sup.targets.slurm.target import SlurmTarget

__all__ = ["SlurmTarget"]
