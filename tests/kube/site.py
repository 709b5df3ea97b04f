"""A site for Kubernetes tests: a store (SQLite), SUP settings pointing at a fresh namespace of a real
kube-apiserver, and what a test does (tests/support/site.py): change the store, plan and reconcile,
and here: look at the objects."""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.store.models import Group, User
from sup.targets.kube import KubeTarget
from sup.targets.kube.names import home_claim
from sup.targets.kube.watch import WatchCache
from sup.targets.spec import TargetContext
from tests.support.kubeapi import Admin, KubeApiServer, collection
from tests.support.site import TargetSite

PLURALS = {
    "pvc": "persistentvolumeclaims",
    "workload": "statefulsets",
    "service": "services",
    "network_policy": "networkpolicies",
    "login_config": "configmaps",
}


@dataclass
class Site(TargetSite[KubeTarget]):
    target: ClassVar[str] = "kube"
    server: KubeApiServer
    namespace: str
    settings: Settings
    sessions: sessionmaker[Session]
    kubeconfig: Path
    targets: list[KubeTarget] = field(default_factory=list)
    now: datetime.datetime | None = None  # a fixed clock for retention tests; None: the real one
    # before a pass, wait until the watch cache shows every object as a list does (hand edits made
    # just before it); False: the pass sees the cache as it is
    settle: bool = True

    def open_target(self, context: TargetContext[Any]) -> KubeTarget:
        now = self.now
        target = KubeTarget(replace(context, clock=lambda: now) if now is not None else context)
        if self.settle and target.watch is not None and target.watch.live():
            self.settle_watch(target.watch)
        return target

    def settle_watch(self, cache: WatchCache, timeout: float = 10.0) -> None:
        """Wait until the watch cache holds what the API server holds (hand edits are events that
        may still be on their way when a test starts the next pass)."""
        deadline = time.monotonic() + timeout
        want = self.versions()
        while cache.versions() != want:
            have = cache.versions()
            assert time.monotonic() < deadline, (
                "the watch cache does not catch up with the API server",
                {
                    k: (have.get(k), want.get(k))
                    for k in have.keys() | want.keys()
                    if have.get(k) != want.get(k)
                },
            )
            time.sleep(0.02)
            want = self.versions()

    def writes_of(self, target: KubeTarget) -> int:
        return target.client.writes

    def with_kube(self, **kube: Any) -> Site:
        """The same site with other kube settings (the namespace and kubeconfig stay)."""
        self.settings = self.with_settings(**kube)
        return self

    def home(self, username: str) -> str:
        """The name of the home claim SUP creates for this user (by their uid in the store)."""
        with self.sessions() as session:
            uid = session.scalar(select(User.uid_number).where(User.username == username))
        assert uid is not None, f"no user {username}"
        return home_claim(uid)

    def gid(self, group: str) -> int:
        with self.sessions() as session:
            gid = session.scalar(select(Group.gid_number).where(Group.name == group))
        assert gid is not None, f"no group {group}"
        return gid

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

    def versions(self) -> dict[tuple[str, str], str]:
        """(kind, name) -> resourceVersion of every object of the kinds SUP manages in the namespace,
        SUP's or not: the API server changes an object's resourceVersion with every write to it."""
        with self.admin() as admin:
            return {
                (kind, item["metadata"]["name"]): item["metadata"]["resourceVersion"]
                for kind in PLURALS
                for item in admin.items(self.path(kind))
            }
