"""The real servers, one of each for the whole test session, shared by every test directory
(registered as a pytest plugin by tests/conftest.py): slapd (one per directory schema), munge +
MariaDB + slurmdbd, etcd + kube-apiserver, and Keycloak, plus the helm and chromium binaries.

Each starts on free loopback ports in a temp dir the first time a test asks for it. Tests isolate
themselves inside a server (a fresh base DN, cluster or namespace), never by restarting it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import BrowserUnavailable, find_chromium
from tests.support.helm import HelmUnavailable, find_helm
from tests.support.keycloak import KeycloakServer, KeycloakUnavailable
from tests.support.kubeapi import KubeApiServer, KubeApiUnavailable
from tests.support.slapd import SlapdServer, SlapdUnavailable
from tests.support.slurmdbd import SlurmdbdServer, SlurmdbdUnavailable


def _start_slapd(schema: str) -> Iterator[SlapdServer]:
    try:
        server = SlapdServer(schema)
        server.start()
    except SlapdUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def slapd_rfc2307bis() -> Iterator[SlapdServer]:
    yield from _start_slapd("rfc2307bis")


@pytest.fixture(scope="session")
def slapd_rfc2307() -> Iterator[SlapdServer]:
    yield from _start_slapd("rfc2307")


@pytest.fixture(scope="session")
def slurmdbd() -> Iterator[SlurmdbdServer]:
    try:
        server = SlurmdbdServer()
    except SlurmdbdUnavailable as exc:
        pytest.skip(str(exc))
    server.start()
    try:
        yield server
    finally:
        server.stop()


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


@pytest.fixture(scope="session")
def keycloak() -> Iterator[KeycloakServer]:
    try:
        server = KeycloakServer().start()
    except KeycloakUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def chromium() -> str:
    try:
        return find_chromium()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
