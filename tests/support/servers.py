"""The real servers, one of each for the whole test session, shared by every test directory
(registered as a pytest plugin by tests/conftest.py): slapd (one per directory schema), 389 Directory
Server (one, for both schemas), munge +
MariaDB + slurmdbd, slurmctld + slurmd beside it (with an sssd reading an LDAP base of their own),
etcd + kube-apiserver, a real single-node Kubernetes that runs pods (`kube_cluster`), and Keycloak,
plus the helm and chromium binaries.

Each starts on free loopback ports in a temp dir the first time a test asks for it. Tests isolate
themselves inside a server (a fresh base DN, cluster or namespace), never by restarting it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import pytest

from tests.support.browser import BrowserUnavailable, find_chromium
from tests.support.ds389 import Ds389Server, Ds389Unavailable
from tests.support.helm import HelmUnavailable, find_helm
from tests.support.keycloak import KeycloakServer, KeycloakUnavailable
from tests.support.kubeapi import KubeApiServer, KubeApiUnavailable
from tests.support.kubenode import KubeCluster, KubeClusterUnavailable
from tests.support.slapd import SlapdServer, SlapdUnavailable
from tests.support.slurmctld import JobCluster, SlurmctldUnavailable, start_job_cluster
from tests.support.slurmdbd import SlurmdbdServer, SlurmdbdUnavailable
from tests.support.sssd import SssdUnavailable


class _Server(Protocol):
    def stop(self) -> None: ...


S = TypeVar("S", bound=_Server)


def _running(
    start: Callable[[], S], unavailable: type[Exception] | tuple[type[Exception], ...]
) -> Iterator[S]:
    """Start a server for the session (skipped, which CI turns into a failure, when this machine
    cannot run it) and stop it at the end."""
    try:
        server = start()
    except unavailable as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


def _slapd(schema: str) -> SlapdServer:
    return SlapdServer(schema).start()


def _slurmdbd() -> SlurmdbdServer:
    server = SlurmdbdServer()
    server.start()
    return server


@pytest.fixture(scope="session")
def slapd_rfc2307bis() -> Iterator[SlapdServer]:
    yield from _running(lambda: _slapd("rfc2307bis"), SlapdUnavailable)


@pytest.fixture(scope="session")
def slapd_rfc2307() -> Iterator[SlapdServer]:
    yield from _running(lambda: _slapd("rfc2307"), SlapdUnavailable)


@pytest.fixture(scope="session")
def ds389() -> Iterator[Ds389Server]:
    """389 Directory Server (~10 s to create, once); one instance serves both schema modes
    (`ds389.in_mode("rfc2307")`)."""
    yield from _running(lambda: Ds389Server().start(), Ds389Unavailable)


@pytest.fixture(scope="session")
def slurmdbd() -> Iterator[SlurmdbdServer]:
    yield from _running(_slurmdbd, SlurmdbdUnavailable)


@pytest.fixture(scope="session")
def slurm_jobs(slapd_rfc2307bis: SlapdServer, slurmdbd: SlurmdbdServer) -> Iterator[JobCluster]:
    """slurmctld + slurmd on slurmdbd's cluster, resolving users through an LDAP base of their own
    (`slurm_jobs.ldap`: the `ldap` settings for SUP) read by an sssd in whose namespace they run."""
    yield from _running(
        lambda: start_job_cluster(slapd_rfc2307bis, slurmdbd), (SlurmctldUnavailable, SssdUnavailable)
    )


@pytest.fixture(scope="session")
def kubeapi() -> Iterator[KubeApiServer]:
    yield from _running(lambda: KubeApiServer().start(), KubeApiUnavailable)


@pytest.fixture(scope="session")
def kube_cluster() -> Iterator[KubeCluster]:
    """The real single-node cluster (pods run), once per test run: ~10 s to start, ~5 s to stop.
    Fails rather than skips under SUP_TEST_NO_SKIP=1, with the reason."""
    try:
        cluster = KubeCluster().start()
    except KubeClusterUnavailable as exc:
        if os.environ.get("SUP_TEST_NO_SKIP") == "1":
            pytest.fail(f"the test Kubernetes cluster cannot start: {exc}", pytrace=False)
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        left = cluster.stop()
        assert not left, f"the test Kubernetes cluster left behind: {left}"


@pytest.fixture(scope="session")
def keycloak() -> Iterator[KeycloakServer]:
    yield from _running(lambda: KeycloakServer().start(), KeycloakUnavailable)


@pytest.fixture(scope="session")
def helm_binary() -> str:
    try:
        return find_helm()
    except HelmUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def chromium() -> str:
    try:
        return find_chromium()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
