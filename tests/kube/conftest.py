"""Fixtures for the Kubernetes target: one real kube-apiserver (+ etcd) for the session, a fresh
namespace per test (labelled pod-security enforce=restricted), a SQLite store per test, and a Site
tying them together with SUP's settings."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from sup.config import Settings
from sup.store.session import make_engine, make_sessionmaker
from tests.kube.site import Site
from tests.support.helm import HelmUnavailable, find_helm
from tests.support.kubeapi import KubeApiServer, KubeApiUnavailable


@pytest.fixture(scope="session")
def kubeapi() -> Iterator[KubeApiServer]:
    try:
        server = KubeApiServer().start()
    except KubeApiUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def helm_binary() -> str:
    try:
        return find_helm()
    except HelmUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def store_url(tmp_path: Path, sqlite_template: Path) -> str:
    path = tmp_path / "sup.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def store_sessions(store_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(store_url)
    yield make_sessionmaker(engine)
    engine.dispose()


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
        for target in site.targets:
            target.close()


@pytest.fixture
def site(make_site: Callable[..., Site]) -> Site:
    return make_site()
