"""Fixtures for the Kubernetes target: one real kube-apiserver (+ etcd) for the session, a fresh
namespace per test (labelled pod-security enforce=restricted), a SQLite store per test, and a Site
tying them together with SUP's settings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.targets.kube import watch
from tests.kube.site import Site
from tests.support.kubeapi import KubeApiServer


@pytest.fixture(autouse=True)
def watch_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test of a Kubernetes site runs its passes after the first from the watch cache (as a
    long-running `sup serve` does from its second pass on), and stops its watches when it ends."""
    monkeypatch.setattr(watch, "START_AFTER", 0)
    yield
    watch.reset()


@pytest.fixture
def make_site(
    kubeapi: KubeApiServer, store_url: str, store_sessions: sessionmaker[Session], tmp_path: Path
) -> Iterator[Callable[..., Site]]:
    """Factory: make_site(pod_security="restricted", kubeconfig=None, **kube_settings) -> a Site on a
    new namespace, SUP connecting as admin unless given another kubeconfig."""
    sites: list[Site] = []

    def make(pod_security: str | None = "restricted", kubeconfig: Path | None = None, **kube: Any) -> Site:
        namespace = kubeapi.new_namespace(pod_security=pod_security)
        config = kubeconfig or kubeapi.admin_kubeconfig
        settings = Settings(
            database_url=store_url, kube={"namespace": namespace, "kubeconfig": str(config), **kube}
        )
        site = Site(kubeapi, namespace, settings, store_sessions, config)
        sites.append(site)
        return site

    yield make
    for site in sites:
        site.close()


@pytest.fixture
def site(make_site: Callable[..., Site]) -> Site:
    return make_site()
