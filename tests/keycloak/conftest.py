"""Keycloak source tests: a real Keycloak (one per session, a fresh realm per test), a SQLite store,
and for end-to-end checks a fresh base DN on the real slapd with the LDAP target."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from sup.app import create_app
from sup.config import Settings
from sup.store.session import make_engine, make_sessionmaker
from tests.ldap.site import Site
from tests.support.keycloak import KeycloakServer, Realm
from tests.support.ports import free_port
from tests.support.slapd import SlapdServer
from tests.support.sshd import StandInPod, keygen


@pytest.fixture
def realm(keycloak: KeycloakServer) -> Iterator[Realm]:
    realm = keycloak.new_realm()
    yield realm
    keycloak.admin().delete_realm(realm.name)


class Writes:
    """Counts the INSERT, UPDATE and DELETE statements an engine sends."""

    def __init__(self, engine: Engine) -> None:
        self.count = 0
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().split(" ", 1)[0].upper() in {"INSERT", "UPDATE", "DELETE"}:
            self.count += 1


@pytest.fixture
def store_engine(store_url: str) -> Iterator[Engine]:
    engine = make_engine(store_url)
    yield engine
    engine.dispose()


@pytest.fixture
def kc_sessions(store_engine: Engine) -> sessionmaker[Session]:
    return make_sessionmaker(store_engine)


@pytest.fixture
def client_for(store_engine: Engine) -> Iterator[Callable[[Settings], TestClient]]:
    """Factory: a TestClient of the app with these settings on the test store (closed after)."""
    clients: list[TestClient] = []

    def make(settings: Settings) -> TestClient:
        client = TestClient(create_app(settings, store_engine), raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def make_settings(store_url: str, realm: Realm) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        keycloak = realm.settings(**overrides.pop("keycloak", {}))
        return Settings(database_url=store_url, keycloak=keycloak, **overrides)

    return make


@pytest.fixture
def ldap_site(
    slapd_rfc2307bis: SlapdServer, store_url: str, kc_sessions: sessionmaker[Session], realm: Realm
) -> Iterator[Callable[..., Site]]:
    """Factory: a Site (tests/ldap) whose settings also hold this realm's Keycloak source."""
    sites: list[Site] = []

    def make(**overrides: Any) -> Site:
        base = slapd_rfc2307bis.new_base()
        keycloak = realm.settings(**overrides.pop("keycloak", {}))
        settings = Settings(
            database_url=store_url, ldap=slapd_rfc2307bis.ldap_settings(base), keycloak=keycloak, **overrides
        )
        site = Site(slapd_rfc2307bis, base, settings, kc_sessions)
        sites.append(site)
        return site

    yield make
    for site in sites:
        for target in site.targets:
            target.close()


@pytest.fixture
def ca_file(tmp_path: Path) -> Path:
    """SUP's CA key (ssh_ca.key_file), made with ssh-keygen as an operator does."""
    path = tmp_path / "ca" / "ssh_ca"
    path.parent.mkdir()
    keygen(path, "sup-test-ca")
    return path


@pytest.fixture
def pod(tmp_path: Path) -> Iterator[StandInPod]:
    """A stand-in sshd (a login pod, a site's bastion) with no authorized keys: it takes only the
    certificates its options trust."""
    stand_in = StandInPod(tmp_path / "pod", free_port(), authorized_keys=[])
    yield stand_in
    stand_in.stop()
