"""A site for Slurm tests: a store (SQLite), SUP settings pointing at a cluster of its own in a real
slurmdbd, and what a test does (tests/support/site.py): change the store (Slurm accounts too), plan
and reconcile, and here: look at the accounting database as sacctmgr shows it."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.slurm_accounts.schemas import SlurmAccountCreate, SlurmAccountPatch
from sup.slurm_accounts.service import create_account, update_account
from sup.targets.slurm import SlurmTarget
from sup.targets.spec import TargetContext
from tests.conftest import ACTOR
from tests.slurm import helpers as h
from tests.support.site import TargetSite
from tests.support.slurmdbd import SlurmdbdServer


@dataclass
class Site(TargetSite[SlurmTarget]):
    target: ClassVar[str] = "slurm"
    slurmdbd: SlurmdbdServer
    cluster: str
    settings: Settings
    sessions: sessionmaker[Session]
    targets: list[SlurmTarget] = field(default_factory=list)
    clock: Callable[[], datetime.datetime] | None = None  # the targets' clock, when a test sets it

    def open_target(self, context: TargetContext[Any]) -> SlurmTarget:
        if self.clock is not None:
            context = dataclasses.replace(context, clock=self.clock)
        return SlurmTarget(context)

    def writes_of(self, target: SlurmTarget) -> int:
        return target.sacctmgr.writes

    # --- the store: Slurm accounts -------------------------------------------------------------------

    def add_account(self, name: str, **fields: Any) -> None:
        with self.sessions.begin() as session:
            create_account(session, ACTOR, SlurmAccountCreate(name=name, **fields))

    def update_account(self, name: str, **fields: Any) -> None:
        with self.sessions.begin() as session:
            update_account(session, ACTOR, name, SlurmAccountPatch(**fields))

    # --- slurmdbd ------------------------------------------------------------------------------------

    def sacctmgr(self, *args: str) -> str:
        """Run sacctmgr as an operator would (root, `-i`), on this site's slurmdbd."""
        return self.slurmdbd.sacctmgr(*args)

    def associations(self) -> set[tuple[str, str, str]]:
        """(account, user, partition) of every user association on the cluster, root's excepted."""
        return h.associations(self.slurmdbd, self.cluster)

    def accounts(self) -> dict[str, dict[str, str]]:
        """The account rows of the cluster: account -> {ParentName, Fairshare, QOS, ...}."""
        return h.accounts(self.slurmdbd, self.cluster)

    def rows(self) -> list[list[str]]:
        """Every association row of the cluster (accounts' and users'), with all the fields SUP sets."""
        where = ["where", f"cluster={self.cluster}"]
        return sorted(self.slurmdbd.show("association", *where, f"format={h.FIELDS}"))

    def transactions(self) -> int:
        """How many changes slurmdbd has recorded (its txn_table gets a row for every add, modify
        and remove sacctmgr makes, on any cluster)."""
        return int(self.slurmdbd.sql("SELECT COUNT(*) FROM txn_table;").strip())
