"""SlurmTarget: the Slurm accounting target behind the common protocol (sup/targets/base.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from sqlalchemy import Engine

from sup.config import Settings, SlurmSettings
from sup.domain.desired import DesiredState
from sup.store.session import make_engine
from sup.targets.base import REPORT, ApplyReport, Change, ObserveError, TargetError
from sup.targets.slurm import parse
from sup.targets.slurm.apply import Applier
from sup.targets.slurm.desired import build
from sup.targets.slurm.diff import plan
from sup.targets.slurm.lock import slurmdbd_address, writer_lock
from sup.targets.slurm.model import ClusterState, Observed
from sup.targets.slurm.sacctmgr import Sacctmgr


class SlurmTarget:
    """Slurm accounts, users, associations, coordinators and admin levels, through sacctmgr."""

    name: ClassVar[str] = "slurm"

    def __init__(self, settings: Settings, *, sacctmgr: Sacctmgr | None = None) -> None:
        if settings.slurm is None:
            raise TargetError("the slurm target is not configured (settings section slurm)")
        self.settings = settings
        self.config: SlurmSettings = settings.slurm
        self.sacctmgr = sacctmgr or Sacctmgr(self.config.sacctmgr, self.config.command_timeout)
        self.address = slurmdbd_address(self.config.slurmdbd, self.sacctmgr.env)
        self._engine: Engine | None = None

    # --- observe -----------------------------------------------------------------------------------

    def observe(self) -> Observed:
        """Bulk reads: the clusters, then per cluster its associations and default accounts, then the
        accounts (texts, coordinators) and users (AdminLevel). Any failed or odd read raises."""
        run = self.sacctmgr
        registered = parse.clusters(run.show("cluster", parse.CLUSTER_FIELDS))
        clusters = {}
        for cluster in self.config.all_clusters():
            if cluster not in registered:
                raise ObserveError(
                    f"cluster {cluster!r} is not registered in slurmdbd {self.address} "
                    f"(known: {', '.join(sorted(registered)) or 'none'}); register it with "
                    f"`sacctmgr add cluster {cluster}` or fix slurm.cluster/slurm.clusters"
                )
            where = [f"Cluster={cluster}"]
            state = ClusterState(cluster)
            for row in parse.associations(
                run.show("association", parse.ASSOCIATION_FIELDS, where=where), cluster
            ):
                if row.user:
                    state.users[row.key] = row
                else:
                    state.accounts[row.account] = row
            text = run.show("user", parse.DEFAULTS_FIELDS, where=where, extra=["withassoc"])
            state.defaults = parse.defaults(text, cluster)
            clusters[cluster] = state
        accounts = parse.accounts(run.show("account", parse.ACCOUNT_FIELDS, extra=["withcoord"]))
        levels = parse.admin_levels(run.show("user", parse.USER_FIELDS))
        return Observed(clusters=clusters, accounts=accounts, admin_levels=levels)

    # --- diff --------------------------------------------------------------------------------------

    def diff(self, desired: DesiredState, observed: Observed) -> list[Change]:
        return plan(build(desired, self.config), observed)

    # --- apply -------------------------------------------------------------------------------------

    def apply(self, changes: Sequence[Change]) -> ApplyReport:
        if all(change.action == REPORT for change in changes):
            return ApplyReport()
        applier = Applier(self.sacctmgr, self.config.chunk_size, self.observe)
        with writer_lock(self._store_engine(), self.config.lock_dir, self.address, self.config.lock_timeout):
            return applier.run(changes)

    def _store_engine(self) -> Engine:
        """The store's engine, for the cross-replica lock (the planner does not hand us one)."""
        if self._engine is None:
            self._engine = (
                make_engine(self.settings.database_url, pool_size=1, max_overflow=1)
                if self.settings.database_url.startswith("postgresql")
                else make_engine(self.settings.database_url)
            )
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
