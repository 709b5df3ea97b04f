"""SlurmTarget: the Slurm accounting target behind the common protocol (sup/targets/base.py)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ClassVar

from sup.domain.desired import DesiredState
from sup.targets.base import REPORT, ApplyReport, ObserveError, Scope
from sup.targets.slurm import parse, scoped
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

    It reads everything (one `sacctmgr show` per kind), or with a scope (a pass after writes, when
    the spec's `can_scope` allows it) only the scope's users' rows and the accounts' (scoped.py).
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
        slurmdbd round trips): the registered clusters, the accounts with their coordinators, every
        user's AdminLevel, the QoS defined, and per cluster its associations and its users' default
        associations. Any failed
        or unexpected read raises ObserveError: nothing is decided from part of a picture.

        With a scope: per cluster the accounts' own rows and the scope's users' associations and
        Slurm users only (scoped.py)."""
        run = self.sacctmgr
        clusters = self.config.all_clusters()
        users = sorted(scope.users) if scope is not None else None
        named = frozenset(users or ())

        def reads(cluster: str) -> tuple[list[Future[str]], Future[str] | None]:
            """The association reads of a cluster and its users' defaults read (None: nobody to
            read): a full pass reads the default associations, a scoped one its users' `show user`."""
            if users is None:
                where = [f"Cluster={cluster}"]
                return (
                    [pool.submit(run.show, "association", parse.ASSOCIATION_FIELDS, where=where)],
                    pool.submit(
                        run.show, "association", parse.DEFAULT_FIELDS, where=[*where, parse.ONLY_DEFAULTS]
                    ),
                )
            found = [
                pool.submit(
                    run.show, "association", parse.ASSOCIATION_FIELDS, where=scoped.account_rows(cluster)
                )
            ]
            if not users:
                return found, None
            where = scoped.where_users(cluster, users)
            found.append(pool.submit(run.show, "association", parse.ASSOCIATION_FIELDS, where=where))
            where = scoped.where_names(cluster, users)
            return found, pool.submit(run.show, "user", parse.USER_FIELDS, where=where)

        with ThreadPoolExecutor(max_workers=min(8, 2 + 3 * len(clusters))) as pool:
            registered = pool.submit(run.show, "cluster", parse.CLUSTER_FIELDS)
            everyone = pool.submit(run.show, "user", parse.LEVEL_FIELDS) if users is None else None
            # The QoS accounts may name: a full pass checks them before it plans (a scoped one
            # plans no account).
            qos = pool.submit(run.show, "qos", parse.QOS_FIELDS) if users is None else None
            accounts = pool.submit(run.show, "account", parse.ACCOUNT_FIELDS, extra=["withcoord"])
            per_cluster = {cluster: reads(cluster) for cluster in clusters}
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
            for cluster, (associations, slurm_users) in per_cluster.items():
                state = ClusterState(cluster)
                for read in associations:
                    for row in parse.associations(read.result(), cluster):
                        if row.user:
                            if users is None or row.user in named:  # a scoped read holds no one else
                                state.users[row.key] = row
                        else:
                            state.accounts[row.account] = row
                if slurm_users is not None and users is None:  # a full pass: default associations
                    state.defaults = parse.default_accounts(slurm_users.result())
                elif slurm_users is not None:  # a scoped pass: its users' `show user`
                    state.defaults, levels = parse.users(slurm_users.result())
                states[cluster] = state
            if everyone is not None:
                levels = parse.admin_levels(everyone.result())
            return Observed(
                clusters=states,
                accounts=parse.accounts(accounts.result()),
                admin_levels=levels,
                running=running.result() if running is not None else None,
                qos=parse.qos_names(qos.result()) if qos is not None else None,
            )

    # --- diff --------------------------------------------------------------------------------------

    def diff(
        self, desired: DesiredState, observed: Observed, scope: Scope | None = None
    ) -> list[SlurmChange]:
        """With a scope: the scope's users' changes only (scoped.py)."""
        if scope is None:
            return plan(build(desired, self.config, self.context.clock()), observed)
        narrowed = build(scoped.narrow(desired, scope), self.config, self.context.clock())
        return scoped.owned(plan(narrowed, observed), scope)

    # --- apply -------------------------------------------------------------------------------------

    def apply(self, changes: Sequence[SlurmChange]) -> ApplyReport:
        if all(change.action == REPORT for change in changes):
            return ApplyReport()
        applier = Applier(self.sacctmgr, self.config.chunk_size, self.observe)
        with writer_lock(self.context.lock, self.config.lock_dir, self.address, self.config.lock_timeout):
            return applier.run(changes)

    def close(self) -> None:
        pass
