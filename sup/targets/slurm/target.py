"""SlurmTarget: the Slurm accounting target behind the common protocol (sup/targets/base.py)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

from sup.domain.desired import DesiredState
from sup.targets.base import REPORT, ApplyReport, ObserveError, Scope
from sup.targets.slurm import parse
from sup.targets.slurm.apply import Applier
from sup.targets.slurm.desired import build
from sup.targets.slurm.diff import plan
from sup.targets.slurm.jobs import users_with_jobs
from sup.targets.slurm.lock import slurmdbd_address, writer_lock
from sup.targets.slurm.model import ClusterState, Observed, SlurmChange
from sup.targets.slurm.sacctmgr import Sacctmgr
from sup.targets.slurm.settings import SlurmSettings
from sup.targets.spec import TargetContext


class SlurmTarget:
    """Slurm accounts, users, associations, coordinators and admin levels, through sacctmgr.

    It always reads everything (its spec cannot scope): one `sacctmgr show` per kind is as cheap as
    a few.
    """

    name: ClassVar[str] = "slurm"

    def __init__(self, context: TargetContext[SlurmSettings], *, sacctmgr: Sacctmgr | None = None) -> None:
        self.context = context
        self.config: SlurmSettings = context.settings
        self.sacctmgr = sacctmgr or Sacctmgr(self.config.sacctmgr, self.config.command_timeout)
        self.address = slurmdbd_address(self.config.slurmdbd, self.sacctmgr.env)

    # --- observe -----------------------------------------------------------------------------------

    def observe(self, scope: Scope | None = None) -> Observed:
        """Bulk reads, run side by side (reads are safe in parallel; each is mostly waiting on
        slurmdbd round trips): the registered clusters, the accounts with their coordinators, and
        per cluster its associations and its users (default account there, AdminLevel). Any failed
        or unexpected read raises ObserveError: nothing is decided from part of a picture."""
        run = self.sacctmgr
        clusters = self.config.all_clusters()
        with ThreadPoolExecutor(max_workers=min(8, 2 + 2 * len(clusters))) as pool:
            registered = pool.submit(run.show, "cluster", parse.CLUSTER_FIELDS)
            accounts = pool.submit(run.show, "account", parse.ACCOUNT_FIELDS, extra=["withcoord"])
            per_cluster = {
                cluster: (
                    pool.submit(
                        run.show, "association", parse.ASSOCIATION_FIELDS, where=[f"Cluster={cluster}"]
                    ),
                    pool.submit(run.show, "user", parse.USER_FIELDS, where=[f"Cluster={cluster}"]),
                )
                for cluster in clusters
            }
            known = parse.clusters(registered.result())
            missing = [c for c in clusters if c not in known]
            if missing:
                raise ObserveError(
                    f"cluster {missing[0]!r} is not registered in slurmdbd {self.address} "
                    f"(known: {', '.join(sorted(known)) or 'none'}); register it with "
                    f"`sacctmgr add cluster {missing[0]}` or fix slurm.cluster/slurm.clusters"
                )
            command = self.config.running_jobs_command
            running = None
            if command and self.config.offboarding == "staged":
                running = pool.submit(
                    users_with_jobs, command, self.sacctmgr.env, self.config.command_timeout
                )
            states = {}
            levels: dict[str, str] = {}
            for cluster, (associations, users) in per_cluster.items():
                state = ClusterState(cluster)
                for row in parse.associations(associations.result(), cluster):
                    if row.user:
                        state.users[row.key] = row
                    else:
                        state.accounts[row.account] = row
                state.defaults, levels = parse.users(users.result())
                states[cluster] = state
            return Observed(
                clusters=states,
                accounts=parse.accounts(accounts.result()),
                admin_levels=levels,
                running=running.result() if running is not None else None,
            )

    # --- diff --------------------------------------------------------------------------------------

    def diff(
        self, desired: DesiredState, observed: Observed, scope: Scope | None = None
    ) -> list[SlurmChange]:
        return plan(build(desired, self.config, self.context.clock()), observed)

    # --- apply -------------------------------------------------------------------------------------

    def apply(self, changes: Sequence[SlurmChange]) -> ApplyReport:
        if all(change.action == REPORT for change in changes):
            return ApplyReport()
        applier = Applier(self.sacctmgr, self.config.chunk_size, self.observe)
        with writer_lock(self.context.lock, self.config.lock_dir, self.address, self.config.lock_timeout):
            return applier.run(changes)

    def close(self) -> None:
        pass
