"""A site for Kubernetes tests: a store (SQLite), SUP settings pointing at a fresh namespace of a real
kube-apiserver, and what a test does: change the store, plan and reconcile, look at the objects."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.reconcile.planner import Pass, run_pass
from sup.store.models import TargetStatus
from sup.targets.base import Target
from sup.targets.kube import KubeTarget
from sup.targets.spec import TargetContext
from tests.support.cli import sup_env
from tests.support.kubeapi import Admin, KubeApiServer, collection
from tests.support.store_edits import StoreEdits

PLURALS = {
    "pvc": "persistentvolumeclaims",
    "workload": "statefulsets",
    "service": "services",
    "network_policy": "networkpolicies",
}


@dataclass
class Site(StoreEdits):
    server: KubeApiServer
    namespace: str
    settings: Settings
    sessions: sessionmaker[Session]
    kubeconfig: Path
    targets: list[KubeTarget] = field(default_factory=list)
    now: datetime.datetime | None = None  # a fixed clock for retention tests; None: the real one

    # --- the store -----------------------------------------------------------------------------------

    def statuses(self) -> dict[str, tuple[str, str | None]]:
        with self.sessions() as session:
            rows = session.scalars(select(TargetStatus).where(TargetStatus.target == "kube"))
            return {r.username: (r.state, r.last_error) for r in rows}

    def with_kube(self, **kube: Any) -> Site:
        """The same site with other kube settings (the namespace and kubeconfig stay)."""
        assert self.settings.kube is not None
        merged = {**self.settings.kube.model_dump(), **kube}
        self.settings = Settings(database_url=self.settings.database_url, kube=merged)
        return self

    def env(self, **extra: str) -> dict[str, str]:
        """The environment that gives the `sup` command this site's settings."""
        assert self.settings.kube is not None
        variables = {"SUP_DATABASE_URL": self.settings.database_url}
        for key, value in self.settings.kube.model_dump(exclude_none=True).items():
            text = json.dumps(value) if isinstance(value, list | dict | bool) else str(value)
            variables[f"SUP_KUBE__{key.upper()}"] = text
        return sup_env(**variables, **extra)

    # --- passes --------------------------------------------------------------------------------------

    def _open(self, name: str, context: TargetContext[Any]) -> Target[Any]:
        now = self.now
        target = KubeTarget(replace(context, clock=lambda: now) if now is not None else context)
        self.targets.append(target)
        return target

    def plan(self) -> Pass:
        return run_pass(self.settings, self.sessions, only=["kube"], opener=self._open)

    def reconcile(self, *, force: bool = False) -> Pass:
        return run_pass(
            self.settings, self.sessions, only=["kube"], apply=True, force=force, opener=self._open
        )

    @property
    def last_writes(self) -> int:
        return self.targets[-1].client.writes

    def converge(self) -> Pass:
        """Reconcile, and check that the pass after it has nothing left to do and writes nothing."""
        result = self.reconcile()
        assert result.ok, [
            (t.state, t.error, [(f.change.name, f.error) for f in t.failed]) for t in result.targets
        ]
        again = self.reconcile()
        assert again.changes == [], [c.as_json() for c in again.changes]
        assert self.last_writes == 0
        return result

    # --- the API server ------------------------------------------------------------------------------

    def admin(self) -> Admin:
        return self.server.admin()

    def path(self, kind: str, name: str = "") -> str:
        base = collection(self.namespace, PLURALS.get(kind, kind))
        return f"{base}/{name}" if name else base

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        with self.admin() as admin:
            return admin.get(self.path(kind, name))

    def names(self, kind: str) -> set[str]:
        """Names of every object of that kind in the namespace (SUP's or not)."""
        with self.admin() as admin:
            return {item["metadata"]["name"] for item in admin.items(self.path(kind))}

    def live_names(self, kind: str) -> set[str]:
        """The same, without objects that are being deleted (a PVC waits for its finalizer here)."""
        with self.admin() as admin:
            return {
                item["metadata"]["name"]
                for item in admin.items(self.path(kind))
                if not item["metadata"].get("deletionTimestamp")
            }
