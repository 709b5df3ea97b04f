"""Fixtures for SUP's side of the SSH gateway: a site with the Kubernetes target and a `gateway`
section (on SQLite and PostgreSQL, as tests/api), and the Kubernetes wake replaced by a recorder."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from sup.config import Settings
from sup.targets.kube import wake as kube_wake
from sup.targets.kube.settings import KubeSettings

NAMESPACE = "logins"


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        kube={"namespace": NAMESPACE, "kubeconfig": "/nonexistent", "group_pods": ["physics"]},
        gateway={"idle_seconds": 600},
    )


@dataclass
class FakeCluster:
    """The StatefulSets' replicas (one unless a test says otherwise, as a pass renders them awake)
    and what a wake wrote: like the real wake, it writes only to a StatefulSet not at one."""

    replicas: dict[str, int] = field(default_factory=dict)
    writes: list[str] = field(default_factory=list)

    def wake_login(self, settings: KubeSettings, kind: str, name: str) -> bool:
        workload = ("login-" if kind == "user" else "group-") + name
        if self.replicas.get(workload, 1) == 1:
            return False
        self.replicas[workload] = 1
        self.writes.append(workload)
        return True


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster()
    monkeypatch.setattr(kube_wake, "wake_login", fake.wake_login)
    return fake
